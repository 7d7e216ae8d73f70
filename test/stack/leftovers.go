package stack

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/etcdplan/etcdplan/test/kubelet/mounts"
	"github.com/etcdplan/etcdplan/test/kubelet/netsetup"
)

// Snapshot records what a running stack owns that cannot be found by name once it is gone:
// the Pod network namespaces (by inode) and the processes inside them.
type Snapshot struct {
	l     layout
	netns map[uint64]string // inode -> name under /run/netns
	procs map[int]procID    // processes in those namespaces or running stack binaries
}

// procID identifies a process across pid reuse.
type procID struct {
	start string // field 22 of /proc/<pid>/stat
	desc  string
}

// Snapshot records the stack's network namespaces and processes.
func (st *Stack) Snapshot() *Snapshot { return takeSnapshot(st.l) }

func takeSnapshot(l layout) *Snapshot {
	s := &Snapshot{l: l, netns: map[uint64]string{}, procs: map[int]procID{}}
	for _, name := range l.netns() {
		var st syscall.Stat_t
		if syscall.Stat(filepath.Join("/run/netns", name), &st) == nil {
			s.netns[st.Ino] = name
		}
	}
	for _, p := range s.scanProcs() {
		s.procs[p.pid] = p.id
	}
	return s
}

// Netns returns the names of the Pod network namespaces the snapshot recorded.
func (s *Snapshot) Netns() []string {
	var out []string
	for _, n := range s.netns {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Processes describes the processes the snapshot recorded.
func (s *Snapshot) Processes() []string {
	var out []string
	for pid, id := range s.procs {
		out = append(out, fmt.Sprintf("pid %d (%s)", pid, id.desc))
	}
	sort.Strings(out)
	return out
}

// Leftovers is what remains of a stack after it was taken down.
type Leftovers struct {
	Processes []string // "pid 123 (…/etcd, netns etcdplan-x)"
	Netns     []string // names under /run/netns
	EtcNetns  []string // directories under /etc/netns (resolv.conf, hosts of a Pod netns)
	Links     []string // host network interfaces: the bridge's veths
	Mounts    []string // mount points under .stack/ or /run/netns/<prefix>
	Bridge    bool     // the Pods' bridge still exists
	bridge    string
	pids      []int
}

// Empty reports whether nothing is left.
func (lo Leftovers) Empty() bool {
	return len(lo.Processes) == 0 && len(lo.Netns) == 0 && len(lo.EtcNetns) == 0 && len(lo.Links) == 0 &&
		len(lo.Mounts) == 0 && !lo.Bridge
}

func (lo Leftovers) String() string {
	if lo.Empty() {
		return "nothing"
	}
	var parts []string
	if len(lo.Processes) > 0 {
		parts = append(parts, "processes: "+strings.Join(lo.Processes, "; "))
	}
	if len(lo.Netns) > 0 {
		parts = append(parts, "network namespaces: "+strings.Join(lo.Netns, ", "))
	}
	if len(lo.EtcNetns) > 0 {
		parts = append(parts, "/etc/netns: "+strings.Join(lo.EtcNetns, ", "))
	}
	if len(lo.Links) > 0 {
		parts = append(parts, "interfaces: "+strings.Join(lo.Links, ", "))
	}
	if len(lo.Mounts) > 0 {
		parts = append(parts, "mounts: "+strings.Join(lo.Mounts, ", "))
	}
	if lo.Bridge {
		parts = append(parts, "bridge "+lo.bridge)
	}
	return strings.Join(parts, "; ")
}

// Leftovers lists what of the stack still exists: processes recorded in the snapshot or running
// a stack binary, network namespaces with the kubelet's prefix, mounts under .stack/ and the
// bridge.
func (s *Snapshot) Leftovers() Leftovers {
	lo := Leftovers{bridge: s.l.n.Bridge()}
	seen := map[int]bool{}
	for _, p := range s.scanProcs() {
		seen[p.pid] = true
		lo.Processes = append(lo.Processes, fmt.Sprintf("pid %d (%s)", p.pid, p.id.desc))
		lo.pids = append(lo.pids, p.pid)
	}
	for pid, id := range s.procs {
		if seen[pid] {
			continue
		}
		if cur, ok := readProcID(pid); ok && cur.start == id.start {
			lo.Processes = append(lo.Processes, fmt.Sprintf("pid %d (%s)", pid, id.desc))
			lo.pids = append(lo.pids, pid)
		}
	}
	sort.Strings(lo.Processes)
	lo.Netns = s.l.netns()
	lo.EtcNetns = listPrefixed("/etc/netns", s.l.n.NetnsPrefix())
	if ifs, err := net.Interfaces(); err == nil {
		for _, i := range ifs {
			if strings.HasPrefix(i.Name, netsetup.VethPrefix(s.l.n.NetnsPrefix())) {
				lo.Links = append(lo.Links, i.Name)
			}
		}
	}
	lo.Mounts = s.l.mounts()
	if _, err := net.InterfaceByName(lo.bridge); err == nil {
		lo.Bridge = true
	}
	return lo
}

// Remove kills leftover processes and removes leftover mounts, network namespaces and the
// bridge: the last line of `stackctl down` when the local kubelet's cleanup missed something.
func (lo Leftovers) Remove() error {
	for _, pid := range lo.pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, pid := range lo.pids {
		for procStat(pid) != 0 && procStat(pid) != 'Z' && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
	var errs []string
	// Deepest mount points first.
	mounts := append([]string(nil), lo.Mounts...)
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	for _, m := range mounts {
		if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil && err != syscall.EINVAL && err != syscall.ENOENT {
			errs = append(errs, fmt.Sprintf("umount %s: %v", m, err))
		}
	}
	for _, n := range lo.Netns {
		if out, err := exec.Command("ip", "netns", "delete", n).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Sprintf("ip netns delete %s: %v: %s", n, err, bytes.TrimSpace(out)))
		}
	}
	for _, l := range lo.Links {
		if out, err := exec.Command("ip", "link", "delete", l).CombinedOutput(); err != nil && netIfExists(l) {
			errs = append(errs, fmt.Sprintf("ip link delete %s: %v: %s", l, err, bytes.TrimSpace(out)))
		}
	}
	for _, d := range lo.EtcNetns {
		if err := os.RemoveAll(filepath.Join("/etc/netns", d)); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if lo.Bridge {
		if out, err := exec.Command("ip", "link", "delete", lo.bridge).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Sprintf("ip link delete %s: %v: %s", lo.bridge, err, bytes.TrimSpace(out)))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("stack: cleanup: %s", strings.Join(errs, "; "))
	}
	return nil
}

type procInfo struct {
	pid int
	id  procID
}

// scanProcs finds live processes that belong to the stack: those running one of its binaries
// (etcd, the Kubernetes components, the local kubelet) and those inside a recorded Pod network
// namespace. The calling process is never one of them.
func (s *Snapshot) scanProcs() []procInfo {
	entries, _ := os.ReadDir("/proc")
	bin := s.l.bin() + "/"
	self := os.Getpid()
	var out []procInfo
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		id, ok := readProcID(pid)
		if !ok {
			continue
		}
		argv0 := id.desc
		stackBin := strings.HasPrefix(argv0, bin+"etcd-") || strings.HasPrefix(argv0, bin+"kube-") || argv0 == bin+"localkubelet"
		mine := stackBin && s.l.usesState(pid) || s.l.realNodeProc(pid, argv0)
		if !mine && len(s.netns) > 0 {
			var st syscall.Stat_t
			if syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", pid), &st) == nil {
				if name, ok := s.netns[st.Ino]; ok {
					mine = true
					id.desc += ", netns " + name
				}
			}
		}
		if mine {
			out = append(out, procInfo{pid: pid, id: id})
		}
	}
	return out
}

