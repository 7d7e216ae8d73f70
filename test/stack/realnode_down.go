package stack

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/etcdplan/etcdplan/test/kubelet/mounts"
)

// What the real node changes outside .stack/, and stackctl down puts back:
//   - sysctls the kubelet sets (KubeletSysctls): recorded machine-wide by the first real node
//     to start, restored by the last one to stop;
//   - cgroups under its cgroupRoot, in every hierarchy;
//   - /var/log/containers (the kubelet's links to container logs), /run/containerd/s (the
//     shims' sockets): removed when they did not exist before;
//   - iptables chains, where an iptables binary exists and the kubelet made some.
// Mounts, network namespaces (containerd keeps them under its state directory) and veths go
// with the Pods' sandboxes.

// KubeletSysctls are the sysctls the kubelet sets when it starts.
var KubeletSysctls = []string{"vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
	"kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes"}

// sysctlRecord is where the first real node on the machine records the sysctls as they were.
var sysctlRecord = filepath.Join(claimDir, "realnode-sysctls.json")

// machineRecord is what existed before this stack's real node started.
type machineRecord struct {
	VarLogContainers bool                `json:"varLogContainers"`
	RunContainerd    bool                `json:"runContainerd"`
	RunContainerdS   bool                `json:"runContainerdS"`
	IPTables         map[string][]string `json:"iptables,omitempty"` // "iptables nat" -> chains
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

func sysctlPath(name string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
}

// ReadSysctls returns the current values of the kubelet's sysctls.
func ReadSysctls() map[string]string {
	out := map[string]string{}
	for _, s := range KubeletSysctls {
		if b, err := os.ReadFile(sysctlPath(s)); err == nil {
			out[s] = strings.TrimSpace(string(b))
		}
	}
	return out
}

// recordMachine records what the real node is about to change.
func recordMachine(l layout) error {
	rec := machineRecord{VarLogContainers: exists("/var/log/containers"), RunContainerd: exists("/run/containerd"),
		RunContainerdS: exists("/run/containerd/s"), IPTables: iptablesChains()}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if err := writeFile(l.state("realnode-machine.json"), b, 0o644); err != nil {
		return err
	}
	if exists(sysctlRecord) && otherRealKubelets(l) > 0 {
		return nil // another stack's real node runs: the machine's values are recorded already
	}
	b, err = json.Marshal(ReadSysctls())
	if err != nil {
		return err
	}
	if err := os.MkdirAll(claimDir, 0o755); err != nil {
		return err
	}
	return writeFile(sysctlRecord, b, 0o644)
}

// otherRealKubelets counts the real kubelets that run for other stacks.
func otherRealKubelets(l layout) int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if filepath.Base(args[0]) != "kubelet" || !strings.Contains(args[0], "/kube-") {
			continue
		}
		if !strings.Contains(string(cmdline), "--root-dir="+l.realNode("kubelet")+"\x00") {
			n++
		}
	}
	return n
}

