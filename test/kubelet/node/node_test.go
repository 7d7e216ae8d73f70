package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/etcdplan/etcdplan/test/kubelet/netsetup"
	"github.com/etcdplan/etcdplan/test/kubelet/shim"
)

// TestMain lets the test binary serve as the container shim, as localkubelet does.
func TestMain(m *testing.M) {
	if len(os.Args) == 3 && os.Args[1] == "container-exec" {
		err := shim.Main(os.Args[2])
		fmt.Fprintf(os.Stderr, "container-exec: %v\n", err)
		os.Exit(128)
	}
	if len(os.Args) == 3 && os.Args[1] == "tcp-echo" {
		tcpEcho(os.Args[2])
	}
	os.Exit(m.Run())
}

type testNode struct {
	t      *testing.T
	client *fake.Clientset
	admin  string
	dir    string
}

// startNode runs a node against a fake API server; containers are real processes in real
// network namespaces on a bridge of their own (the stack's may be in use by a parallel test).
func startNode(t *testing.T) *testNode {
	t.Helper()
	return startNodeWith(t, nil)
}

// startNodeWith is startNode with the configuration changed by configure, and the client.
func startNodeWith(t *testing.T, configure func(*Config, *fake.Clientset)) *testNode {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2")
	}
	const bridge = "lktest1"
	gw := netip.MustParsePrefix("10.78.0.1/16")
	if err := netsetup.EnsureBridge(bridge, gw); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	images := filepath.Join(dir, "images.json")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rules := fmt.Sprintf(`[{"pattern": "busybox", "dir": "/bin", "entrypoint": "sh"}, {"pattern": "self", "dir": %q, "entrypoint": %q}]`,
		filepath.Dir(self), filepath.Base(self))
	if err := os.WriteFile(images, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	admin := ln.Addr().String()
	ln.Close()
	cfg := Config{NodeName: "node-test", StateDir: filepath.Join(dir, "node"), Gateway: gw, Bridge: bridge,
		PodCIDR: netip.MustParsePrefix("10.78.1.0/24"), AdminAddr: admin, ImagesPath: images,
		Executable: self, BackoffInitial: 200 * time.Millisecond, BackoffMax: time.Second}
	client := fake.NewClientset()
	if configure != nil {
		configure(&cfg, client)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cfg, client) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
		dirs, _ := filepath.Glob(filepath.Join(cfg.StateDir, "pods", "*"))
		for _, d := range dirs {
			stopLeftovers(d)
		}
		_ = netsetup.DeleteBridge(bridge)
	})
	n := &testNode{t: t, client: client, admin: admin, dir: cfg.StateDir}
	n.wait("node registered", func() bool {
		node, err := client.CoreV1().Nodes().Get(ctx, "node-test", metav1.GetOptions{})
		return err == nil && len(node.Status.Conditions) > 0
	})
	return n
}

func (n *testNode) wait(what string, ok func() bool) {
	n.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			n.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (n *testNode) pod(name string) *v1.Pod {
	p, err := n.client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return &v1.Pod{}
	}
	return p
}

func (n *testNode) create(p *v1.Pod) {
	n.t.Helper()
	p.Namespace = "default"
	p.UID = types.UID("uid-" + p.Name)
	p.Spec.NodeName = "node-test"
	for i := range p.Spec.Containers {
		if p.Spec.Containers[i].Image == "" {
			p.Spec.Containers[i].Image = "busybox"
		}
	}
	for i := range p.Spec.InitContainers {
		p.Spec.InitContainers[i].Image = "busybox"
	}
	if _, err := n.client.CoreV1().Pods("default").Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
		n.t.Fatal(err)
	}
}

func (n *testNode) post(path string) {
	n.t.Helper()
	if code := n.tryPost(path); code != http.StatusOK {
		n.t.Fatalf("%s: %d", path, code)
	}
}

