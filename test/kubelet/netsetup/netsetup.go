// Package netsetup builds the local stack's network with iproute2: one bridge on the host and,
// per Pod, a network namespace joined to the bridge by a veth pair.
//
// Pods get addresses from the bridge's subnet, so every Pod, on any node, is on the same L2
// segment as the host: no routes or NAT are needed for host-to-Pod and Pod-to-Pod traffic.
package netsetup

import (
	"bytes"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

const (
	// Bridge is the host bridge Pods attach to unless told another.
	Bridge = "etcdplan0"
	// NetnsPrefix starts the name of every network namespace the local kubelet creates,
	// unless told another (a stack beside another has its own).
	NetnsPrefix = "lk-"
	// EtcNetns is where `ip netns exec` finds the files it mounts over /etc.
	EtcNetns = "/etc/netns"
)

// VethPrefix starts the host side of every Pod's veth pair of the namespaces named with
// prefix: "lk-" gives "lkh", "lk1-" "lk1h".
func VethPrefix(prefix string) string { return strings.TrimSuffix(prefix, "-") + "h" }

// ip runs iproute2 and returns its error output on failure.
func ip(args ...string) error {
	var stderr bytes.Buffer
	cmd := exec.Command("ip", args...)
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func ipOutput(args ...string) (string, error) {
	out, err := exec.Command("ip", args...).Output()
	if err != nil {
		return "", fmt.Errorf("ip %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

func linkExists(name string) bool {
	return exec.Command("ip", "link", "show", "dev", name).Run() == nil
}

// EnsureBridge creates the bridge with the gateway address (e.g. 10.88.0.1/16) and brings it
// up. It is idempotent.
func EnsureBridge(bridge string, gateway netip.Prefix) error {
	if !linkExists(bridge) {
		if err := ip("link", "add", bridge, "type", "bridge"); err != nil && !linkExists(bridge) {
			return err
		}
	}
	// The cluster process and the nodes start together and all ensure the bridge: the
	// address may be added by another between the check and the add.
	if !hasAddr(bridge, gateway) {
		if err := ip("addr", "add", gateway.String(), "dev", bridge); err != nil && !hasAddr(bridge, gateway) {
			return err
		}
	}
	if err := ip("link", "set", bridge, "up"); err != nil {
		return err
	}
	// Forwarding is only needed if Pods talk to networks beyond the bridge; enabling it does
	// no harm on a test machine.
	_ = os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644)
	return nil
}

func hasAddr(dev string, addr netip.Prefix) bool {
	out, err := ipOutput("-o", "addr", "show", "dev", dev)
	return err == nil && strings.Contains(out, " "+addr.String()+" ")
}

// DeleteBridge removes the bridge if it exists.
func DeleteBridge(bridge string) error {
	if !linkExists(bridge) {
		return nil
	}
	return ip("link", "del", bridge)
}

// Names derives the network namespace and host veth names of a Pod from its UID, the
// namespace's starting with prefix. Interface names are limited to 15 bytes, hence the short
// hash.
func Names(prefix, podUID string) (netns, hostVeth string) {
	sum := sha1.Sum([]byte(podUID))
	h := hex.EncodeToString(sum[:])[:10]
	return prefix + h, VethPrefix(prefix) + h
}

// Pod describes one Pod's network.
type Pod struct {
	Bridge   string
	Netns    string
	HostVeth string
	Addr     netip.Prefix // the Pod's address with the bridge's prefix length, e.g. 10.88.1.2/16
	Gateway  netip.Addr
}

// SetupPod creates the Pod's namespace (replacing any leftover of the same name), a veth pair
// with eth0 inside and the host side on the bridge, the address, the default route and lo.
func SetupPod(p Pod) error {
	if err := TeardownPod(p.Netns, p.HostVeth); err != nil {
		return err
	}
	steps := [][]string{
		{"netns", "add", p.Netns},
		{"link", "add", p.HostVeth, "type", "veth", "peer", "name", "eth0", "netns", p.Netns},
		{"link", "set", p.HostVeth, "master", p.Bridge, "up"},
		{"-n", p.Netns, "link", "set", "lo", "up"},
		{"-n", p.Netns, "addr", "add", p.Addr.String(), "dev", "eth0"},
		{"-n", p.Netns, "link", "set", "eth0", "up"},
		{"-n", p.Netns, "route", "add", "default", "via", p.Gateway.String()},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return err
		}
	}
	return nil
}

// TeardownPod deletes the Pod's namespace (which destroys its veth pair) and its /etc files.
// It is idempotent.
func TeardownPod(netns, hostVeth string) error {
	var errs []error
	if NetnsExists(netns) {
		if err := ip("netns", "del", netns); err != nil {
			errs = append(errs, err)
		}
	}
	if hostVeth != "" && linkExists(hostVeth) {
		if err := ip("link", "del", hostVeth); err != nil && linkExists(hostVeth) {
			errs = append(errs, err)
		}
	}
	if err := os.RemoveAll(filepath.Join(EtcNetns, netns)); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// NetnsExists tells whether a named network namespace exists.
func NetnsExists(name string) bool {
	_, err := os.Stat(filepath.Join("/var/run/netns", name))
	return err == nil
}

// SetLinkUp takes a Pod's host veth up or down. Down cuts the Pod off: nothing reaches it and
// it reaches nothing, while its processes keep running.
func SetLinkUp(hostVeth string, up bool) error {
	state := "down"
	if up {
		state = "up"
	}
	return ip("link", "set", hostVeth, state)
}

// WriteEtc writes the files `ip netns exec` mounts over /etc in the Pod's namespace.
func WriteEtc(netns string, files map[string]string) error {
	dir := filepath.Join(EtcNetns, netns)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ListNetns lists the network namespaces whose name starts with prefix.
func ListNetns(prefix string) []string {
	entries, _ := os.ReadDir("/var/run/netns")
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names
}

// CleanupAll removes every namespace named with prefix, its /etc/netns directory and host
// veth the local kubelet may have left.
func CleanupAll(prefix string) error {
	var errs []error
	for _, ns := range ListNetns(prefix) {
		if err := TeardownPod(ns, ""); err != nil {
			errs = append(errs, err)
		}
	}
	entries, _ := os.ReadDir(EtcNetns)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			errs = append(errs, os.RemoveAll(filepath.Join(EtcNetns, e.Name())))
		}
	}
	out, _ := ipOutput("-o", "link", "show")
	for _, line := range strings.Split(out, "\n") {
		// "12: lkh0123456789@if2: <...>"
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if strings.HasPrefix(name, VethPrefix(prefix)) {
			if err := ip("link", "del", name); err != nil && linkExists(name) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// LinkUp tells whether a link is administratively up.
func LinkUp(name string) bool {
	out, err := ipOutput("-o", "link", "show", "dev", name)
	if err != nil {
		return false
	}
	i := strings.Index(out, "<")
	j := strings.Index(out, ">")
	if i < 0 || j < i {
		return false
	}
	for _, f := range strings.Split(out[i+1:j], ",") {
		if f == "UP" {
			return true
		}
	}
	return false
}
