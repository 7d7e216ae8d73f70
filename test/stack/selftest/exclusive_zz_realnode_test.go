package selftest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdplan/etcdplan/test/kubelet/mounts"
	"github.com/etcdplan/etcdplan/test/kubelet/netsetup"
	"github.com/etcdplan/etcdplan/test/stack"
)

// machineState is what of the machine the stack with its real node could change, less what
// other stacks on the machine own (their bridges, veths, namespaces, mounts and cgroup roots).
type machineState struct {
	Sysctls  map[string]string
	Mounts   []string
	Cgroups  []string // directories two deep in every hierarchy
	Netns    []string
	Links    []string
	IPTables string // iptables-save and ip6tables-save without counters, where they exist
	Files    map[string]bool
}

func takeMachineState(n stack.Instance) machineState {
	other := func(name string) bool {
		for m := stack.Instance(0); m <= stack.MaxInstance; m++ {
			if m == n {
				continue
			}
			if name == m.Bridge() || strings.HasPrefix(name, m.NetnsPrefix()) ||
				strings.HasPrefix(name, netsetup.VethPrefix(m.NetnsPrefix())) ||
				name == fmt.Sprintf("etcdplan-stack%d", m) {
				return true
			}
			if master, err := os.Readlink(filepath.Join("/sys/class/net", name, "master")); err == nil && filepath.Base(master) == m.Bridge() {
				return true
			}
		}
		return false
	}
	s := machineState{Sysctls: stack.ReadSysctls(), Files: map[string]bool{}}
	root, _ := stack.RepoRoot()
	points, _ := mounts.Points()
	for _, mp := range points {
		if i := strings.Index(mp, "/.stack/"); i >= 0 && mp[:i] != root {
			continue // another checkout's stack
		}
		if strings.HasPrefix(mp, "/run/netns/") && other(filepath.Base(mp)) {
			continue
		}
		s.Mounts = append(s.Mounts, mp)
	}
	hs, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hs {
		for _, pattern := range []string{"*", "*/*"} {
			dirs, _ := filepath.Glob(filepath.Join(h, pattern))
			for _, d := range dirs {
				rel, _ := filepath.Rel(h, d)
				if st, err := os.Stat(d); err == nil && st.IsDir() && !other(strings.Split(rel, "/")[0]) {
					s.Cgroups = append(s.Cgroups, d)
				}
			}
		}
	}
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if !other(e.Name()) {
			s.Netns = append(s.Netns, e.Name())
		}
	}
	ifs, _ := net.Interfaces()
	for _, i := range ifs {
		if !other(i.Name) {
			s.Links = append(s.Links, i.Name)
		}
	}
	for _, bin := range []string{"iptables-save", "ip6tables-save"} {
		if _, err := exec.LookPath(bin); err == nil {
			out, _ := exec.Command(bin).Output()
			for _, line := range strings.Split(string(out), "\n") {
				if !strings.HasPrefix(line, "#") {
					s.IPTables += line + "\n"
				}
			}
		}
	}
	for _, f := range []string{"/var/log/containers", "/run/containerd", "/var/lib/kubelet", "/var/lib/containerd", "/opt/containerd", "/run/nri"} {
		_, err := os.Lstat(f)
		s.Files[f] = err == nil
	}
	sort.Strings(s.Mounts)
	sort.Strings(s.Cgroups)
	return s
}

// diff describes how two machine states differ, field by field.
func (s machineState) diff(after machineState) []string {
	var out []string
	added := func(what string, a, b []string) {
		in := map[string]bool{}
		for _, x := range a {
			in[x] = true
		}
		for _, x := range b {
			if !in[x] {
				out = append(out, what+" added: "+x)
			}
		}
	}
	added("mount", s.Mounts, after.Mounts)
	added("mount", after.Mounts, s.Mounts)
	added("cgroup", s.Cgroups, after.Cgroups)
	added("network namespace", s.Netns, after.Netns)
	added("interface", s.Links, after.Links)
	if !reflect.DeepEqual(s.Sysctls, after.Sysctls) {
		out = append(out, fmt.Sprintf("sysctls were %v, are %v", s.Sysctls, after.Sysctls))
	}
	if s.IPTables != after.IPTables {
		out = append(out, fmt.Sprintf("iptables were\n%s\nare\n%s", s.IPTables, after.IPTables))
	}
	if !reflect.DeepEqual(s.Files, after.Files) {
		out = append(out, fmt.Sprintf("files were %v, are %v", s.Files, after.Files))
	}
	return out
}

