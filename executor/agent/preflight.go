package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/pki"
)

// Preflight is the preflight check's arguments, in every member Pod's first init container.
type Preflight struct {
	// DataDir is etcd's data directory.
	DataDir string
	// ExpectData: the member joined the cluster before, so its data must be there.
	ExpectData bool
	// Trust, when set, is what the Pod's trust bundles, the files TrustFiles, hash to
	// (pki.TrustHash) as the Pod was made for them: etcd reads them once, at start, and the
	// planner counts on the Pod's annotation saying which.
	Trust      string
	TrustFiles []string
	// Resolve, when set, is the member's own host name, which the check waits to resolve
	// before etcd starts (awaitResolve).
	Resolve string
}

// Argv is the init container's command.
func (a Preflight) Argv() []string {
	argv := []string{Binary, CmdPreflight, "--data-dir=" + a.DataDir, fmt.Sprintf("--expect-data=%t", a.ExpectData)}
	if a.Trust != "" {
		argv = append(argv, "--trust="+a.Trust, "--trust-files="+strings.Join(a.TrustFiles, ","))
	}
	if a.Resolve != "" {
		argv = append(argv, "--resolve="+a.Resolve)
	}
	return argv
}

func (a *Preflight) parse(args []string) error {
	fs := flags(CmdPreflight)
	var files string
	fs.StringVar(&a.DataDir, "data-dir", vocab.DataDir, "etcd data directory")
	fs.BoolVar(&a.ExpectData, "expect-data", false, "the member joined the cluster before, so its data must be there")
	fs.StringVar(&a.Trust, "trust", "", "what the trust bundles hash to as the Pod was made for them")
	fs.StringVar(&files, "trust-files", "", "the trust bundles, comma-separated")
	fs.StringVar(&a.Resolve, "resolve", "", "the member's own host name, waited for to resolve before etcd starts")
	if err := parse(fs, args); err != nil {
		return err
	}
	if files != "" {
		a.TrustFiles = strings.Split(files, ",")
	}
	return nil
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
		return ready(a)
	}
	switch err := checkData(a.DataDir); {
	case err == nil:
		return ready(a)
	case errors.Is(err, errDataLost):
		return fail(ExitDataLost, "data directory %s holds no member data (member/ is absent or empty), but this member joined the cluster before: its data was lost", a.DataDir)
	default:
		return fail(ExitDataUnreadable, "data directory %s cannot be read: %v; its data may be intact, so it is not taken as lost", a.DataDir, err)
	}
}

// ready is the check's end once the data is as expected: the trust bundles, then the
// member's own name.
func ready(a Preflight) int {
	if code := checkTrust(a, trustWait); code != 0 {
		return code
	}
	awaitResolve(a.Resolve, resolveWait, net.DefaultResolver.LookupHost)
	return 0
}

// resolveWait bounds the wait for the member's own name to resolve. etcd resolves it at
// start, and retries once a second; past this bound etcd's own retries take over.
const resolveWait = 10 * time.Second

// resolveEvery is how often the preflight asks for its name: far below etcd's second.
const resolveEvery = 50 * time.Millisecond

// awaitResolve waits until host resolves, asking every 50 ms for up to wait (each ask is
// a few queries, one per search domain: gentle on the cluster's DNS). etcd resolves
// its own advertised peer URL as it starts, and sleeps a second before each retry: a Pod's
// name comes into the cluster's DNS a moment after the Pod has its IP (the headless
// Service's endpoints, then DNS), and an etcd that starts before that loses a second,
// often on the way of every join. Waiting here on a short clock starts etcd once its name
// resolves. It never fails the check: etcd retries on its own.
func awaitResolve(host string, wait time.Duration, lookup func(context.Context, string) ([]string, error)) {
	if host == "" {
		return
	}
	for deadline := time.Now().Add(wait); time.Now().Before(deadline); time.Sleep(resolveEvery) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		addrs, err := lookup(ctx, host)
		cancel()
		if err == nil && len(addrs) > 0 {
			return
		}
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

// trustWait is how long the preflight waits for the trust bundles the Pod was made for: a
// kubelet may mount a Secret from a cache a moment behind the API, and updates it in place
// within a minute or so.
const trustWait = 2 * time.Minute

// checkTrust waits until the mounted trust bundles are those the Pod was made for, so that
// etcd starts trusting the CAs its annotation says. If they do not become those (a user's
// Secret changed since), the Pod ends, and a new one is made for them as they are.
func checkTrust(a Preflight, wait time.Duration) int {
	if a.Trust == "" {
		return 0
	}
	var got string
	for deadline := time.Now().Add(wait); ; time.Sleep(time.Second) {
		bundles := make([][]byte, len(a.TrustFiles))
		var err error
		for i, f := range a.TrustFiles {
			if bundles[i], err = os.ReadFile(f); err != nil {
				break
			}
		}
		if err == nil {
			got, err = pki.TrustHash(bundles...)
		}
		if err == nil && got == a.Trust {
			return 0
		}
		if time.Now().After(deadline) {
			return fail(ExitTrustChanged, "the mounted trust bundles %s hash to %q (%v), and the Pod was made for %q: a new Pod mounts them as they are",
				strings.Join(a.TrustFiles, ","), got, err, a.Trust)
		}
	}
}
