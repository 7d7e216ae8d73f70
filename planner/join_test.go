package planner

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/plan"
)

// A learner joins on the evidence etcd itself needs, not on every voter answering: a voter
// that runs on its data but does not answer clients yet (etcd 3.6 holds a joining member's
// client port while it publishes itself, for up to 7 s, though it already takes part in
// raft) does not hold up the next join. A learner does not vote, so adding one costs no
// quorum; etcd's strict reconfiguration check refuses it until the leader has been connected
// to enough voters for 5 s, which the executor polls as a wait.
func TestLearnerJoinsWhileAVoterPublishes(t *testing.T) {
	c := cluster(3, "3.6.16")
	w := running(c, 2, "3.6.16")
	w.members["demo-1"].silent = true // promoted, publishing itself
	o := w.observe()
	require.True(t, o.Etcd.Linearizable)

	p := Plan(c, o)
	require.Equal(t, []string{"AddLearner demo-2"}, summary(p)[:1])
	add := p.Steps[0]
	require.Equal(t, plan.Precondition{Kind: plan.PreQuorumHealthy}, add.Precondition)
	ok, why := Check(c, add, o)
	require.True(t, ok, why)

	t.Run("not on a member list read without quorum", func(t *testing.T) {
		o := w.observe()
		o.Etcd.Linearizable = false
		ok, why := Check(c, add, o)
		require.False(t, ok)
		require.Contains(t, why, "linearizable")
	})
	t.Run("not without a leader", func(t *testing.T) {
		o := w.observe()
		o.Etcd.LeaderID = ""
		ok, why := Check(c, add, o)
		require.False(t, ok)
		require.Contains(t, why, "leader")
	})
	// Three voters keep a quorum with one of them down.
	c4 := cluster(4, "3.6.16")
	add4 := plan.Step{Action: plan.AddLearner, Member: "demo-3", Precondition: plan.Precondition{Kind: plan.PreQuorumHealthy}}
	t.Run("not while a voter's etcd does not run", func(t *testing.T) {
		w := running(c4, 3, "3.6.16")
		w.members["demo-1"].starting, w.members["demo-1"].up = true, false // its Pod is there, its etcd not yet
		ok, why := Check(c4, add4, w.observe())
		require.False(t, ok)
		require.Contains(t, why, "demo-1")
	})
	t.Run("not while a voter is down", func(t *testing.T) {
		w := running(c4, 3, "3.6.16")
		w.members["demo-1"].pod, w.members["demo-1"].up = false, false
		o := w.observe()
		ok, why := Check(c4, add4, o)
		require.False(t, ok)
		require.Contains(t, why, "demo-1")
		require.Equal(t, "StartMember demo-1", summary(Plan(c4, o))[0], "the repair comes first")
	})
	t.Run("not while a voter lost its data", func(t *testing.T) {
		w := running(c4, 3, "3.6.16")
		w.members["demo-2"].dataLost, w.members["demo-2"].up = true, false
		ok, why := Check(c4, add4, w.observe())
		require.False(t, ok)
		require.Contains(t, why, "demo-2")
	})
	t.Run("while a voter of three publishes", func(t *testing.T) {
		w := running(c4, 3, "3.6.16")
		w.members["demo-2"].silent = true
		ok, why := Check(c4, add4, w.observe())
		require.True(t, ok, why)
	})
	t.Run("not while the leader does not answer", func(t *testing.T) {
		o := w.observe()
		o.Etcd.Members[0].Answering, o.Etcd.Members[0].Silent = false, true
		ok, why := Check(c, add, o)
		require.False(t, ok)
		require.Contains(t, why, "leader")
	})
}
