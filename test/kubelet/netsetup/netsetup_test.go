package netsetup

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestMain lets the test binary act as a small server or client inside a namespace.
func TestMain(m *testing.M) {
	switch os.Getenv("NETSETUP_HELPER") {
	case "listen":
		ln, err := net.Listen("tcp", ":7000")
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		fmt.Println("ready")
		for {
			c, err := ln.Accept()
			if err != nil {
				os.Exit(1)
			}
			fmt.Fprintf(c, "hello from %s\n", c.LocalAddr())
			c.Close()
		}
	case "dial":
		os.Exit(dial(os.Getenv("NETSETUP_ADDR")))
	}
	os.Exit(m.Run())
}

// listen starts the helper server in a Pod namespace and returns how to stop it; what ip
// printed is shown when the server does not start.
func listen(t *testing.T, netns string) (stop func()) {
	t.Helper()
	srv := exec.Command("ip", "netns", "exec", netns, os.Args[0])
	srv.Env = append(os.Environ(), "NETSETUP_HELPER=listen")
	var stderr bytes.Buffer
	srv.Stderr = &stderr
	stdout, _ := srv.StdoutPipe()
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() { once.Do(func() { _ = srv.Process.Kill(); _ = srv.Wait() }) }
	t.Cleanup(stop)
	if line, _ := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		stop()
		t.Fatalf("server: %q, stderr %q", line, stderr.String())
	}
	return stop
}

func dial(addr string) int {
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	b, _ := io.ReadAll(c)
	fmt.Print(string(b))
	return 0
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2")
	}
}

func TestIPAM(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ipam.json")
	cidr := netip.MustParsePrefix("10.88.3.0/24")
	a, err := OpenIPAM(path, cidr)
	if err != nil {
		t.Fatal(err)
	}
	x, _ := a.Allocate("x")
	y, _ := a.Allocate("y")
	if x.String() != "10.88.3.2" || y.String() != "10.88.3.3" {
		t.Fatalf("got %s %s", x, y)
	}
	if again, _ := a.Allocate("x"); again != x {
		t.Fatalf("x moved to %s", again)
	}
	if err := a.Release("x"); err != nil {
		t.Fatal(err)
	}
	// A new allocator from the same file sees y, and reuses x's freed address.
	b, err := OpenIPAM(path, cidr)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Allocate("y"); got != y {
		t.Fatalf("y not persisted: %s", got)
	}
	if z, _ := b.Allocate("z"); z != x {
		t.Fatalf("freed address not reused: %s", z)
	}
	// Exhaust a /29: .2 to .6 are usable.
	small, _ := OpenIPAM(filepath.Join(t.TempDir(), "small.json"), netip.MustParsePrefix("10.77.100.0/29"))
	for i := 0; i < 5; i++ {
		if _, err := small.Allocate(fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if addr, err := small.Allocate("full"); err == nil {
		t.Fatalf("want full, got %s", addr)
	}
}

// TestPods builds a bridge and two Pod namespaces, and checks host-to-Pod and Pod-to-Pod
// traffic, the cut and the heal.
func TestPods(t *testing.T) {
	requireRoot(t)
	const bridge = "lktest0"
	gw := netip.MustParsePrefix("10.77.0.1/16")
	if err := EnsureBridge(bridge, gw); err != nil {
		t.Fatal(err)
	}
	if err := EnsureBridge(bridge, gw); err != nil {
		t.Fatalf("not idempotent: %v", err)
	}
	t.Cleanup(func() { _ = DeleteBridge(bridge) })

	// Names outside the local kubelet's prefixes: a stack started or stopped by another test
	// package meanwhile removes every namespace and veth it may have left (CleanupAll).
	pods := []Pod{}
	for i, id := range []string{"a", "b"} {
		ns, veth := "lktest-"+id, "lktv"+id
		p := Pod{Bridge: bridge, Netns: ns, HostVeth: veth, Gateway: gw.Addr(),
			Addr: netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 77, 1, byte(2 + i)}), 16)}
		if err := SetupPod(p); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = TeardownPod(p.Netns, p.HostVeth) })
		pods = append(pods, p)
	}
	// Setting up again replaces the namespace.
	if err := SetupPod(pods[0]); err != nil {
		t.Fatal(err)
	}
	if err := WriteEtc(pods[0].Netns, map[string]string{"hosts": "10.77.1.2 a\n"}); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ip", "netns", "exec", pods[0].Netns, "cat", "/etc/hosts").Output()
	if err != nil || string(out) != "10.77.1.2 a\n" {
		t.Fatalf("hosts in namespace: %q %v", out, err)
	}

	stop := listen(t, pods[0].Netns)
	target := "10.77.1.2:7000"
	fromPod := func() (string, error) {
		c := exec.Command("ip", "netns", "exec", pods[1].Netns, os.Args[0])
		c.Env = append(os.Environ(), "NETSETUP_HELPER=dial", "NETSETUP_ADDR="+target)
		out, err := c.CombinedOutput()
		return string(out), err
	}
	if got := dial(target); got != 0 {
		t.Fatal("host cannot reach the pod")
	}
	if out, err := fromPod(); err != nil || !strings.Contains(out, "hello") {
		t.Fatalf("pod to pod: %q %v", out, err)
	}
	if err := SetLinkUp(pods[0].HostVeth, false); err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", target, time.Second); err == nil {
		t.Fatal("host reached a cut pod")
	}
	if out, err := fromPod(); err == nil {
		t.Fatalf("pod reached a cut pod: %q", out)
	}
	if err := SetLinkUp(pods[0].HostVeth, true); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := fromPod()
		if err == nil && strings.Contains(out, "hello") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("healed pod unreachable: %q %v", out, err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	stop()
	for _, p := range pods {
		if err := TeardownPod(p.Netns, p.HostVeth); err != nil {
			t.Fatal(err)
		}
		if NetnsExists(p.Netns) || linkExists(p.HostVeth) {
			t.Fatalf("%s left behind", p.Netns)
		}
		if _, err := os.Stat(filepath.Join(EtcNetns, p.Netns)); err == nil {
			t.Fatalf("/etc/netns/%s left behind", p.Netns)
		}
	}
}
