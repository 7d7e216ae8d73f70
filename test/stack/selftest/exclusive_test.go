package selftest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdplan/etcdplan/test/stack"
)

// The tests named TestExclusive* need the stack to themselves: they stop a node, cut one off
// the API server and take the whole stack down (the tests named TestExclusiveZZ*, last). `make test` runs them after `go test ./...`,
// alone (make stack-selftest-exclusive), with ETCDPLAN_STACK_EXCLUSIVE=1; under a plain `go
// test ./...`, where other packages share the stack, they skip.
func exclusive(t *testing.T) {
	t.Helper()
	if os.Getenv("ETCDPLAN_STACK_EXCLUSIVE") != "1" {
		t.Skip("needs the stack to itself: run by `make stack-selftest-exclusive` (part of `make test`)")
	}
}

func nodeReady(ctx context.Context, st *stack.Stack, name string) (bool, error) {
	n, err := st.Client().CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, nil
		}
	}
	return false, nil
}

// The tests that stop a node (node-3), cut one off the API server (node-2), start a second
// stack beside this one (its Pod on node-1) and run Pods on node-4 (with
// ETCDPLAN_REAL_NODE=1, as make stack-selftest-exclusive sets it) touch different nodes:
// they run side by side.
func TestExclusiveNodes(t *testing.T) {
	exclusive(t)
	st := startStack(t)
	t.Run("TwoStacksSideBySide", func(t *testing.T) { t.Parallel(); testTwoStacksSideBySide(t, st) })
	t.Run("StopNode", func(t *testing.T) { t.Parallel(); testStopNode(t, st) })
	t.Run("CutNodeFromAPI", func(t *testing.T) { t.Parallel(); testCutNodeFromAPI(t, st) })
	t.Run("node-4", func(t *testing.T) {
		t.Parallel()
		st := realNode(t)
		t.Run("RestrictedPod", func(t *testing.T) { t.Parallel(); testRealNodeRestrictedPod(t, st) })
		t.Run("MemoryLimit", func(t *testing.T) { t.Parallel(); testRealNodeMemoryLimit(t, st) })
		t.Run("EtcdExecAndPortForward", func(t *testing.T) { t.Parallel(); testRealNodeEtcdExecAndPortForward(t, st) })
	})
}

// A stopped node's containers die and the Node goes NotReady; started again, it turns Ready
// and runs its Pod again.
func testStopNode(t *testing.T, st *stack.Stack) {
	c := st.Client()
	ctx := testContext(t)
	ns := newNamespace(ctx, t, c, "node")
	const node = "node-3"

	pod := restrictedPod(ns, "etcd", etcdContainer(singleEtcdArgs("etcd", "127.0.0.1")...))
	pod.Spec.NodeName = node
	pod.Spec.Volumes = []corev1.Volume{emptyDir("data")}
	createPod(ctx, t, c, pod)
	ip := waitPodReady(ctx, t, c, ns, "etcd").Status.PodIP

	if err := st.StopNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted { // leave the stack whole for the tests after this one
			_ = st.StartNode(context.Background(), node)
		}
	})
	waitFor(ctx, t, "etcd on the stopped node to be unreachable", func(ctx context.Context) (bool, error) {
		return !reachable(ip), nil
	})
	waitFor(ctx, t, node+" NotReady", func(ctx context.Context) (bool, error) {
		ready, err := nodeReady(ctx, st, node)
		return !ready, err
	})

	if err := st.StartNode(ctx, node); err != nil {
		t.Fatal(err)
	}
	restarted = true
	waitFor(ctx, t, node+" Ready again", func(ctx context.Context) (bool, error) {
		return nodeReady(ctx, st, node)
	})
	ip = waitPodReady(ctx, t, c, ns, "etcd").Status.PodIP
	waitFor(ctx, t, "etcd on the restarted node to answer", func(ctx context.Context) (bool, error) {
		return true, etcdPut(ctx, ip, "k", "v")
	})
}

