package planner

import (
	"fmt"

	"github.com/etcdplan/etcdplan/api/plan"
)

// replacement says why voter mm is replaced by a new member instead of being changed in
// place, or "" when it is not: its volume is of another class than the spec names, or is
// smaller than the spec asks and its class cannot grow it, or its data lives in memory and
// the restart the spec asks for would lose it. A new member joins first (on the spec's
// volume, with the spec's configuration), then the old one leaves: the cluster never has
// fewer voters than the spec asks.
func replacement(mm *member, d Desired) string {
	if !mm.voter() || d.Replicas == 0 {
		return ""
	}
	if d.Memory {
		if !mm.pod || mm.podDeleting {
			return ""
		}
		switch {
		case mm.version != d.Version:
			return fmt.Sprintf("spec.version %s -> %s, and its data lives in memory: a restart would lose it", mm.version, d.Version)
		case mm.configHash != d.ConfigHash:
			return fmt.Sprintf("%s, and its data lives in memory: a restart would lose it", configReason(mm, d))
		}
		return ""
	}
	if !mm.pvc || mm.pvcDeleting {
		return ""
	}
	switch {
	case d.StorageClass != "" && mm.class != "" && mm.class != d.StorageClass:
		return fmt.Sprintf("its volume is of storage class %s, spec.storage.storageClassName is %s", mm.class, d.StorageClass)
	case mm.bytes > 0 && mm.bytes < d.StorageBytes && mm.expandable != nil && !*mm.expandable:
		return fmt.Sprintf("its volume holds %s, spec.storage.size is %s, and storage class %s cannot expand volumes",
			size(mm.bytes), size(d.StorageBytes), mm.class)
	}
	return ""
}

// replacing returns the next voter to be replaced, if any: the leader last.
func (m *model) replacing(d Desired) *member {
	for _, mm := range leaderLast(m) {
		if replacement(mm, d) != "" {
			return mm
		}
	}
	return nil
}

// expandVolumes asks each member's claim for spec.storage.size when its class can grow
// volumes in place. Nothing is restarted: the class grows the volume under the running
// member.
func expandVolumes(m *model, d Desired) (plan.Step, bool) {
	if d.Memory {
		return plan.Step{}, false
	}
	for _, mm := range m.members {
		if mm.pvc && !mm.pvcDeleting && !mm.retained && mm.bytes > 0 && mm.bytes < d.StorageBytes && mm.expandable != nil && *mm.expandable &&
			replacement(mm, d) == "" {
			return step(plan.ExpandVolume, mm, plan.PreNone, plan.WhySizeChanged, "spec.storage.size %s -> %s", size(mm.bytes), size(d.StorageBytes)), true
		}
	}
	return plan.Step{}, false
}

// size renders bytes as Kubernetes writes quantities, in the largest unit that divides them.
func size(n int64) string {
	for _, u := range []struct {
		suffix string
		bytes  int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"G", 1e9}, {"M", 1e6}, {"Ki", 1 << 10}} {
		if n >= u.bytes && n%u.bytes == 0 {
			return fmt.Sprintf("%d%s", n/u.bytes, u.suffix)
		}
	}
	return fmt.Sprintf("%d", n)
}
