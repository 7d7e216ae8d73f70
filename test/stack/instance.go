package stack

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Instance is one of the stacks that can run side by side on a machine, numbered 0 to 9:
// its number sets the Pods' bridge (etcdplanN), their network (10.(88+N).0.0/16, the bridge
// at 10.(88+N).0.1), the names of their network namespaces, and the ports (stack 0's plus
// 100*N: the API server on 6443+100*N). A checkout's stack is the one ETCDPLAN_STACK names;
// unset, the one the checkout's stack last ran as, else the lowest number no other
// checkout's running stack holds. Its state stays in the checkout's .stack/.
type Instance int

// MaxInstance is the highest stack number.
const MaxInstance = 9

// parseInstance reads a stack number.
func parseInstance(v string) (Instance, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < 0 || n > MaxInstance {
		return 0, fmt.Errorf("stack: ETCDPLAN_STACK=%q: want a stack number from 0 to %d", v, MaxInstance)
	}
	return Instance(n), nil
}

// Bridge is the name of the Pods' bridge, created by `localkubelet cluster`.
func (n Instance) Bridge() string { return fmt.Sprintf("etcdplan%d", n) }

// BridgeIP is the bridge's address on the host. The apiserver advertises it, so Pods reach
// it at https://BridgeIP:APIServerPort; cluster DNS listens on it.
func (n Instance) BridgeIP() string { return fmt.Sprintf("10.%d.0.1", 88+int(n)) }

func (n Instance) bridgeAddr() string { return n.BridgeIP() + "/16" }

// podCIDR is node-i's share of the Pod network.
func (n Instance) podCIDR(i int) string { return fmt.Sprintf("10.%d.%d.0/24", 88+int(n), i) }

// NetnsPrefix starts the name of every Pod network namespace of the stack and of its files
// under /etc/netns (test/kubelet/netsetup): lk- for stack 0, lkN- for stack N.
func (n Instance) NetnsPrefix() string {
	if n == 0 {
		return "lk-"
	}
	return fmt.Sprintf("lk%d-", n)
}

func (n Instance) port(base int) int { return base + 100*int(n) }

// APIServerPort is the port the API server serves on, on every address.
func (n Instance) APIServerPort() int { return n.port(apiServerPort) }

// newLayout is the layout of the checkout at root, for its stack's number (see Instance).
func newLayout(root string) (layout, error) {
	if v := os.Getenv("ETCDPLAN_STACK"); v != "" {
		n, err := parseInstance(v)
		return layout{root: root, n: n}, err
	}
	if b, err := os.ReadFile(filepath.Join(root, ".stack", "instance")); err == nil {
		if n, err := parseInstance(string(b)); err == nil && (layout{root: root, n: n}).heldByOther() == "" {
			return layout{root: root, n: n}, nil
		}
	}
	for n := Instance(0); n <= MaxInstance; n++ {
		if l := (layout{root: root, n: n}); l.heldByOther() == "" {
			return l, nil
		}
	}
	return layout{}, fmt.Errorf("stack: the stacks 0 to %d all run for other checkouts (see %s)", MaxInstance, claimDir)
}

// claimDir holds a file per stack number in use, naming the checkout whose stack runs under
// it: two checkouts never share a bridge, ports or namespaces unnoticed, and one never takes
// down what the other runs.
const claimDir = "/run/etcdplan-stacks"

func (l layout) claimFile() string { return filepath.Join(claimDir, strconv.Itoa(int(l.n))) }

// heldByOther is the root of another checkout whose stack runs under this stack number, or "".
func (l layout) heldByOther() string {
	b, err := os.ReadFile(l.claimFile())
	other := strings.TrimSpace(string(b))
	if err != nil || other == "" || other == l.root {
		return ""
	}
	o := layout{root: other, n: l.n}
	if etcdProc(o).pid(o) == 0 {
		return "" // that stack is gone: its claim is stale
	}
	return other
}

// claim takes the stack number for this checkout, unless another checkout's stack runs under it.
func (l layout) claim() error {
	if other := l.heldByOther(); other != "" {
		return fmt.Errorf("stack: stack %d (bridge %s, API port %d) runs for the checkout %s: "+
			"set ETCDPLAN_STACK to another number (0-%d) for this one, or take that stack down first",
			l.n, l.n.Bridge(), l.n.APIServerPort(), other, MaxInstance)
	}
	if err := os.MkdirAll(claimDir, 0o755); err != nil {
		return err
	}
	if err := writeFile(l.state("instance"), []byte(strconv.Itoa(int(l.n))+"\n"), 0o644); err != nil {
		return err
	}
	return writeFile(l.claimFile(), []byte(l.root+"\n"), 0o644)
}

// release gives the stack number up, if this checkout holds it.
func (l layout) release() {
	if b, err := os.ReadFile(l.claimFile()); err == nil && strings.TrimSpace(string(b)) == l.root {
		_ = os.Remove(l.claimFile())
	}
}
