package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/resources"
)

// errDataLost: the member's data directory is absent or empty.
var errDataLost = errors.New("no data")

// preflight runs in member Pods before etcd. A member that has joined the cluster must
// find its data: etcd started on an empty directory in an existing cluster would crash
// with a raft log mismatch, so the Pod stops here and the operator replaces the member.
// Only data shown gone counts as lost: a directory that cannot be read (permissions, an
// I/O error, a file or a dangling link in its place) may still hold the member's data,
// and replacing the member would delete it.
func preflight(args []string) int {
	flags := flag.NewFlagSet("preflight", flag.ContinueOnError)
	dataDir := flags.String("data-dir", vocab.DataDir, "etcd data directory")
	expectData := flags.Bool("expect-data", false, "the member joined the cluster before, so its data must be there")
	if err := flags.Parse(args); err != nil {
		return 2
	}
	if !*expectData {
		return 0
	}
	switch err := checkData(*dataDir); {
	case err == nil:
		return 0
	case errors.Is(err, errDataLost):
		fmt.Fprintf(os.Stderr, "data directory %s holds no member data (member/ is absent or empty), but this member joined the cluster before: its data was lost\n", *dataDir)
		return resources.PreflightDataLost
	default:
		fmt.Fprintf(os.Stderr, "data directory %s cannot be read: %v; its data may be intact, so it is not taken as lost\n", *dataDir, err)
		return resources.PreflightDataUnreadable
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
