package planner

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/plan"
)

// onVolumes is n healthy voters on volumes of a class and size, led by demo-0.
func onVolumes(c Desired, n int, class string, bytes int64, expandable map[string]bool) *world {
	w := running(c, n, c.Version)
	for _, m := range w.members {
		m.class, m.bytes = class, bytes
	}
	w.expandable = expandable
	return w
}

// replaceAll converges the world (see converge) and checks the cluster never had fewer
// voters that answer than it started with, and ends as the spec asks.
func replaceAll(t *testing.T, c Desired, w *world) {
	t.Helper()
	_, least := w.voters()
	convergeWith(t, c, w, func(s plan.Step) {
		w.settle()
		_, up := w.voters()
		require.GreaterOrEqual(t, up, least, "after %s %s", s.Action, s.Member)
	})
	require.True(t, isConverged(w, c))
}

// A new storage class moves the members one at a time: a new member joins on the new
// class, then one on the old leaves (the leader last, after leadership moved), so the
// cluster always has the voters the spec asks for.
func TestStorageClassChangeReplacesOneAtATime(t *testing.T) {
	c := cluster(3, "3.6.16")
	c.StorageClass, c.StorageBytes = "fast", 1<<30
	w := onVolumes(c, 3, "slow", 1<<30, map[string]bool{"slow": true, "fast": true})
	p := Plan(c, w.observe())
	require.Equal(t, []string{
		"AddLearner demo-3", "StartMember demo-3", "PromoteLearner demo-3", "RemoveMember demo-1", "DeleteMember demo-1",
		"AddLearner demo-4", "StartMember demo-4", "PromoteLearner demo-4", "RemoveMember demo-2", "DeleteMember demo-2",
		"AddLearner demo-5", "StartMember demo-5", "PromoteLearner demo-5", "TransferLeadership demo-0>demo-3", "RemoveMember demo-0", "DeleteMember demo-0",
	}, summary(p))
	require.Equal(t, "member demo-3 joins to replace demo-1: its volume is of storage class slow, spec.storage.storageClassName is fast", p.Steps[0].Reason)
	require.Equal(t, "member demo-1 leaves, replaced by a new member: its volume is of storage class slow, spec.storage.storageClassName is fast", p.Steps[3].Reason)
	replaceAll(t, c, w)
	for _, m := range w.members {
		require.Equal(t, "fast", m.class, m.name)
	}
}

// A larger size grows each claim in place when its class allows it; nothing restarts.
func TestVolumesGrowInPlace(t *testing.T) {
	c := cluster(3, "3.6.16")
	c.StorageBytes = 2 << 30
	w := onVolumes(c, 3, "local", 1<<30, map[string]bool{"local": true})
	p := Plan(c, w.observe())
	require.Equal(t, []string{"ExpandVolume demo-0", "ExpandVolume demo-1", "ExpandVolume demo-2"}, summary(p))
	require.Equal(t, "spec.storage.size 1Gi -> 2Gi", p.Steps[0].Reason)
	require.Equal(t, "1", p.Steps[0].MemberID)
	converge(t, c, w)
	for _, m := range w.members {
		require.Equal(t, int64(2<<30), m.bytes)
	}
}

// A class that cannot grow volumes has its members replaced by members on larger ones; a
// class that cannot be read has nothing planned on a guess.
func TestVolumesThatCannotGrowAreReplaced(t *testing.T) {
	c := cluster(3, "3.6.16")
	c.StorageBytes = 2 << 30
	w := onVolumes(c, 3, "local", 1<<30, map[string]bool{"local": false})
	p := Plan(c, w.observe())
	require.Len(t, p.Steps, 16)
	require.Contains(t, p.Steps[0].Reason, "its volume holds 1Gi, spec.storage.size is 2Gi, and storage class local cannot expand volumes")
	replaceAll(t, c, w)

	w = onVolumes(c, 3, "local", 1<<30, nil)
	p = Plan(c, w.observe())
	require.Empty(t, p.Steps)
	require.Nil(t, p.Blocked)
}

// Members in memory lose their data with their Pod: a restart the spec asks for is a new
// member joining, then the old one leaving, never a restart in place.
func TestMemoryMembersAreReplacedNotRestarted(t *testing.T) {
	for _, change := range []func(*Desired){
		func(c *Desired) { c.ConfigHash = "cfg-2" },
		func(c *Desired) { c.Version = "3.6.16" },
	} {
		c := cluster(3, "3.5.35")
		c.Memory = true
		w := running(c, 3, c.Version)
		w.memory = true
		for _, m := range w.members {
			m.pvc = false
		}
		change(&c)
		p := Plan(c, w.observe())
		require.Len(t, p.Steps, 16, "%v", summary(p))
		require.Contains(t, p.Steps[0].Reason, "its data lives in memory: a restart would lose it")
		for _, s := range p.Steps {
			require.NotContains(t, []string{"RestartMember", "UpgradeMember"}, string(s.Action))
		}
		replaceAll(t, c, w)
	}
}

// Two voters move onto a new class through a third member, never one alone.
func TestTwoVotersMoveThroughAThird(t *testing.T) {
	c := cluster(2, "3.6.16")
	c.StorageClass = "fast"
	w := onVolumes(c, 2, "slow", 1<<30, map[string]bool{"slow": true})
	replaceAll(t, c, w)
	require.Len(t, w.members, 2)
}

// A member to be replaced is not grown first.
func TestReplacedMembersAreNotGrown(t *testing.T) {
	c := cluster(3, "3.6.16")
	c.StorageClass, c.StorageBytes = "fast", 2<<30
	w := onVolumes(c, 3, "slow", 1<<30, map[string]bool{"slow": true})
	for _, s := range Plan(c, w.observe()).Steps {
		require.NotEqual(t, "ExpandVolume", string(s.Action))
	}
}