// usesState: the process's arguments name the stack's state directory, as every process
// the stack starts does. Tests that run the same binaries on their own (the API's admission
// test runs etcd and kube-apiserver beside the stack) are not the stack's.
func (l layout) usesState(pid int) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	dir := l.state()
	return err == nil && (bytes.Contains(cmdline, []byte(dir+"/")) || bytes.Contains(cmdline, []byte(dir+"\x00")))
}

// readProcID returns the start time and argv[0] of a live, non-zombie process.
func readProcID(pid int) (procID, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procID{}, false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return procID{}, false
	}
	fields := strings.Fields(string(stat[i+1:]))
	// fields[0] is the state (field 3); the start time is field 22.
	if len(fields) < 20 || fields[0] == "Z" {
		return procID{}, false
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	if len(argv0) == 0 {
		return procID{}, false // kernel thread
	}
	return procID{start: fields[19], desc: string(argv0)}, true
}

// netns lists the network namespaces named with the stack's prefix.
func (l layout) netns() []string { return listPrefixed("/run/netns", l.n.NetnsPrefix()) }

func listPrefixed(dir, prefix string) []string {
	entries, _ := os.ReadDir(dir)
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			out = append(out, e.Name())
		}
	}
	return out
}

func netIfExists(name string) bool {
	_, err := net.InterfaceByName(name)
	return err == nil
}

// mounts lists mount points (in this mount namespace) under .stack/ or of a Pod netns.
func (l layout) mounts() []string {
	all, _ := mounts.Points() // what could be read: a partial list still shows leftovers
	var out []string
	for _, mp := range all {
		if mounts.Under(mp, l.state()) || strings.HasPrefix(mp, "/run/netns/"+l.n.NetnsPrefix()) {
			out = append(out, mp)
		}
	}
	return out
}