// realNodeDown stops the real node and puts back what it changed on the machine: the
// kubelet first (it would start Pods again), then every Pod sandbox through containerd's CRI
// (containers stopped, CNI torn down), containerd, the shims and anything left in the
// kubelet's cgroups; then mounts, cgroups, files, sysctls and iptables chains.
func realNodeDown(ctx context.Context, l layout, log logger) error {
	var recB []byte
	if b, err := os.ReadFile(l.state("realnode-machine.json")); err == nil {
		recB = b
	}
	if !l.realNodeOn() && recB == nil {
		return nil
	}
	var rec machineRecord
	_ = json.Unmarshal(recB, &rec)
	var errs []error
	kubelet := realKubeletProc(l)
	if kubelet.pid(l) != 0 {
		log.printf("stopping %s (the real kubelet)", RealNodeName)
	}
	if err := kubelet.stop(ctx, l, 15*time.Second); err != nil {
		errs = append(errs, err)
	}
	cd := containerdProc(l)
	if cd.pid(l) != 0 {
		if err := stopSandboxes(ctx, l); err != nil {
			errs = append(errs, fmt.Errorf("stack: stopping the real node's Pods: %w", err))
		}
		log.printf("stopping %s", cd.name)
	}
	if err := cd.stop(ctx, l, 15*time.Second); err != nil {
		errs = append(errs, err)
	}
	if err := killRealNodeProcs(ctx, l); err != nil {
		errs = append(errs, err)
	}
	if err := unmountUnder(l.realNode()); err != nil {
		errs = append(errs, err)
	}
	if err := removeCgroups(l.n.cgroupRoot()); err != nil {
		errs = append(errs, err)
	}
	removeLogLinks(l, rec)
	for _, d := range []struct {
		path    string
		existed bool
	}{{"/run/containerd/s", rec.RunContainerdS}, {"/run/containerd", rec.RunContainerd}} {
		if !d.existed && recB != nil {
			_ = syscall.Rmdir(d.path) // only when empty: another containerd may use it
		}
	}
	if recB != nil {
		if err := removeIPTablesChains(rec.IPTables); err != nil {
			errs = append(errs, err)
		}
	}
	if otherRealKubelets(l) == 0 {
		if err := restoreSysctls(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(l.realNode()); err != nil {
		errs = append(errs, err)
	}
	_ = os.Remove(l.state("realnode-machine.json"))
	return errors.Join(errs...)
}

// stopSandboxes stops every container (with a grace period) and every Pod sandbox, then
// removes them, through containerd's CRI.
func stopSandboxes(ctx context.Context, l layout) error {
	conn, err := grpc.NewClient("unix://"+l.realNode("containerd.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cs, err := rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	each := func(ids []string, f func(string) error) {
		for _, id := range ids {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := f(id); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	var ids []string
	for _, c := range cs.Containers {
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			ids = append(ids, c.Id)
		}
	}
	each(ids, func(id string) error {
		_, err := rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 5})
		return err
	})
	ps, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return err
	}
	ids = nil
	for _, p := range ps.Items {
		ids = append(ids, p.Id)
	}
	each(ids, func(id string) error {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
			return err
		}
		_, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
		return err
	})
	return errors.Join(errs...)
}

// killRealNodeProcs kills what is left of the real node: shims that outlived containerd and
// processes in the kubelet's cgroups.
func killRealNodeProcs(ctx context.Context, l layout) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		var pids []int
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == os.Getpid() {
				continue
			}
			id, ok := readProcID(pid)
			if ok && l.realNodeProc(pid, id.desc) {
				pids = append(pids, pid)
			}
		}
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("stack: the real node's processes %v survive SIGKILL", pids)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
}

// unmountUnder unmounts every mount point under dir, deepest first, until none is left
// (the kubelet's root directory is a shared bind mount: its volumes show up twice).
func unmountUnder(dir string) error {
	for pass := 0; ; pass++ {
		all, _ := mounts.Points()
		var under []string
		for _, mp := range all {
			if mounts.Under(mp, dir) {
				under = append(under, mp)
			}
		}
		if len(under) == 0 {
			return nil
		}
		if pass == 10 {
			return fmt.Errorf("stack: cannot unmount %s", strings.Join(under, ", "))
		}
		sort.Slice(under, func(i, j int) bool { return len(under[i]) > len(under[j]) })
		for _, mp := range under {
			_ = syscall.Unmount(mp, syscall.MNT_DETACH)
		}
	}
}

// CgroupDirs lists the directories of the cgroup root in every cgroup hierarchy.
func CgroupDirs(root string) []string {
	var out []string
	hs, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hs {
		base := filepath.Join(h, root)
		_ = filepath.WalkDir(base, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				out = append(out, p)
			}
			return nil
		})
	}
	return out
}

