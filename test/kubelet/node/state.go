package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdplan/etcdplan/test/kubelet/mounts"
	"github.com/etcdplan/etcdplan/test/kubelet/netsetup"
)

// A Pod's directory, <state>/pods/<uid>, holds:
//
//	meta.json                  which Pod, its namespace and veth (written before they exist)
//	pids/<container>           "pid starttime" of the running container process
//	specs/<container>.json     the shim's spec (mode 0600: env may hold secrets)
//	logs/<container>/<n>.log   output of the n-th run (n = restartCount)
//	volumes/<name>/            emptyDir, Secret, ConfigMap, projected and downward API volumes

type podMeta struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	UID       types.UID `json:"uid"`
	Netns     string    `json:"netns,omitempty"`
	HostVeth  string    `json:"hostVeth,omitempty"`
}

func writeMeta(dir string, m podMeta) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, _ := json.Marshal(m)
	return os.WriteFile(filepath.Join(dir, "meta.json"), data, 0o644)
}

func readMeta(dir string) (podMeta, error) {
	var m podMeta
	data, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil {
		return m, err
	}
	return m, json.Unmarshal(data, &m)
}

// recordPid remembers a container process with its start time, so a later run can kill it
// without hitting a recycled pid.
func recordPid(dir, container string, pid int) error {
	start, err := procStartTime(pid)
	if err != nil {
		return err
	}
	pids := filepath.Join(dir, "pids")
	if err := os.MkdirAll(pids, 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(pids, container), []byte(fmt.Sprintf("%d %d\n", pid, start)), 0o644)
}

func forgetPid(dir, container string) {
	_ = os.Remove(filepath.Join(dir, "pids", container))
}

// procStartTime reads a process's start time (clock ticks since boot) from /proc.
func procStartTime(pid int) (uint64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after it follow the last ')'.
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, fmt.Errorf("bad /proc/%d/stat", pid)
	}
	return strconv.ParseUint(f[19], 10, 64) // field 22: starttime
}

// KillRecorded SIGKILLs the process groups recorded in a pids directory whose processes are
// still the recorded ones, waits for them to go, and empties the directory.
func KillRecorded(pidsDir string) {
	entries, _ := os.ReadDir(pidsDir)
	var alive []int
	for _, e := range entries {
		path := filepath.Join(pidsDir, e.Name())
		data, err := os.ReadFile(path)
		_ = os.Remove(path)
		if err != nil {
			continue
		}
		var pid int
		var start uint64
		if _, err := fmt.Sscan(string(data), &pid, &start); err != nil || pid <= 1 {
			continue
		}
		if now, err := procStartTime(pid); err != nil || now != start {
			continue // gone, or the pid belongs to another process now
		}
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		alive = append(alive, pid)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range alive {
		for time.Now().Before(deadline) {
			// A killed child of a dead kubelet is reaped by init; until then it is a zombie.
			if st, err := procState(pid); err != nil || st == "Z" {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func procState(pid int) (string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", err
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+3 > len(s) {
		return "", errors.New("bad stat")
	}
	return s[i+2 : i+3], nil
}

// UnmountUnder detaches every mount at or below dir, deepest first.
func UnmountUnder(dir string) error {
	all, err := mounts.Points()
	if err != nil {
		return err
	}
	var points []string
	for _, p := range all {
		if mounts.Under(p, dir) {
			points = append(points, p)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// stopLeftovers kills a Pod directory's processes left by an earlier run of the kubelet and
// removes its network namespace and mounts, keeping its data.
func stopLeftovers(dir string) {
	KillRecorded(filepath.Join(dir, "pids"))
	if m, err := readMeta(dir); err == nil && m.Netns != "" {
		_ = netsetup.TeardownPod(m.Netns, m.HostVeth)
	}
	_ = UnmountUnder(dir)
}

// Cleanup removes everything local kubelets left under stateDir and on the host: container
// processes, network namespaces named with netnsPrefix and their /etc files, mounts, and the
// bridge. It is idempotent and does not need the API.
func Cleanup(stateDir, bridge, netnsPrefix string) error {
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return err
	}
	pidDirs, _ := filepath.Glob(filepath.Join(abs, "nodes", "*", "pods", "*", "pids"))
	for _, d := range pidDirs {
		KillRecorded(d)
	}
	var errs []error
	errs = append(errs, netsetup.CleanupAll(netnsPrefix))
	errs = append(errs, UnmountUnder(abs))
	errs = append(errs, netsetup.DeleteBridge(bridge))
	return errors.Join(errs...)
}