// A node cut off from the API server runs its containers on: a Pod deleted meanwhile keeps
// running and stays Terminating, a Pod bound to the node meanwhile does not start, and the
// Node goes NotReady. Reconnected, the node stops and deletes the one, starts the other and
// turns Ready.
func testCutNodeFromAPI(t *testing.T, st *stack.Stack) {
	c := st.Client()
	ctx := testContext(t)
	ns := newNamespace(ctx, t, c, "cutapi")
	const node = "node-2"

	pod := restrictedPod(ns, "etcd", etcdContainer(singleEtcdArgs("etcd", "127.0.0.1")...))
	pod.Spec.NodeName = node
	pod.Spec.Volumes = []corev1.Volume{emptyDir("data")}
	createPod(ctx, t, c, pod)
	ip := waitPodReady(ctx, t, c, ns, "etcd").Status.PodIP

	if err := st.CutNodeFromAPI(ctx, node); err != nil {
		t.Fatal(err)
	}
	reconnected := false
	t.Cleanup(func() {
		if !reconnected { // leave the stack whole for the tests after this one
			_ = st.ReconnectNodeToAPI(context.Background(), node)
		}
	})
	if err := c.CoreV1().Pods(ns).Delete(ctx, "etcd", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	late := restrictedPod(ns, "late", etcdContainer(singleEtcdArgs("late", "127.0.0.1")...))
	late.Spec.NodeName = node
	late.Spec.Volumes = []corev1.Volume{emptyDir("data")}
	createPod(ctx, t, c, late)
	waitFor(ctx, t, node+" NotReady", func(ctx context.Context) (bool, error) {
		ready, err := nodeReady(ctx, st, node)
		return !ready, err
	})
	if err := etcdPut(ctx, ip, "k", "v"); err != nil {
		t.Fatalf("etcd in the deleted Pod on the cut-off node: %v", err)
	}
	for _, name := range []string{"etcd", "late"} {
		p, err := c.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		switch {
		case err != nil:
			t.Fatal(err)
		case name == "etcd" && p.DeletionTimestamp == nil:
			t.Fatal("the deleted Pod has no deletion timestamp")
		case name == "late" && (p.Status.Phase != corev1.PodPending || p.Status.PodIP != ""):
			dumpPods(t, c, ns)
			t.Fatal("a Pod bound to the cut-off node started")
		}
	}

	if err := st.ReconnectNodeToAPI(ctx, node); err != nil {
		t.Fatal(err)
	}
	reconnected = true
	waitPodGone(ctx, t, c, ns, "etcd")
	// Its address may be the new Pod's by now, with an etcd of its own, without the key.
	if v, _ := etcdGet(ctx, ip, "k"); v != "" {
		t.Fatal("etcd of the deleted Pod still answers")
	}
	waitPodReady(ctx, t, c, ns, "late")
	waitFor(ctx, t, node+" Ready again", func(ctx context.Context) (bool, error) {
		return nodeReady(ctx, st, node)
	})
}

// `make stack-down` (stackctl down) leaves no process, network namespace, mount or bridge
// behind, even with Pods running that use a PVC, an emptyDir, a Secret and a service-account
// token. It runs last: the stack is down afterwards.
func TestExclusiveZZDownLeavesNothing(t *testing.T) {
	exclusive(t)
	st := startStack(t)
	c := st.Client()
	ctx := testContext(t)
	ns := newNamespace(ctx, t, c, "down")

	createPVC(ctx, t, c, ns, "data")
	if _, err := c.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"},
		StringData: map[string]string{"password": "x"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	etcd := etcdContainer(singleEtcdArgs("etcd", "127.0.0.1")...)
	etcd.VolumeMounts = append(etcd.VolumeMounts,
		corev1.VolumeMount{Name: "secret", MountPath: "/etc/secret", ReadOnly: true},
		corev1.VolumeMount{Name: "scratch", MountPath: "/scratch"})
	p1 := restrictedPod(ns, "etcd", etcd)
	p1.Spec.Volumes = []corev1.Volume{pvcVolume("data", "data"), emptyDir("scratch"),
		{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}}}
	createPod(ctx, t, c, p1)
	sleeper := restrictedContainer("sleep", busyboxImage, "sleep", "3600")
	createPod(ctx, t, c, restrictedPod(ns, "sleep", sleeper))
	waitPodReady(ctx, t, c, ns, "etcd")
	waitPodReady(ctx, t, c, ns, "sleep")

	snap := st.Snapshot()
	t.Logf("before down: network namespaces %v; processes %v", snap.Netns(), snap.Processes())
	// Two Pods run, so there are at least two Pod network namespaces with processes in them;
	// finding none would make the check below prove nothing.
	if len(snap.Netns()) < 2 {
		t.Fatalf("found %d network namespaces named %s*, want at least 2 (the kubelet's naming changed?)",
			len(snap.Netns()), st.Instance().NetnsPrefix())
	}
	if len(snap.Processes()) < 2+4+1+3 {
		t.Fatalf("found only processes %v", snap.Processes())
	}

	stack.Release()
	cmd := exec.CommandContext(ctx, filepath.Join(st.Root(), "bin", "stackctl"), "--root", st.Root(), "--strict", "down")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	t.Logf("stackctl down:\n%s", out.String())
	if err != nil {
		t.Fatalf("stackctl down: %v", err)
	}
	if left := snap.Leftovers(); !left.Empty() {
		t.Fatalf("after stackctl down: %s", left)
	}
	if _, err := os.Stat(st.Kubeconfig()); !os.IsNotExist(err) {
		t.Fatalf("%s still exists after down (%v)", st.Kubeconfig(), err)
	}
	if api := fmt.Sprintf("127.0.0.1:%d", st.Instance().APIServerPort()); reachableAddr(api) {
		t.Fatalf("something still listens on %s", api)
	}
}

func reachableAddr(addr string) bool {
	conn, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}
