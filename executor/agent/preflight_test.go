package agent

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/executor/pki"
)

// Only a data directory shown absent or empty is lost; one that cannot be read may hold
// the member's data and gets its own exit code. (Tests run as root, which reads any
// directory whatever its mode, so the unreadable cases are ones no user can read.)
func TestPreflight(t *testing.T) {
	tests := []struct {
		name string
		make func(t *testing.T, dir string) string // returns the data directory
		want int
	}{
		{"member directory holds data", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "member", "snap", "db"))
			return dir
		}, 0},
		{"data directory absent", func(t *testing.T, dir string) string { return filepath.Join(dir, "data") }, ExitDataLost},
		{"member directory absent", func(t *testing.T, dir string) string { return dir }, ExitDataLost},
		{"member directory empty", func(t *testing.T, dir string) string {
			require.NoError(t, os.Mkdir(filepath.Join(dir, "member"), 0o700))
			return dir
		}, ExitDataLost},
		{"member directory through a link", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "elsewhere", "snap", "db"))
			require.NoError(t, os.Symlink(filepath.Join(dir, "elsewhere"), filepath.Join(dir, "member")))
			return dir
		}, 0},
		{"member is a dangling link", func(t *testing.T, dir string) string {
			require.NoError(t, os.Symlink(filepath.Join(dir, "gone"), filepath.Join(dir, "member")))
			return dir
		}, ExitDataUnreadable},
		{"data directory is a dangling link", func(t *testing.T, dir string) string {
			require.NoError(t, os.Symlink(filepath.Join(dir, "gone"), filepath.Join(dir, "data")))
			return filepath.Join(dir, "data")
		}, ExitDataUnreadable},
		{"a file where the member directory should be", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "member"))
			return dir
		}, ExitDataUnreadable},
		{"a file where the data directory should be", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "data"))
			return filepath.Join(dir, "data")
		}, ExitDataUnreadable},
		{"data directory under a file (ENOTDIR)", func(t *testing.T, dir string) string {
			write(t, filepath.Join(dir, "file"))
			return filepath.Join(dir, "file", "data")
		}, ExitDataUnreadable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.make(t, t.TempDir())
			require.Equal(t, tt.want, preflight([]string{"--data-dir=" + dir, "--expect-data=true"}))
		})
	}
	require.Equal(t, 0, preflight([]string{"--data-dir=" + t.TempDir(), "--expect-data=false"}), "a new member expects nothing")
}

// A directory its user may not read is not lost (skipped as root, who reads anything).
func TestPreflightPermissionDenied(t *testing.T) {
	if os.Geteuid() == 0 {
		t.Skip("root reads any directory")
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "member", "snap", "db"))
	require.NoError(t, os.Chmod(filepath.Join(dir, "member"), 0))
	t.Cleanup(func() { _ = os.Chmod(filepath.Join(dir, "member"), 0o700) })
	require.Equal(t, ExitDataUnreadable, preflight([]string{"--data-dir=" + dir, "--expect-data=true"}))
}

func write(t *testing.T, path string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o700))
	require.NoError(t, os.WriteFile(path, []byte("x"), 0o600))
}

// The preflight lets etcd start only on the trust bundles the Pod was made for: it waits
// for them (a kubelet may mount a Secret a moment behind), and ends the Pod when they do
// not come, so that a new one is made for the bundles as they are.
func TestPreflightWaitsForTheTrustBundlesThePodWasMadeFor(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.crt"), filepath.Join(dir, "b.crt")
	one, err := pki.NewCA("one", time.Now(), time.Hour)
	require.NoError(t, err)
	two, err := pki.NewCA("two", time.Now(), time.Hour)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(a, pki.Bundle(one.Cert, two.Cert), 0o600))
	require.NoError(t, os.WriteFile(b, one.Cert, 0o600))
	want, err := pki.TrustHash(pki.Bundle(two.Cert, one.Cert), one.Cert) // the order within a bundle does not count
	require.NoError(t, err)
	require.Equal(t, 0, checkTrust(Preflight{Trust: want, TrustFiles: []string{a, b}}, 0))
	require.Equal(t, ExitTrustChanged, checkTrust(Preflight{Trust: want, TrustFiles: []string{b, a}}, 0))
	require.Equal(t, ExitTrustChanged, checkTrust(Preflight{Trust: want, TrustFiles: []string{a, filepath.Join(dir, "gone")}}, 0))
	require.Equal(t, 0, checkTrust(Preflight{}, 0), "a Pod made before it records nothing")
}

// The check ends once the member's own name resolves, asking on a short clock; a name that
// never resolves ends it at the bound, never as a failure (etcd retries on its own).
func TestPreflightWaitsForItsOwnName(t *testing.T) {
	asked := 0
	lookup := func(_ context.Context, host string) ([]string, error) {
		require.Equal(t, "demo-0.demo.ns.svc", host)
		if asked++; asked < 4 {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		return []string{"10.88.1.2"}, nil
	}
	awaitResolve("demo-0.demo.ns.svc", time.Minute, lookup)
	require.Equal(t, 4, asked, "asked again until it resolves, then no more")

	never := func(context.Context, string) ([]string, error) { return nil, errors.New("no such host") }
	start := time.Now()
	awaitResolve("demo-0.demo.ns.svc", 100*time.Millisecond, never)
	require.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond)

	awaitResolve("", time.Minute, never) // Pods made before: nothing to wait for
}