// tryPost posts to the admin server and returns the status code.
func (n *testNode) tryPost(path string) int {
	n.t.Helper()
	resp, err := http.Post("http://"+n.admin+path, "", nil)
	if err != nil {
		n.t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func sh(name, script string) v1.Container {
	return v1.Container{Name: name, Command: []string{"sh", "-c", script}}
}

func TestNodeRunsPods(t *testing.T) {
	n := startNode(t)
	ctx := context.Background()

	// A long-running Pod: env from the downward API, an emptyDir, an exec readiness probe.
	server := sh("server", `echo "$POD_NAME $POD_IP" > /data/who; exec sleep 1000`)
	server.Env = []v1.EnvVar{
		{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
	}
	server.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	server.ReadinessProbe = &v1.Probe{PeriodSeconds: 1, ProbeHandler: v1.ProbeHandler{
		Exec: &v1.ExecAction{Command: []string{"sh", "-c", "test -s /data/who"}}}}
	n.create(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "server"}, Spec: v1.PodSpec{
		RestartPolicy: v1.RestartPolicyAlways,
		Containers:    []v1.Container{server},
		Volumes:       []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
	}})
	// Run to completion: an init container hands a file to the main container.
	n.create(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "job"}, Spec: v1.PodSpec{
		RestartPolicy:  v1.RestartPolicyNever,
		InitContainers: []v1.Container{withMount(sh("init", "echo from-init > /w/f"), "w", "/w")},
		Containers:     []v1.Container{withMount(sh("main", "grep -q from-init /w/f"), "w", "/w")},
		Volumes:        []v1.Volume{{Name: "w", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
	}})
	n.create(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fails"}, Spec: v1.PodSpec{
		RestartPolicy: v1.RestartPolicyNever,
		Containers:    []v1.Container{sh("main", "exit 3")},
	}})
	// A termination message, as a real kubelet reads it from terminationMessagePath.
	n.create(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "reports"}, Spec: v1.PodSpec{
		RestartPolicy:   v1.RestartPolicyNever,
		SecurityContext: &v1.PodSecurityContext{RunAsUser: ptr.To[int64](65532), RunAsGroup: ptr.To[int64](65532)},
		Containers:      []v1.Container{sh("main", `printf '{"ok":true}' > /dev/termination-log`)},
	}})

	n.wait("server ready", func() bool { return isReady(n.pod("server")) })
	p := n.pod("server")
	if !strings.HasPrefix(p.Status.PodIP, "10.78.1.") || p.Status.HostIP != "10.78.0.1" || p.Status.StartTime == nil {
		t.Fatalf("status: %+v", p.Status)
	}
	who, err := os.ReadFile(filepath.Join(n.dir, "pods", string(p.UID), "volumes", "data", "who"))
	if err != nil || string(who) != "server "+p.Status.PodIP+"\n" {
		t.Fatalf("emptyDir content %q %v", who, err)
	}
	n.wait("job succeeded", func() bool { return n.pod("job").Status.Phase == v1.PodSucceeded })
	n.wait("fails failed", func() bool { return n.pod("fails").Status.Phase == v1.PodFailed })
	if st := n.pod("fails").Status.ContainerStatuses[0].State.Terminated; st == nil || st.ExitCode != 3 || st.Reason != "Error" {
		t.Fatalf("exit status: %+v", st)
	}
	n.wait("reports succeeded", func() bool { return n.pod("reports").Status.Phase == v1.PodSucceeded })
	if st := n.pod("reports").Status.ContainerStatuses[0].State.Terminated; st == nil || st.Message != `{"ok":true}` {
		t.Fatalf("termination message: %+v", st)
	}

	// A killed container restarts: restartCount goes up, the last state shows the kill.
	n.post("/faults/kill?namespace=default&pod=server&container=server")
	n.wait("server restarted", func() bool {
		p := n.pod("server")
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount == 1 && isReady(p)
	})
	if last := n.pod("server").Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != 137 {
		t.Fatalf("last state: %+v", last)
	}

	// Graceful deletion: the kubelet stops the containers, then deletes the Pod object.
	netns, _ := netsetup.Names(netsetup.NetnsPrefix, string(p.UID))
	p = n.pod("server")
	p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	p.DeletionGracePeriodSeconds = ptr.To[int64](5)
	if _, err := n.client.CoreV1().Pods("default").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.wait("server deleted", func() bool {
		_, err := n.client.CoreV1().Pods("default").Get(ctx, "server", metav1.GetOptions{})
		return err != nil
	})
	if netsetup.NetnsExists(netns) {
		t.Fatal("network namespace left behind")
	}
	if _, err := os.Stat(filepath.Join(n.dir, "pods", string(p.UID))); !os.IsNotExist(err) {
		t.Fatalf("pod directory left behind: %v", err)
	}
}

