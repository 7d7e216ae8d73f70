package netsetup

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sort"
	"sync"
)

// IPAM hands out addresses of a node's Pod CIDR and remembers them in a file, so a Pod keeps
// its address when the kubelet restarts (Kubernetes forbids changing a Pod's IP).
type IPAM struct {
	path string
	cidr netip.Prefix

	mu    sync.Mutex
	byKey map[string]netip.Addr
}

// OpenIPAM loads the allocations in path (missing file: none) for the CIDR.
func OpenIPAM(path string, cidr netip.Prefix) (*IPAM, error) {
	if !cidr.Addr().Is4() {
		return nil, fmt.Errorf("pod CIDR %s: only IPv4 is supported", cidr)
	}
	a := &IPAM{path: path, cidr: cidr.Masked(), byKey: map[string]netip.Addr{}}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return a, nil
	}
	if err != nil {
		return nil, err
	}
	var saved map[string]string
	if err := json.Unmarshal(data, &saved); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	for k, v := range saved {
		addr, err := netip.ParseAddr(v)
		if err != nil || !a.cidr.Contains(addr) {
			continue // a stale entry from another CIDR; forget it
		}
		a.byKey[k] = addr
	}
	return a, nil
}

// Allocate returns key's address, choosing the lowest free one the first time. The network,
// first (.1, kept for gateways) and broadcast addresses are never handed out.
func (a *IPAM) Allocate(key string) (netip.Addr, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if addr, ok := a.byKey[key]; ok {
		return addr, nil
	}
	used := map[netip.Addr]bool{}
	for _, addr := range a.byKey {
		used[addr] = true
	}
	first := a.cidr.Addr().Next().Next()
	for addr := first; a.cidr.Contains(addr) && a.cidr.Contains(addr.Next()); addr = addr.Next() {
		if !used[addr] {
			a.byKey[key] = addr
			if err := a.save(); err != nil {
				delete(a.byKey, key)
				return netip.Addr{}, err
			}
			return addr, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("pod CIDR %s is full", a.cidr)
}

// Release frees key's address.
func (a *IPAM) Release(key string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, ok := a.byKey[key]; !ok {
		return nil
	}
	delete(a.byKey, key)
	return a.save()
}

// Keys lists the keys holding an address.
func (a *IPAM) Keys() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	keys := make([]string, 0, len(a.byKey))
	for k := range a.byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func (a *IPAM) save() error {
	saved := make(map[string]string, len(a.byKey))
	for k, v := range a.byKey {
		saved[k] = v.String()
	}
	data, err := json.MarshalIndent(saved, "", "  ")
	if err != nil {
		return err
	}
	tmp := a.path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, a.path)
}
