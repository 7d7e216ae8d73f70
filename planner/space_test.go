package planner

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/plan"
)

// nospace is three voters led by demo-0 whose databases reached the quota with data and
// earlier revisions, under a NOSPACE alarm raised by demo-1.
func nospace(c Desired, data, history int64) *world {
	w := running(c, 3, c.Version)
	for _, m := range w.members {
		m.data, m.history = data, history
	}
	w.alarms = []Alarm{{MemberID: "2", Type: AlarmNoSpace}}
	return w
}

// A NOSPACE alarm is answered as etcd's guide says: compact the history; then a new plan
// defragments each member, followers first and the leader last after leadership moved,
// and disarms the alarm once every database is under its quota.
func TestNospaceIsRecovered(t *testing.T) {
	c := cluster(3, "3.6.16")
	w := nospace(c, 100<<20, defaultQuota)
	first := Plan(c, w.observe())
	require.Equal(t, []string{"Compact "}, summary(first), "what compaction frees shows only after it")
	stuck, err := w.apply(first.Steps[0], c)
	require.NoError(t, err)
	require.False(t, stuck)

	second := Plan(c, w.observe())
	require.Equal(t, []string{"Defragment demo-1", "Defragment demo-2", "TransferLeadership demo-0>demo-1", "Defragment demo-0", "DisarmAlarm demo-1"},
		summary(second))
	require.Contains(t, second.Steps[0].Reason, "the database of demo-1 holds free space")
	converge(t, c, w)
	require.Empty(t, w.alarms)
	for _, m := range w.members {
		require.Less(t, m.dbSize(), int64(defaultQuota))
	}
}

// Data that does not fit under the quota even compacted and defragmented blocks with what
// to do; raising the quota rolls the members, and the alarm is disarmed after.
func TestNospaceOverQuotaSaysRaiseIt(t *testing.T) {
	c := cluster(3, "3.6.16")
	w := nospace(c, defaultQuota+(1<<20), 0)
	w.compacted = true
	p := Plan(c, w.observe())
	require.NotNil(t, p.Blocked)
	require.Equal(t, plan.BlockQuotaTooSmall, p.Blocked.Reason)
	require.Contains(t, p.Blocked.Message, "raise spec.options.quotaBackendBytes")
	require.Contains(t, p.Blocked.Message, "the database of demo-0 is 2049.0 MiB (2049.0 MiB of it in use) against a quota of 2048.0 MiB",
		"the figure the check uses, beside the one in use")

	c.QuotaBytes, c.ConfigHash = 4<<30, "cfg-2"
	p = Plan(c, w.observe())
	require.Equal(t, []string{"RestartMember demo-1", "RestartMember demo-2", "TransferLeadership demo-0>demo-1", "RestartMember demo-0", "DisarmAlarm demo-1"},
		summary(p))
	converge(t, c, w)
	require.Empty(t, w.alarms)
}

// A CORRUPT alarm stops every change: which member holds the right data is for a person
// to find out.
func TestCorruptBlocks(t *testing.T) {
	c := cluster(5, "3.6.16")
	w := running(c, 3, c.Version)
	w.alarms = []Alarm{{MemberID: "3", Type: AlarmCorrupt}}
	p := Plan(c, w.observe())
	require.Empty(t, p.Steps, "not even the scale-up")
	require.Equal(t, plan.BlockCorrupt, p.Blocked.Reason)
	require.Contains(t, p.Blocked.Message, "etcdctl endpoint hashkv")
}

// spec.maintenance.defrag's threshold defragments the members that reach it, one at a time
// and the leader last; a defragmentation takes a member away like a restart does.
func TestFragmentedMembersAreDefragmented(t *testing.T) {
	c := cluster(3, "3.6.16")
	w := running(c, 3, c.Version)
	for _, m := range w.members {
		m.data, m.free = 10<<20, 20<<20
	}
	w.members["demo-2"].free = 1 << 20 // under the threshold
	require.Empty(t, Plan(c, w.observe()).Steps, "no threshold, no defragmentation")
	c.DefragPercent = 50
	p := Plan(c, w.observe())
	require.Equal(t, []string{"Defragment demo-1", "TransferLeadership demo-0>demo-1", "Defragment demo-0"}, summary(p))
	require.Equal(t, plan.PreClusterHealthy, p.Steps[0].Precondition.Kind)
	require.Equal(t, "2", p.Steps[0].MemberID)
	converge(t, c, w)

	w.members["demo-2"].free, w.members["demo-2"].up = 40<<20, false
	ok, why := Check(c, plan.Step{Action: plan.Defragment, Member: "demo-0", MemberID: "1", Precondition: plan.Precondition{Kind: plan.PreNone}}, w.observe())
	require.False(t, ok, "one member down already")
	require.Contains(t, why, "quorum")
}

