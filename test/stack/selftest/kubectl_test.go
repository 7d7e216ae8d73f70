package selftest

import (
	"bufio"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcdplan/etcdplan/test/stack"
)

// kubectl runs bin/kubectl on the stack and returns its output and exit code.
func kubectl(ctx context.Context, st *stack.Stack, args ...string) (string, int) {
	cmd := exec.CommandContext(ctx, filepath.Join(st.Root(), "bin", "kubectl"), append([]string{"--kubeconfig", st.Kubeconfig()}, args...)...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(out), ee.ExitCode()
	}
	if err != nil {
		return string(out) + err.Error(), -1
	}
	return string(out), 0
}

// kubectl logs, exec and port-forward reach the local kubelet's API through the API server,
// as on a real cluster.
func TestKubectlLogsExecAndPortForward(t *testing.T) {
	t.Parallel()
	st := startStack(t)
	c := st.Client()
	ctx := testContext(t)
	ns := newNamespace(ctx, t, c, "kubectl")
	must := func(want int, args ...string) string {
		t.Helper()
		out, code := kubectl(ctx, st, append([]string{"-n", ns}, args...)...)
		if code != want {
			t.Fatalf("kubectl %s: exit code %d, want %d:\n%s", strings.Join(args, " "), code, want, out)
		}
		return out
	}

	talker := restrictedContainer("talker", busyboxImage, "sh", "-c",
		`n=$(cat /d/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /d/n; echo "run $n"; sleep 0.2; echo "err $n" >&2; exec sleep 3600`)
	talker.VolumeMounts = []corev1.VolumeMount{{Name: "d", MountPath: "/d"}}
	pod := restrictedPod(ns, "etcd", etcdContainer(singleEtcdArgs("etcd", "127.0.0.1")...), talker)
	pod.Spec.Volumes = []corev1.Volume{emptyDir("data"), emptyDir("d")}
	createPod(ctx, t, c, pod)
	ip := waitPodReady(ctx, t, c, ns, "etcd").Status.PodIP

	// logs: -c, --tail, --since, --timestamps; --previous after a restart.
	waitFor(ctx, t, "the talker's output", func(ctx context.Context) (bool, error) {
		out, code := kubectl(ctx, st, "-n", ns, "logs", "etcd", "-c", "talker")
		return code == 0 && out == "run 1\nerr 1\n", nil
	})
	if out := must(0, "logs", "etcd", "-c", "talker", "--tail=1"); out != "err 1\n" {
		t.Fatalf("--tail=1: %q", out)
	}
	if out := must(0, "logs", "etcd", "-c", "talker", "--since=1h"); out != "run 1\nerr 1\n" {
		t.Fatalf("--since=1h: %q", out)
	}
	if out := must(0, "logs", "etcd", "-c", "talker", "--timestamps"); !regexp.MustCompile(`^\d{4}-\d\d-\d\dT\S+ run 1\n\S+ err 1\n$`).MatchString(out) {
		t.Fatalf("--timestamps: %q", out)
	}
	if out := must(0, "logs", "etcd", "-c", "etcd"); !strings.Contains(out, "serving client traffic") {
		t.Fatalf("etcd's log: %q", out)
	}
	if err := st.KillContainer(ctx, ns, "etcd", "talker"); err != nil {
		t.Fatal(err)
	}
	waitFor(ctx, t, "the talker's second run", func(ctx context.Context) (bool, error) {
		out, code := kubectl(ctx, st, "-n", ns, "logs", "etcd", "-c", "talker")
		return code == 0 && out == "run 2\nerr 2\n", nil
	})
	if out := must(0, "logs", "etcd", "-c", "talker", "--previous"); out != "run 1\nerr 1\n" {
		t.Fatalf("--previous: %q", out)
	}

	// logs -f follows a container until it ends.
	counter := restrictedPod(ns, "counter", restrictedContainer("main", busyboxImage, "sh", "-c", `sleep 1; for i in 1 2 3; do echo line $i; sleep 0.5; done`))
	counter.Spec.RestartPolicy = corev1.RestartPolicyNever
	createPod(ctx, t, c, counter)
	waitPod(ctx, t, c, ns, "counter", "running", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	if out := must(0, "logs", "-f", "counter"); out != "line 1\nline 2\nline 3\n" {
		t.Fatalf("logs -f: %q", out)
	}

	// exec: output, and the command's exit code as kubectl's.
	if out := must(0, "exec", "etcd", "-c", "etcd", "--", "etcdctl", "endpoint", "status", "-w", "table"); !strings.Contains(out, "127.0.0.1:2379") {
		t.Fatalf("etcdctl endpoint status: %q", out)
	}
	if out := must(3, "exec", "etcd", "-c", "talker", "--", "sh", "-c", "echo to-stderr >&2; exit 3"); !strings.Contains(out, "to-stderr") {
		t.Fatalf("exec exit 3: %q", out)
	}
	if out, code := kubectl(ctx, st, "-n", ns, "exec", "-i", "etcd", "-c", "talker", "--", "cat"); code != 0 || out != "" {
		t.Fatalf("exec -i with empty stdin: %d %q", code, out)
	}

	// port-forward: a local port leads to etcd's client port.
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
