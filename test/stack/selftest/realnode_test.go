package selftest

import (
	"bufio"
	"context"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdplan/etcdplan/test/stack"
)

// The tests named TestRealNode* run Pods on node-4, the real kubelet over containerd and runc
// (ETCDPLAN_REAL_NODE=1): where the security context, cgroup limits and images are enforced.
// Without node-4 in the stack they skip; `make test` runs them inside TestExclusiveNodes
// (make stack-selftest-exclusive asks for node-4).

// realNode skips the test unless the stack has node-4, Ready.
func realNode(t *testing.T) *stack.Stack {
	t.Helper()
	if !stack.RealNodeWanted() {
		t.Skip("needs node-4: ETCDPLAN_REAL_NODE=1 (make test runs these in TestExclusiveNodes)")
	}
	st := startStack(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if ok, err := nodeReady(ctx, st, stack.RealNodeName); err != nil || !ok {
		t.Fatalf("%s is not Ready in a stack started with ETCDPLAN_REAL_NODE=1 (%v): take the stack down and start it again",
			stack.RealNodeName, err)
	}
	return st
}

// onRealNode makes a Pod ask for node-4: its label and a toleration of its taint.
func onRealNode(p *corev1.Pod) *corev1.Pod {
	p.Spec.NodeSelector = map[string]string{stack.RealNodeLabel: "true"}
	p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: stack.RealNodeLabel, Operator: corev1.TolerationOpEqual,
		Value: "true", Effect: corev1.TaintEffectNoSchedule})
	return p
}

// tool is a restricted container of the pause image running the pause tool's commands.
func tool(name string, commands ...string) corev1.Container {
	return restrictedContainer(name, stack.PauseImage, append([]string{"/pause"}, commands...)...)
}

// A Pod with the restricted security context runs on node-4 as it asks: its process has the
// uid, no capabilities, no_new_privs and seccomp filtering, its root is read-only, and it
// reads a PVC (written by its init container), a Secret and a projected service-account
// token. kubectl logs shows what it printed.
func TestRealNodeRestrictedPod(t *testing.T) {
	t.Parallel()
	testRealNodeRestrictedPod(t, realNode(t))
}

func testRealNodeRestrictedPod(t *testing.T, st *stack.Stack) {
	c := st.Client()
	ctx := testContext(t)
	ns := newNamespace(ctx, t, c, "real")
	createPVC(ctx, t, c, ns, "data")
	if _, err := c.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"},
		StringData: map[string]string{"password": "s3cret"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expiry := int64(3600)
	main := tool("main", "cat", "/proc/self/status", "/data/f", "/etc/secret/password", "--",
		"write", "/data/written-by-65532", "x", "--", "write", "/not-writable", "x")
	main.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"},
		{Name: "secret", MountPath: "/etc/secret", ReadOnly: true}, {Name: "token", MountPath: "/var/run/secrets/tokens", ReadOnly: true}}
	init := tool("init", "write", "/data/f", "from-init\n", "--", "exit")
	init.VolumeMounts = main.VolumeMounts[:1]
	pod := onRealNode(restrictedPod(ns, "restricted", main))
	pod.Spec.InitContainers = []corev1.Container{init}
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Spec.Volumes = []corev1.Volume{pvcVolume("data", "data"),
		{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}},
		{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
			ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: &expiry, Audience: "etcdplan"}}}}}},
	}
	createPod(ctx, t, c, pod)
	// The last command writes to the read-only root and fails: the container exits 1.
	done := waitPodDone(ctx, t, c, ns, "restricted")
	if done.Spec.NodeName != stack.RealNodeName {
		t.Fatalf("ran on %q", done.Spec.NodeName)
	}
	out, code := kubectl(ctx, st, "-n", ns, "logs", "restricted", "-c", "main")
	if code != 0 {
		t.Fatalf("kubectl logs: %d: %s", code, out)
	}
	t.Logf("the container's output:\n%s", out)
	for _, want := range []string{
		`(?m)^Uid:\s+65532\s+65532\s+65532\s+65532$`,
		`(?m)^Gid:\s+65532\s`,
		`(?m)^CapEff:\s+0000000000000000$`,
		`(?m)^CapPrm:\s+0000000000000000$`,
		`(?m)^NoNewPrivs:\s+1$`,
		`(?m)^Seccomp:\s+2$`,
		`(?m)^from-init$`,
		`(?m)^s3cret`,
		`pause: open /not-writable: read-only file system`,
	} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("the container's output has no %s", want)
		}
	}
	if s := done.Status.ContainerStatuses; len(s) != 1 || s[0].State.Terminated == nil || s[0].State.Terminated.ExitCode != 1 {
		t.Errorf("the container's status: %+v", s)
	}
}

