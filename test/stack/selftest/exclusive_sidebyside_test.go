package selftest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/etcdplan/etcdplan/test/stack"
)

// Two checkouts run their stacks side by side: a second checkout (a directory with the same
// binaries) starts stack N+1 while this one's runs, runs a Pod on its own network, refuses a
// third checkout asking for the same number, and goes down leaving this stack, its Pods'
// network namespaces and its bridge as they were.
func TestExclusiveTwoStacksSideBySide(t *testing.T) {
	exclusive(t)
	st := startStack(t)
	ctx := testContext(t)
	n := st.Instance() + 1
	if n > stack.MaxInstance {
		n = st.Instance() - 1
	}
	ns := newNamespace(ctx, t, st.Client(), "first")
	createPod(ctx, t, st.Client(), restrictedPod(ns, "sleep", restrictedContainer("sleep", busyboxImage, "sleep", "3600")))
	waitPodReady(ctx, t, st.Client(), ns, "sleep")
	before := st.Snapshot().Netns()

	second := checkout(t, st.Root())
	stackctl(ctx, t, st.Root(), second, n, "up")
	t.Cleanup(func() { stackctl(context.Background(), t, st.Root(), second, n, "down") })
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(second, ".stack", "kubeconfig"))
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("https://127.0.0.1:%d", n.APIServerPort()); cfg.Host != want {
		t.Fatalf("the second stack's API server is %s, want %s", cfg.Host, want)
	}
	c2 := kubernetes.NewForConfigOrDie(cfg)
	ns2 := newNamespace(ctx, t, c2, "second")
	createPod(ctx, t, c2, restrictedPod(ns2, "sleep", restrictedContainer("sleep", busyboxImage, "sleep", "3600")))
	ip := waitPodReady(ctx, t, c2, ns2, "sleep").Status.PodIP
	if want := fmt.Sprintf("10.%d.", 88+int(n)); !strings.HasPrefix(ip, want) {
		t.Fatalf("a Pod of stack %d has the address %s, want one in %s0.0/16", n, ip, want)
	}

	third := checkout(t, st.Root())
	out, err := stackctlOutput(ctx, st.Root(), third, n, "up")
	if err == nil || !strings.Contains(out, "runs for the checkout "+second) {
		t.Fatalf("a third checkout started stack %d beside the second's (%v):\n%s", n, err, out)
	}

	stackctl(ctx, t, st.Root(), second, n, "down")
	if _, err := os.Stat("/sys/class/net/" + n.Bridge()); !os.IsNotExist(err) {
		t.Fatalf("bridge %s is still there after its stack went down (%v)", n.Bridge(), err)
	}
	if _, err := os.Stat("/sys/class/net/" + st.Instance().Bridge()); err != nil {
		t.Fatalf("the first stack's bridge: %v", err)
	}
	if after := st.Snapshot().Netns(); strings.Join(after, ",") != strings.Join(before, ",") {
		t.Fatalf("the first stack's network namespaces were %v, and are %v after the second went down", before, after)
	}
	if _, err := st.Client().CoreV1().Pods(ns).Get(ctx, "sleep", metav1.GetOptions{}); err != nil {
		t.Fatalf("the first stack after the second went down: %v", err)
	}
	waitPodReady(ctx, t, st.Client(), ns, "sleep")
}

// checkout makes a directory that stands for another checkout of the repository: the same
// binaries (bin/ linked), its own state.
func checkout(t *testing.T, root string) string {
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(root, "bin"), filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	return dir
}

func stackctl(ctx context.Context, t *testing.T, root, checkout string, n stack.Instance, cmd string) {
	t.Helper()
	if out, err := stackctlOutput(ctx, root, checkout, n, cmd); err != nil {
		t.Fatalf("ETCDPLAN_STACK=%d stackctl %s in %s: %v\n%s", n, cmd, checkout, err, out)
	}
}

func stackctlOutput(ctx context.Context, root, checkout string, n stack.Instance, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, filepath.Join(root, "bin", "stackctl"), "--root", checkout, "--strict", cmd)
	c.Env = append(os.Environ(), fmt.Sprintf("ETCDPLAN_STACK=%d", n))
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	return out.String(), err
}
