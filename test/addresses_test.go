// Package test holds the end-to-end suites and the local stack; this file checks that no
// test addresses anything outside this machine.
package test

import (
	"bufio"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// ownNetworks are the addresses tests may name: loopback, "any", the networks the kubelet's
// self-tests make for themselves, and the local stacks' Pod and Service networks
// (10.(88+N).0.0/16 for stack N, test/stack/instance.go). Anything else may be a real host
// next to this machine (its gateway, say), and tests send no traffic there.
var ownNetworks = []string{"127.0.0.0/8", "0.0.0.0/32", "10.77.0.0/16", "10.78.0.0/16",
	"10.88.0.0/15", "10.90.0.0/15", "10.92.0.0/15", "10.94.0.0/15", "10.96.0.0/15"}

var ipv4 = regexp.MustCompile(`\b(?:\d{1,3}\.){3}\d{1,3}(?:/\d{1,2})?\b`)

// Every IPv4 address written in test code or in the stack's code is one of ownNetworks,
// even where it is only data (a fake Pod IP): such data gets copied into tests that dial.
func TestTestsAddressOnlyTheirOwnNetworks(t *testing.T) {
	out, err := exec.Command("git", "-C", "..", "ls-files", "*_test.go", "test/*.go").Output()
	if err != nil {
		t.Skipf("not a git checkout: %v", err)
	}
	var own []netip.Prefix
	for _, n := range ownNetworks {
		own = append(own, netip.MustParsePrefix(n))
	}
	for _, file := range strings.Fields(string(out)) {
		f, err := os.Open("../" + file)
		if err != nil {
			t.Fatal(err)
		}
		s := bufio.NewScanner(f)
		for line := 1; s.Scan(); line++ {
			for _, lit := range ipv4.FindAllString(s.Text(), -1) {
				addr, err := netip.ParseAddr(strings.SplitN(lit, "/", 2)[0])
				if err != nil || !inAny(own, addr) {
					t.Errorf("%s:%d: %s is outside loopback and the stack's networks (%s): use an address of the stack, such as a closed port on its bridge",
						file, line, lit, strings.Join(ownNetworks, ", "))
				}
			}
		}
		f.Close()
	}
}

func inAny(nets []netip.Prefix, a netip.Addr) bool {
	for _, n := range nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}