// A container over its memory limit on node-4 is OOM-killed: the cgroup limit is enforced.
func TestRealNodeMemoryLimit(t *testing.T) {
	t.Parallel()
	testRealNodeMemoryLimit(t, realNode(t))
}

func testRealNodeMemoryLimit(t *testing.T, st *stack.Stack) {
	c := st.Client()
	ctx := testContext(t)
	ns := newNamespace(ctx, t, c, "oom")
	hog := tool("hog", "alloc", "256")
	limit := corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("48Mi")}
	hog.Resources = corev1.ResourceRequirements{Requests: limit, Limits: limit}
	pod := onRealNode(restrictedPod(ns, "hog", hog))
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	createPod(ctx, t, c, pod)
	done := waitPodDone(ctx, t, c, ns, "hog")
	s := done.Status.ContainerStatuses
	if len(s) != 1 || s[0].State.Terminated == nil || s[0].State.Terminated.Reason != "OOMKilled" {
		t.Fatalf("want the container OOMKilled, got %+v", s)
	}
}

// etcd from its image runs on node-4 in a restricted Pod: the host reaches it at its Pod
// address, and kubectl exec and port-forward reach it through the real kubelet.
func TestRealNodeEtcdExecAndPortForward(t *testing.T) {
	t.Parallel()
	testRealNodeEtcdExecAndPortForward(t, realNode(t))
}

func testRealNodeEtcdExecAndPortForward(t *testing.T, st *stack.Stack) {
	c := st.Client()
	ctx := testContext(t)
	ns := newNamespace(ctx, t, c, "realetcd")
	pod := onRealNode(restrictedPod(ns, "etcd", etcdContainer(singleEtcdArgs("etcd", "127.0.0.1")...)))
	pod.Spec.Volumes = []corev1.Volume{emptyDir("data")}
	createPod(ctx, t, c, pod)
	ready := waitPodReady(ctx, t, c, ns, "etcd")
	if ready.Spec.NodeName != stack.RealNodeName {
		t.Fatalf("ran on %q", ready.Spec.NodeName)
	}
	ip := ready.Status.PodIP
	if err := etcdPut(ctx, ip, "hello", "node-4"); err != nil {
		t.Fatalf("put at %s: %v", ip, err)
	}

	out, code := kubectl(ctx, st, "-n", ns, "exec", "etcd", "--", "etcdctl", "get", "hello", "--print-value-only")
	if code != 0 || strings.TrimSpace(out) != "node-4" {
		t.Fatalf("kubectl exec etcdctl get: %d %q", code, out)
	}
	if out, code := kubectl(ctx, st, "-n", ns, "exec", "etcd", "--", "etcdctl", "no-such-command"); code == 0 {
		t.Fatalf("kubectl exec of a failing command exited 0: %q", out)
	}
	if out, code := kubectl(ctx, st, "-n", ns, "logs", "etcd"); code != 0 || !strings.Contains(out, "serving client traffic") {
		t.Fatalf("kubectl logs: %d %q", code, out)
	}

	pfCtx, stop := context.WithCancel(ctx)
	defer stop()
	cmd := exec.CommandContext(pfCtx, filepath.Join(st.Root(), "bin", "kubectl"), "--kubeconfig", st.Kubeconfig(), "-n", ns,
		"port-forward", "pod/etcd", "--address", "127.0.0.1", "0:2379")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { stop(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	m := regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> 2379`).FindStringSubmatch(line)
	if err != nil || m == nil {
		t.Fatalf("port-forward said %q: %v", line, err)
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"127.0.0.1:" + m[1]}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	putCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := cli.Put(putCtx, "through", "port-forward"); err != nil {
		t.Fatalf("put through the forwarded port: %v", err)
	}
	if v, err := etcdGet(ctx, ip, "through"); err != nil || v != "port-forward" {
		t.Fatalf("the key at the Pod's address: %q %v", v, err)
	}
}