func withMount(c v1.Container, vol, path string) v1.Container {
	c.VolumeMounts = append(c.VolumeMounts, v1.VolumeMount{Name: vol, MountPath: path})
	return c
}

func isReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// Cut off from the API server, a node runs its containers on: a Pod deleted meanwhile keeps
// running, a new one does not start, no status or Lease is written, and a killed container
// restarts as before. Back, it stops and deletes the deleted Pod and starts the new one.
func TestNodeCutFromAPIRunsOn(t *testing.T) {
	n := startNode(t)
	ctx := context.Background()
	pods := n.client.CoreV1().Pods("default")
	n.create(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "server"}, Spec: v1.PodSpec{
		RestartPolicy: v1.RestartPolicyAlways,
		Containers:    []v1.Container{sh("server", "exec sleep 1000")},
	}})
	n.wait("server ready", func() bool { return isReady(n.pod("server")) })
	pid := n.pid("server", "server")

	n.post("/faults/cut-api")
	n.post("/faults/cut-api") // twice is no error
	before := len(n.client.Actions())
	p := n.pod("server")
	p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	p.DeletionGracePeriodSeconds = ptr.To[int64](1)
	if _, err := pods.Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.create(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "late"}, Spec: v1.PodSpec{
		RestartPolicy: v1.RestartPolicyAlways,
		Containers:    []v1.Container{sh("late", "exec sleep 1000")},
	}})
	// Longer than a Lease renewal (5 s) and a status check (5 s), and the grace period.
	time.Sleep(6 * time.Second)
	if got := n.pid("server", "server"); got != pid {
		t.Fatalf("the deleted Pod's container is %d, was %d: it must run on while the node is cut off", got, pid)
	}
	if n.pid("late", "late") != 0 || n.pod("late").Status.Phase != "" {
		t.Fatal("a Pod created while the node is cut off started")
	}
	n.post("/faults/kill?namespace=default&pod=server&container=server")
	n.wait("server's container restarted", func() bool {
		got := n.pid("server", "server")
		return got != 0 && got != pid
	})
	for _, a := range n.client.Actions()[before:] {
		if a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" &&
			!(a.GetVerb() == "update" && a.GetResource().Resource == "pods" && a.GetSubresource() == "") &&
			!(a.GetVerb() == "create" && a.GetResource().Resource == "pods") {
			t.Errorf("the node wrote to the API while cut off: %s %s/%s", a.GetVerb(), a.GetResource().Resource, a.GetSubresource())
		}
	}
	if n.pod("server").Status.ContainerStatuses[0].RestartCount != 0 {
		t.Error("the restart was reported while cut off")
	}

	n.post("/faults/heal-api")
	n.wait("server deleted", func() bool {
		_, err := pods.Get(ctx, "server", metav1.GetOptions{})
		return err != nil
	})
	n.wait("late ready", func() bool { return isReady(n.pod("late")) })
	n.post("/faults/heal-api")
}

// pid is the process of a container of a Pod on the node (its admin server says), 0 when
// it does not run or the Pod is not there.
func (n *testNode) pid(pod, container string) int {
	n.t.Helper()
	resp, err := http.Get("http://" + n.admin + "/pods")
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	var infos []podInfo
	if err := json.NewDecoder(resp.Body).Decode(&infos); err != nil {
		n.t.Fatal(err)
	}
	for _, i := range infos {
		if i.Name == pod {
			return i.Containers[container]
		}
	}
	return 0
}
