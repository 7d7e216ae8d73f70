package shim

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestMain(m *testing.M) {
	if spec := os.Getenv("SHIM_TEST_SPEC"); spec != "" {
		if err := Main(spec); err != nil {
			os.Stderr.WriteString("shim: " + err.Error() + "\n")
			os.Exit(120)
		}
	}
	os.Exit(m.Run())
}

// run starts the test binary as the shim in a new mount namespace, as the kubelet does.
func run(t *testing.T, s Spec, newNS bool) (string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "spec.json")
	s.ParentPID = os.Getpid()
	if err := Write(path, s); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = []string{"SHIM_TEST_SPEC=" + path}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if newNS {
		cmd.SysProcAttr.Unshareflags = syscall.CLONE_NEWNS
		cmd.SysProcAttr.Cloneflags = syscall.CLONE_NEWUTS
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestShim(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "data"), []byte("payload"), 0o644); err != nil {
		t.Fatal(err)
	}
	ro := t.TempDir()
	target := filepath.Join(t.TempDir(), "deep", "data-dir")
	roTarget := filepath.Join(t.TempDir(), "ro")
	fileTarget := filepath.Join(t.TempDir(), "etc", "one-file")
	script := `set -e
cat ` + target + `/data
echo " uid=$(id -u) gid=$(id -g) groups=$(id -G) host=$(hostname) pwd=$(pwd) env=$FOO"
cat ` + fileTarget + `
if touch ` + roTarget + `/x 2>/dev/null; then echo WRITABLE; fi
touch ` + target + `/written`
	s := Spec{
		Hostname: "pod-0", NewUTS: true,
		Mounts: []Mount{
			{Source: src, Target: target},
			{Source: ro, Target: roTarget, ReadOnly: true},
			{Source: filepath.Join(src, "data"), Target: fileTarget},
		},
		UID: 65534, GID: 65534, Groups: []int{65534, 2000},
		WorkDir: "/tmp", Path: "/bin/sh", Argv: []string{"sh", "-c", script},
		Env: []string{"FOO=bar", "PATH=/usr/bin:/bin"},
	}
	// t.TempDir makes 0700 directories; the container user must traverse them.
	for _, d := range []string{src, ro, filepath.Dir(src), filepath.Dir(filepath.Dir(target)),
		filepath.Dir(roTarget), filepath.Dir(filepath.Dir(fileTarget))} {
		if err := os.Chmod(d, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	out, err := run(t, s, true)
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	want := "payload uid=65534 gid=65534 groups=65534 2000 host=pod-0 pwd=/tmp env=bar\npayload"
	if strings.TrimSpace(out) != want {
		t.Fatalf("got %q\nwant %q", out, want)
	}
	if _, err := os.Stat(filepath.Join(src, "written")); err != nil {
		t.Fatal("write through the bind mount did not reach the volume")
	}
	// Nothing leaked to the host's mount namespace.
	if entries, _ := os.ReadDir(target); len(entries) != 0 {
		t.Fatalf("host sees the container's mount: %v", entries)
	}
	if h, _ := os.Hostname(); h == "pod-0" {
		t.Fatal("host name changed")
	}
}

func TestShimRefusesHostMountNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	s := Spec{Mounts: []Mount{{Source: t.TempDir(), Target: filepath.Join(t.TempDir(), "x")}},
		UID: -1, GID: -1, Path: "/bin/true", Argv: []string{"true"}}
	out, err := run(t, s, false)
	if err == nil || !strings.Contains(out, "refusing to mount") {
		t.Fatalf("want refusal, got %v %q", err, out)
	}
}

func TestShimMissingBinary(t *testing.T) {
	s := Spec{UID: -1, GID: -1, Path: "/nonexistent/binary", Argv: []string{"x"}}
	out, err := run(t, s, false)
	if err == nil || !strings.Contains(out, "no such file") {
		t.Fatalf("want exec error, got %v %q", err, out)
	}
}

// TestShimMountHidesSource mounts a volume over the directory holding another volume's
// source, as an emptyDir at /work does over a state directory under /work.
func TestShimMountHidesSource(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	root := t.TempDir()
	a, b := filepath.Join(root, "a"), filepath.Join(root, "b")
	for _, d := range []string{a, b} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(b, "f"), []byte("from-b"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := Spec{Mounts: []Mount{{Source: b, Target: root + "/sub"}, {Source: a, Target: root}},
		UID: -1, GID: -1, Path: "/bin/cat", Argv: []string{"cat", root + "/sub/f"}}
	out, err := run(t, s, true)
	if err != nil || out != "from-b" {
		t.Fatalf("got %q %v", out, err)
	}
}