func TestScheduledDefragmentation(t *testing.T) {
	c := cluster(3, "3.6.16")
	w := running(c, 3, c.Version)
	for _, m := range w.members {
		m.data, m.free = 10<<20, 2<<20
	}
	w.members["demo-2"].free = 512 << 10 // nothing worth giving back
	w.defragDue = []string{"1", "2", "3"}
	p := Plan(c, w.observe())
	require.Equal(t, []string{"Defragment demo-1", "TransferLeadership demo-0>demo-1", "Defragment demo-0"}, summary(p))
	require.Contains(t, p.Steps[0].Reason, "spec.maintenance.defrag.schedule came while the database of demo-1 held 2.0 MiB free")
	require.Equal(t, []string{"1", "2"}, w.defragDue, "demo-2 had nothing to give back")
	converge(t, c, w)
	require.Empty(t, w.defragDue, "the round is done")

	w.members["demo-1"].free = 40 << 20
	require.Empty(t, Plan(c, w.observe()).Steps, "between two times of the schedule, nothing is due")

	w.members["demo-2"].pod, w.members["demo-2"].up, w.members["demo-2"].free = false, false, 0
	w.defragDue = []string{"3"}
	require.Equal(t, []string{"StartMember demo-2"}, summary(Plan(c, w.observe())), "a member that did not answer shows no free space to give back yet")
	require.Equal(t, []string{"3"}, w.defragDue, "it stays due")
}

func TestDefragStillDue(t *testing.T) {
	o := Observed{Etcd: &EtcdView{Linearizable: true, Members: []EtcdMember{
		{ID: "1", Answering: true, DBSize: 30 << 20, DBInUse: 10 << 20},
		{ID: "2", Answering: true, DBSize: 10 << 20, DBInUse: 10 << 20},
		{ID: "3"}, // does not answer
	}}}
	require.Equal(t, []string{"1", "3"}, DefragStillDue(o, []string{"1", "2", "3", "4"}, 1), "4 left the cluster, 2 is done")
	require.Equal(t, []string{"3"}, DefragStillDue(o, []string{"1", "2", "3"}, 70), "1 holds less than 70% free")
	o.Etcd.Linearizable = false
	require.Equal(t, []string{"3", "4"}, DefragStillDue(o, []string{"3", "4"}, 1), "a stale view proves no member gone")
	require.Equal(t, []string{"4"}, DefragStillDue(Observed{}, []string{"4"}, 1), "no view, nothing known")
}

// Two voters cannot take one of theirs away for a defragmentation, which stalls its raft
// loop and every write with it: a temporary third member joins first, as for a roll, and
// leaves once the alarm is disarmed.
func TestNospaceOnTwoVoters(t *testing.T) {
	c := cluster(2, "3.6.16")
	w := running(c, 2, c.Version)
	for _, m := range w.members {
		m.data, m.history = 400<<20, defaultQuota-(400<<20)
	}
	w.alarms = []Alarm{{MemberID: "2", Type: AlarmNoSpace}}
	first := Plan(c, w.observe())
	require.Equal(t, []string{"Compact "}, summary(first))
	stuck, err := w.apply(first.Steps[0], c)
	require.NoError(t, err)
	require.False(t, stuck)

	p := Plan(c, w.observe())
	require.Nil(t, p.Blocked, "the file is over the quota, the data is not: defragmentation is the answer")
	require.Equal(t, []string{"AddLearner demo-2", "StartMember demo-2", "PromoteLearner demo-2",
		"Defragment demo-1", "TransferLeadership demo-0>demo-1", "Defragment demo-0", "DisarmAlarm demo-1",
		"RemoveMember demo-2", "DeleteMember demo-2"}, summary(p))
	require.Contains(t, p.Steps[0].Reason, "temporary third member, so two voters keep quorum while each restarts or is defragmented")
	converge(t, c, w)
	require.Empty(t, w.alarms)
	require.Len(t, w.members, 2)
}

// spec.maintenance.defrag on two voters, by threshold or by schedule, defragments behind a
// temporary third member instead of waiting for ever.
func TestDefragmentationOnTwoVoters(t *testing.T) {
	want := []string{"AddLearner demo-2", "StartMember demo-2", "PromoteLearner demo-2",
		"Defragment demo-1", "TransferLeadership demo-0>demo-1", "Defragment demo-0", "RemoveMember demo-2", "DeleteMember demo-2"}
	t.Run("threshold", func(t *testing.T) {
		c := cluster(2, "3.6.16")
		c.DefragPercent = 50
		w := running(c, 2, c.Version)
		for _, m := range w.members {
			m.data, m.free = 10<<20, 20<<20
		}
		require.Equal(t, want, summary(Plan(c, w.observe())))
		converge(t, c, w)
		require.Len(t, w.members, 2)
	})
	t.Run("schedule", func(t *testing.T) {
		c := cluster(2, "3.6.16")
		w := running(c, 2, c.Version)
		for _, m := range w.members {
			m.data, m.free = 10<<20, 2<<20
		}
		w.defragDue = []string{"1", "2"}
		require.Equal(t, want, summary(Plan(c, w.observe())))
		converge(t, c, w)
		require.Empty(t, w.defragDue)
		require.Len(t, w.members, 2)
	})
}