// removeCgroups removes the cgroup root in every hierarchy, deepest first.
func removeCgroups(root string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		dirs := CgroupDirs(root)
		if len(dirs) == 0 {
			return nil
		}
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		var last error
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, syscall.ENOENT) {
				last = fmt.Errorf("rmdir %s: %w", d, err)
			}
		}
		if last == nil {
			continue
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("stack: the real node's cgroups: %w", last)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// removeLogLinks removes the kubelet's links in /var/log/containers to this stack's logs,
// and the directory when the real node made it and it is empty.
func removeLogLinks(l layout, rec machineRecord) {
	entries, _ := os.ReadDir("/var/log/containers")
	for _, e := range entries {
		p := filepath.Join("/var/log/containers", e.Name())
		if target, err := os.Readlink(p); err == nil && strings.HasPrefix(target, l.realNode()+"/") {
			_ = os.Remove(p)
		}
	}
	if !rec.VarLogContainers {
		_ = syscall.Rmdir("/var/log/containers")
	}
}

// restoreSysctls writes back the sysctls the first real node recorded, and drops the record.
func restoreSysctls() error {
	b, err := os.ReadFile(sysctlRecord)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var want map[string]string
	if err := json.Unmarshal(b, &want); err != nil {
		return err
	}
	var errs []error
	for k, v := range want {
		if err := os.WriteFile(sysctlPath(k), []byte(v+"\n"), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("stack: restoring %s=%s: %w", k, v, err))
		}
	}
	if len(errs) == 0 {
		_ = os.Remove(sysctlRecord)
	}
	return errors.Join(errs...)
}

// iptablesTables are the tables the kubelet may add chains to.
var iptablesTables = []string{"filter", "nat", "mangle"}

// iptablesChains lists the chains of every table, for iptables and ip6tables that exist.
func iptablesChains() map[string][]string {
	out := map[string][]string{}
	for _, bin := range []string{"iptables", "ip6tables"} {
		if _, err := exec.LookPath(bin); err != nil {
			continue
		}
		for _, t := range iptablesTables {
			rules, err := exec.Command(bin, "-w", "-t", t, "-S").Output()
			if err != nil {
				continue
			}
			var chains []string
			for _, line := range strings.Split(string(rules), "\n") {
				if f := strings.Fields(line); len(f) >= 2 && (f[0] == "-N" || f[0] == "-P") {
					chains = append(chains, f[1])
				}
			}
			out[bin+" "+t] = chains
		}
	}
	return out
}

// removeIPTablesChains removes the chains made since before (and the rules that jump to
// them), for each table recorded then.
func removeIPTablesChains(before map[string][]string) error {
	var errs []string
	for key, now := range iptablesChains() {
		old, ok := before[key]
		if !ok {
			continue
		}
		had := map[string]bool{}
		for _, c := range old {
			had[c] = true
		}
		var made []string
		for _, c := range now {
			if !had[c] {
				made = append(made, c)
			}
		}
		if len(made) == 0 {
			continue
		}
		bin, table, _ := strings.Cut(key, " ")
		rules, _ := exec.Command(bin, "-w", "-t", table, "-S").Output()
		for _, line := range strings.Split(string(rules), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "-A" || !had[f[1]] {
				continue
			}
			for _, c := range made {
				if strings.Contains(line, " -j "+c) {
					f[0] = "-D"
					_ = exec.Command(bin, append([]string{"-w", "-t", table}, f...)...).Run()
				}
			}
		}
		for _, c := range made {
			_ = exec.Command(bin, "-w", "-t", table, "-F", c).Run()
		}
		for _, c := range made {
			if out, err := exec.Command(bin, "-w", "-t", table, "-X", c).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Sprintf("%s -t %s -X %s: %v: %s", bin, table, c, err, bytes.TrimSpace(out)))
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("stack: iptables: %s", strings.Join(errs, "; "))
	}
	return nil
}
