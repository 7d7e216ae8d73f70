package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/etcdplan/etcdplan/api/vocab"
)

// Preflight is the preflight check's arguments, in every member Pod's first init container.
type Preflight struct {
	// DataDir is etcd's data directory.
	DataDir string
	// ExpectData: the member joined the cluster before, so its data must be there.
	ExpectData bool
}

// Argv is the init container's command.
func (a Preflight) Argv() []string {
	return []string{Binary, CmdPreflight, "--data-dir=" + a.DataDir, fmt.Sprintf("--expect-data=%t", a.ExpectData)}
}

func (a *Preflight) parse(args []string) error {
	fs := flags(CmdPreflight)
	fs.StringVar(&a.DataDir, "data-dir", vocab.DataDir, "etcd data directory")
	fs.BoolVar(&a.ExpectData, "expect-data", false, "the member joined the cluster before, so its data must be there")
	return parse(fs, args)
}

// errDataLost: the member's data directory is absent or empty.
var errDataLost = errors.New("no data")

// preflight runs in member Pods before etcd. A member that has joined the cluster must
// find its data: etcd started on an empty directory in an existing cluster would crash
// with a raft log mismatch, so the Pod stops here and the operator replaces the member.
// Only data shown gone counts as lost: a directory that cannot be read (permissions, an
// I/O error, a file or a dangling link in its place) may still hold the member's data,
// and replacing the member would delete it.
func preflight(args []string) int {
	var a Preflight
	if err := a.parse(args); err != nil {
		return ExitUsage
	}
	if !a.ExpectData {
		return 0
	}
	switch err := checkData(a.DataDir); {
	case err == nil:
		return 0
	case errors.Is(err, errDataLost):
		return fail(ExitDataLost, "data directory %s holds no member data (member/ is absent or empty), but this member joined the cluster before: its data was lost", a.DataDir)
	default:
		return fail(ExitDataUnreadable, "data directory %s cannot be read: %v; its data may be intact, so it is not taken as lost", a.DataDir, err)
	}
}

// checkData returns nil when <dataDir>/member holds entries, errDataLost when it or the
// data directory is absent or an empty directory, and any other error as it is.
func checkData(dataDir string) error {
	member := filepath.Join(dataDir, "member")
	for _, dir := range []string{dataDir, member} {
		// Lstat, not Stat: a dangling link reads as absent through Stat.
		fi, err := os.Lstat(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return errDataLost
		case err != nil:
			return err
		case fi.Mode()&fs.ModeSymlink != 0:
			if fi, err = os.Stat(dir); err != nil {
				target, _ := os.Readlink(dir)
				return fmt.Errorf("%s is a link to %s, which cannot be read: %w", dir, target, err)
			}
		}
		if !fi.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
	}
	entries, err := os.ReadDir(member)
	switch {
	case err != nil:
		return err
	case len(entries) == 0:
		return errDataLost
	}
	return nil
}
