package objstore

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"

	"github.com/etcdplan/etcdplan/test/stack"
)

// FakeGCS is a fake-gcs-server of the test's own, serving Google Cloud Storage's JSON API
// over plain HTTP with its data in a temporary directory. It takes no credentials.
type FakeGCS struct {
	Endpoint string
}

// StartFakeGCS starts a fake-gcs-server listening on addr ("" for a free local port) and
// stops it when the test ends. It fails the test when bin/ has none: make test builds it.
func StartFakeGCS(t testing.TB, addr string) *FakeGCS {
	t.Helper()
	bin := serverBin(t, "fake-gcs-server", stack.FakeGCSVersion)
	if addr == "" {
		addr = FreeAddr(t)
	}
	host, port, _ := strings.Cut(addr, ":")
	g := &FakeGCS{Endpoint: "http://" + addr}
	cmd := exec.Command(bin, "-scheme", "http", "-host", host, "-port", port, "-external-url", g.Endpoint,
		"-backend", "filesystem", "-filesystem-root", t.TempDir(), "-log-level", "warn")
	startServer(t, cmd, "fake-gcs-server", g.Endpoint+"/storage/v1/b")
	return g
}

// Client is a storage client of the server.
func (g *FakeGCS) Client(t testing.TB) *storage.Client {
	t.Helper()
	c, err := storage.NewClient(context.Background(), option.WithEndpoint(g.Endpoint+"/storage/v1/"),
		option.WithoutAuthentication(), option.WithTelemetryDisabled(), storage.WithJSONReads())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Bucket creates a bucket.
func (g *FakeGCS) Bucket(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := g.Client(t).Bucket(name).Create(ctx, "etcdplan-test", nil); err != nil {
		t.Fatalf("creating bucket %s: %v", name, err)
	}
}

// serverBin is the path of a server make backup-bins built into bin/<name>-<version>/; it
// fails the test when there is none.
func serverBin(t testing.TB, name, version string) string {
	t.Helper()
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(root, "bin", name+"-"+version, name)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("no %s at %s: run make backup-bins (make test builds it)", name, bin)
	}
	return bin
}

// startServer starts cmd with its output in a log file, waits until ready answers 200 and
// stops it when the test ends (or, killed, when the test process dies).
func startServer(t testing.TB, cmd *exec.Cmd, name, ready string) {
	t.Helper()
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	log, err := os.Create(filepath.Join(t.TempDir(), name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(time.Minute)
	for {
		resp, err := http.Get(ready)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(log.Name())
			t.Fatalf("%s did not get ready at %s: %v\n%s", name, ready, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
