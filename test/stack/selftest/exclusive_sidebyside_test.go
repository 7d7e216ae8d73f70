package selftest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/etcdplan/etcdplan/test/kubelet/netsetup"
	"github.com/etcdplan/etcdplan/test/stack"
)

// Two checkouts run their stacks side by side: a second checkout (a directory with the same
// binaries) starts its stack while this one's runs, under another number it picks itself,
// runs a Pod on its own network, refuses a third checkout asking for that number, and goes
// down leaving this stack, its Pods' network namespaces and its bridge as they were.
func testTwoStacksSideBySide(t *testing.T, st *stack.Stack) {
	ctx := testContext(t)
	ns := newNamespace(ctx, t, st.Client(), "first")
	// On node-1: the tests beside this one stop node-3 and cut node-2 off.
	sleeper := restrictedPod(ns, "sleep", restrictedContainer("sleep", busyboxImage, "sleep", "3600"))
	sleeper.Spec.NodeName = "node-1"
	createPod(ctx, t, st.Client(), sleeper)
	// The Pod's network namespace: other tests' Pods may still be going meanwhile.
	netns, _ := netsetup.Names(st.Instance().NetnsPrefix(), string(waitPodReady(ctx, t, st.Client(), ns, "sleep").UID))
	if !slices.Contains(st.Snapshot().Netns(), netns) {
		t.Fatalf("no network namespace %s for the Pod (the kubelet's naming changed?): %v", netns, st.Snapshot().Netns())
	}

	second := checkout(t, st.Root())
	// Down goes first in the cleanups, so a stack that did not come up is taken down too.
	t.Cleanup(func() { stackctl(context.Background(), t, st.Root(), second, -1, "down") })
	stackctl(ctx, t, st.Root(), second, -1, "up")
	b, err := os.ReadFile(filepath.Join(second, ".stack", "instance"))
	if err != nil {
		t.Fatal(err)
	}
	n0, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	n := stack.Instance(n0)
	if n == st.Instance() {
		t.Fatalf("the second checkout's stack took this one's number, %d", n)
	}
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

	stackctl(ctx, t, st.Root(), second, -1, "down")
	if _, err := os.Stat("/sys/class/net/" + n.Bridge()); !os.IsNotExist(err) {
		t.Fatalf("bridge %s is still there after its stack went down (%v)", n.Bridge(), err)
	}
	if _, err := os.Stat("/sys/class/net/" + st.Instance().Bridge()); err != nil {
		t.Fatalf("the first stack's bridge: %v", err)
	}
	if !slices.Contains(st.Snapshot().Netns(), netns) {
		t.Fatalf("the first stack's Pod lost its network namespace %s when the second stack went down", netns)
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
		t.Fatalf("stackctl %s in %s (stack %d): %v\n%s", cmd, checkout, n, err, out)
	}
}

// stackctlOutput runs stackctl for a checkout, as stack n (n < 0: the checkout's own choice).
func stackctlOutput(ctx context.Context, root, checkout string, n stack.Instance, cmd string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, filepath.Join(root, "bin", "stackctl"), "--root", checkout, "--strict", cmd)
	c.Env = slices.DeleteFunc(os.Environ(), func(v string) bool { return strings.HasPrefix(v, "ETCDPLAN_STACK=") })
	if n >= 0 {
		c.Env = append(c.Env, fmt.Sprintf("ETCDPLAN_STACK=%d", n))
	}
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	err := c.Run()
	return out.String(), err
}