// The stack with node-4 leaves the machine as it was: the sysctls the kubelet set are back,
// and no mount, cgroup, network namespace, interface, iptables rule or file of it is left.
// The machine's state is taken with the stack down, then the stack starts with node-4, runs
// a Pod there with a PVC, a Secret and a projected token, and goes down (node-4's self-tests
// ran before, in TestExclusiveNodes).
// It runs after TestExclusiveZZDownLeavesNothing, and leaves the stack down.
func TestExclusiveZZZRealNodeMachineState(t *testing.T) {
	exclusive(t)
	root, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*waitTimeout)
	defer cancel()
	stack.Release()
	var out bytes.Buffer
	if _, err := stack.Down(ctx, root, &out); err != nil {
		t.Fatalf("stack down: %v\n%s", err, out.String())
	}
	shared.st, shared.err = nil, fmt.Errorf("the stack went down for TestExclusiveZZZRealNodeMachineState")
	time.Sleep(time.Second) // processes just killed leave their cgroups and mounts
	before := takeMachineState(mustInstance(t))
	t.Logf("before: sysctls %v, %d mounts, %d cgroups, network namespaces %v, interfaces %v",
		before.Sysctls, len(before.Mounts), len(before.Cgroups), before.Netns, before.Links)

	t.Setenv("ETCDPLAN_REAL_NODE", "1")
	start := time.Now()
	st, err := stack.Start(ctx)
	if err != nil {
		t.Fatalf("starting the stack with node-4: %v", err)
	}
	t.Logf("the stack with node-4 started in %.1f s", time.Since(start).Seconds())
	downed := false
	t.Cleanup(func() {
		if !downed {
			stack.Release()
			_, _ = stack.Down(context.Background(), root, nil)
		}
	})
	// A Pod runs on node-4 when the stack goes down, with a PVC, a Secret and a token.
	c := st.Client()
	ns := newNamespace(ctx, t, c, "realdown")
	createPVC(ctx, t, c, ns, "data")
	if _, err := c.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"}, StringData: map[string]string{"k": "v"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sleeper := tool("sleep")
	sleeper.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}, {Name: "secret", MountPath: "/etc/secret"}}
	pod := onRealNode(restrictedPod(ns, "sleep", sleeper))
	pod.Spec.Volumes = []corev1.Volume{pvcVolume("data", "data"),
		{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}}}
	createPod(ctx, t, c, pod)
	waitPodReady(ctx, t, c, ns, "sleep")

	during := takeMachineState(st.Instance())
	if len(during.diff(before)) == 0 && len(before.diff(during)) == 0 {
		t.Fatal("the running stack with node-4 changed nothing that is checked: the check proves nothing")
	}
	if reflect.DeepEqual(during.Sysctls, before.Sysctls) {
		t.Logf("the kubelet's sysctls had its values already: %v", before.Sysctls)
	}
	if len(stack.CgroupDirs(fmt.Sprintf("/etcdplan-stack%d", st.Instance()))) == 0 {
		t.Fatal("no cgroup of the real kubelet found (its cgroup root changed?)")
	}
	snap := st.Snapshot()

	stack.Release()
	start = time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "bin", "stackctl"), "--root", root, "--strict", "down")
	var downOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &downOut, &downOut
	err = cmd.Run()
	downed = true
	t.Logf("stackctl down (%.1f s):\n%s", time.Since(start).Seconds(), downOut.String())
	if err != nil {
		t.Fatalf("stackctl down: %v", err)
	}
	if left := snap.Leftovers(); !left.Empty() {
		t.Errorf("after stackctl down: %s", left)
	}
	time.Sleep(time.Second)
	after := takeMachineState(st.Instance())
	if d := before.diff(after); len(d) > 0 {
		t.Fatalf("the machine after down differs from before up:\n%s", strings.Join(d, "\n"))
	}
}

func mustInstance(t *testing.T) stack.Instance {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(mustRoot(t), ".stack", "instance"))
	if v := os.Getenv("ETCDPLAN_STACK"); v != "" {
		b, err = []byte(v), nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &n); err != nil {
		t.Fatal(err)
	}
	return stack.Instance(n)
}

func mustRoot(t *testing.T) string {
	t.Helper()
	r, err := stack.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}
