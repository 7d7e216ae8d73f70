package planner

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/plan"
)

// adoptedWorld is a running cluster of n members outside Kubernetes, led by src-0, that
// the cluster c adopts.
func adoptedWorld(c Desired, n int) *world {
	w := &world{cluster: name, clusterID: "c1", members: map[string]*wmember{}, join: &Join{}}
	for i := range n {
		w.nextID++
		m := &wmember{name: fmt.Sprintf("src-%d", i), id: strconv.Itoa(w.nextID), inEtcd: true, started: true, up: true, version: c.Version, source: true}
		w.members[m.name] = m
		w.join.Source = append(w.join.Source, RecordedMember{Name: m.name, ID: m.id})
	}
	w.leader = "src-0"
	return w
}

// observeJoin records the adoption as the executor does: a source member missing from a
// linearizable member list has left.
func (w *world) observeJoin(o *Observed) {
	if w.join == nil {
		return
	}
	left := 0
	for _, r := range w.join.Source {
		if m := w.members[r.Name]; m == nil || !m.inEtcd {
			left++
		}
	}
	w.join.SourceLeft = w.join.SourceLeft || left > 0
	j := *w.join
	j.AllLeft = left == len(j.Source) && !w.adopted
	j.Peers = map[string][]string{} // every live member exchanges raft messages with every other
	for _, m := range w.sorted() {
		if m.inEtcd && m.live() && !w.peersCut {
			for _, x := range w.sorted() {
				if x != m && x.inEtcd && x.live() {
					j.Peers[m.id] = append(j.Peers[m.id], x.id)
				}
			}
		}
	}
	o.Join = &j
}

func adoption(replicas int) Desired {
	c := cluster(replicas, "3.6.16")
	c.Join = true
	return c
}

// One member joins, then one source member leaves, followers first after leadership moved
// to a member of the cluster: never more than one voter beyond the larger of the two sizes,
// and the last source member leaves with a reason of its own (it waits for approval).
func TestAdoptionJoinsOneAndTakesOneOut(t *testing.T) {
	c := adoption(3)
	w := adoptedWorld(c, 3)
	p := Plan(c, w.observe())
	require.Nil(t, p.Blocked)
	require.Equal(t, []string{
		"AddLearner demo-0", "StartMember demo-0", "PromoteLearner demo-0", "TransferLeadership src-0>demo-0", "RemoveMember src-0",
		"AddLearner demo-1", "StartMember demo-1", "PromoteLearner demo-1", "RemoveMember src-1",
		"AddLearner demo-2", "StartMember demo-2", "PromoteLearner demo-2", "RemoveMember src-2",
	}, summary(p))
	require.Equal(t, plan.WhySourceLast, p.Steps[len(p.Steps)-1].Why)
	require.Equal(t, plan.WhySourceLeaves, p.Steps[4].Why)
	require.Contains(t, p.Warnings[0], "no snapshot of the source")
	converge(t, c, w)
	for _, m := range w.members {
		require.Equal(t, !m.source, m.inEtcd, m.name)
	}
	require.Empty(t, summary(Plan(c, w.observe())), "the adopted cluster is the operator's")
}

func TestAdoptionOfOtherSizes(t *testing.T) {
	for _, tc := range []struct {
		sources, replicas int
		want              []string
	}{
		{1, 3, []string{"AddLearner demo-0", "StartMember demo-0", "PromoteLearner demo-0", "AddLearner demo-1", "StartMember demo-1",
			"PromoteLearner demo-1", "AddLearner demo-2", "StartMember demo-2", "PromoteLearner demo-2", "TransferLeadership src-0>demo-0", "RemoveMember src-0"}},
		{5, 3, []string{"AddLearner demo-0", "StartMember demo-0", "PromoteLearner demo-0", "TransferLeadership src-0>demo-0",
			"RemoveMember src-0", "RemoveMember src-1", "RemoveMember src-2", "AddLearner demo-1", "StartMember demo-1", "PromoteLearner demo-1",
			"RemoveMember src-3", "AddLearner demo-2", "StartMember demo-2", "PromoteLearner demo-2", "RemoveMember src-4"}},
	} {
		t.Run(fmt.Sprintf("%d sources to %d", tc.sources, tc.replicas), func(t *testing.T) {
			c := adoption(tc.replicas)
			w := adoptedWorld(c, tc.sources)
			require.Equal(t, tc.want, summary(Plan(c, w.observe())))
			converge(t, c, w)
		})
	}
}

// The preflight reads the source's own view and what the executor found; any problem
// blocks before anything changes, and a source that does not answer never makes the
// cluster bootstrap on its own.
func TestAdoptionPreflight(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(*world, *Desired)
		want   string
	}{
		{"a member down", func(w *world, _ *Desired) { w.members["src-1"].up = false }, "src-1 does not answer"},
		{"a learner", func(w *world, _ *Desired) { w.members["src-2"].learner = true }, "src-2 is a learner"},
		{"another minor", func(w *world, d *Desired) { d.Version = "3.5.35" }, "same minor"},
		{"an old 3.5", func(w *world, d *Desired) {
			d.Version = "3.5.20"
			for _, m := range w.members {
				m.version = "3.5.20"
			}
		}, "3.5.26 or later"},
		{"an alarm", func(w *world, _ *Desired) { w.alarms = []Alarm{{MemberID: "1", Type: AlarmNoSpace}} }, "disarm it first"},
		{"auth", func(w *world, _ *Desired) { w.auth = true }, "authentication on"},
		{"peer TLS asked", func(w *world, d *Desired) { d.PeerTLS = true }, "adopt with peer TLS off"},
		{"peers of the source talk TLS", func(w *world, _ *Desired) {
			for _, m := range w.members {
				m.peerTLS = true
			}
		}, "set tls.peer.mode Provided, with peerSecretName a Secret whose certificate the source's peer CA issued"},
		{"the source switches peer TLS", func(w *world, d *Desired) {
			w.members["src-1"].peerTLS, d.PeerTLS = true, true
		}, "the source's peers talk TLS (src-1) and plain text (src-0, src-2): finish the source's switch of peer TLS first"},
		{"the executor's check", func(w *world, _ *Desired) { w.join.Problems = []string{"demo-0's peer URL is not reachable"} }, "not reachable"},
		{"a name of the cluster's", func(w *world, _ *Desired) {
			m := w.members["src-2"]
			delete(w.members, "src-2")
			m.name, w.join.Source[2].Name = "demo-7", "demo-7"
			w.members[m.name] = m
		}, "name of this cluster's members"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := adoption(3)
			w := adoptedWorld(c, 3)
			tc.change(w, &c)
			p := Plan(c, w.observe())
			require.NotNil(t, p.Blocked, "%v", summary(p))
			require.Equal(t, plan.BlockAdoptionPreflight, p.Blocked.Reason)
			require.Contains(t, p.Blocked.Message, tc.want)
		})
	}
	t.Run("authentication kept", func(t *testing.T) {
		c := adoption(3)
		c.Auth, c.ClientTLS = true, true
		w := adoptedWorld(c, 3)
		w.auth = true
		p := Plan(c, w.observe())
		require.Nil(t, p.Blocked)
		require.Equal(t, []string{"EnableAuth ", "AddLearner demo-0"}, summary(p)[:2], "the operator's users first")
		require.Equal(t, plan.WhyAuthAdopted, p.Steps[0].Why)
		converge(t, c, w)
		require.True(t, w.join.UsersMade)
	})
	t.Run("authentication on once members joined, without spec.auth", func(t *testing.T) { // turned on by hand
		c := adoption(3)
		w := adoptedWorld(c, 3)
		applySteps(t, w, c, Plan(c, w.observe()).Steps[:3]) // demo-0 joined
		w.auth = true
		p := Plan(c, w.observe())
		require.NotNil(t, p.Blocked, "%v", summary(p))
		require.Equal(t, plan.BlockAdoptionPreflight, p.Blocked.Reason)
		require.Contains(t, p.Blocked.Message, "set spec.auth.enabled")
		c.Auth, c.ClientTLS = true, true
		require.Equal(t, plan.WhyAuthAdopted, Plan(c, w.observe()).Steps[0].Why)
	})
	t.Run("peer TLS kept", func(t *testing.T) { // the executor checks the spec's peer certificates are the user's
		c := adoption(3)
		c.PeerTLS = true
		w := adoptedWorld(c, 3)
		for _, m := range w.members {
			m.peerTLS = true
		}
		p := Plan(c, w.observe())
		require.Nil(t, p.Blocked)
		require.Len(t, p.Steps, 13, "%v", summary(p))
		converge(t, c, w)
		for _, m := range w.members {
			require.Equal(t, !m.source, m.inEtcd, m.name)
			require.True(t, m.peerTLS, "%s registers a TLS peer URL", m.name)
		}
		require.Empty(t, summary(Plan(c, w.observe())))
	})
	t.Run("no source answers", func(t *testing.T) {
		c := adoption(3)
		p := Plan(c, Observed{FormatVersion: ObservedFormatVersion, Join: &Join{Problems: []string{"dial tcp: connection refused"}}})
		require.NotNil(t, p.Blocked)
		require.Contains(t, p.Blocked.Message, "no member of the source answers")
		require.Contains(t, p.Blocked.Message, "connection refused")
	})
}

// Removing spec.bootstrap.join before a source member left takes the cluster's members out
// again, leadership back to the source first, and deletes their Pods and claims; then the
// plan says the rollback is done. After a source member left, it goes on.
func TestAdoptionRollsBack(t *testing.T) {
	c := adoption(3)
	w := adoptedWorld(c, 3)
	applySteps(t, w, c, Plan(c, w.observe()).Steps[:4]) // demo-0 joined and leads
	require.Equal(t, "demo-0", w.leader)
	back := c
	back.Join = false
	p := Plan(back, w.observe())
	require.Equal(t, []string{"TransferLeadership demo-0>src-0", "RemoveMember demo-0", "DeleteMember demo-0"}, summary(p))
	for _, s := range p.Steps {
		require.Equal(t, plan.WhyAdoptRollback, s.Why, "%v", s) // but the deletion of what is left
		if s.Action == plan.RemoveMember {
			break
		}
	}
	applySteps(t, w, back, p.Steps)
	p = Plan(back, w.observe())
	require.NotNil(t, p.Blocked)
	require.Equal(t, plan.BlockAdoptionRolledBack, p.Blocked.Reason)
	for _, name := range []string{"src-0", "src-1", "src-2"} {
		require.True(t, w.members[name].inEtcd, name)
	}

	t.Run("not once a source member left", func(t *testing.T) {
		w := adoptedWorld(c, 3)
		applySteps(t, w, c, Plan(c, w.observe()).Steps[:5])
		o := w.observe()
		require.True(t, o.Join.SourceLeft)
		p = Plan(back, o)
		require.Equal(t, "AddLearner demo-1", summary(p)[0])
		require.Contains(t, p.Warnings, "spec.bootstrap.join was removed after a source member left: the adoption can no longer be rolled back, and goes on")
	})
}

// applySteps applies steps to the world one after the other, each once it can start.
func applySteps(t *testing.T, w *world, c Desired, steps []plan.Step) {
	t.Helper()
	for _, s := range steps {
		stuck, err := w.apply(s, c)
		require.NoError(t, err)
		if stuck && w.settle() {
			stuck, err = w.apply(s, c)
			require.NoError(t, err)
		}
		require.False(t, stuck, "%v", s)
	}
}

// adopting puts the world in an adoption: source members beside the cluster's own, one of
// them perhaps down, perhaps leading, one perhaps gone already; the spec asks for the
// adoption, or no longer does (a rollback).
func adopting(r *bytesReader, c *Desired, w *world) {
	c.Join = !r.flag(4)
	w.join = &Join{}
	for i := range 1 + r.n(4) {
		w.nextID++
		m := &wmember{name: fmt.Sprintf("src-%d", i), id: strconv.Itoa(w.nextID), inEtcd: true, started: true, up: !r.flag(6), version: c.Version, source: true}
		w.members[m.name] = m
		w.join.Source = append(w.join.Source, RecordedMember{Name: m.name, ID: m.id})
		if m.up && r.flag(3) {
			w.leader = m.name
		}
	}
	if r.flag(3) { // one left before this look
		w.join.Source = append(w.join.Source, RecordedMember{Name: "src-gone", ID: "99"})
	}
	if r.flag(3) { // a backup destination for the snapshot before the first removal
		w.snapshotTo = "s3://fuzz/"
	}
	w.peersCut = r.flag(6) // leadership cannot move to the cluster's own
}

// With a backup destination, a snapshot of the adopted cluster is stored from the new
// leader before the first source member leaves. Once every source member left, the user's
// word that they are stopped and wiped comes last, in a plan of its own.
func TestAdoptionSnapshotsFirstAndEndsAcknowledged(t *testing.T) {
	c := adoption(3)
	w := adoptedWorld(c, 3)
	w.snapshotTo = "s3://backups/demo"
	p := Plan(c, w.observe())
	require.Equal(t, []string{"AddLearner demo-0", "StartMember demo-0", "PromoteLearner demo-0", "TransferLeadership src-0>demo-0",
		"SnapshotSource demo-0", "RemoveMember src-0", "AddLearner demo-1"}, summary(p)[:7])
	require.Equal(t, SourceSnapshotName("demo"), p.Steps[4].Backup)
	require.Equal(t, plan.PrePeersConnected, p.Steps[3].Precondition.Kind, "the new leader must reach every source member")
	require.NotContains(t, strings.Join(p.Warnings, " "), "no snapshot", "the snapshot is the plan's own")
	require.Equal(t, 1, strings.Count(strings.Join(summary(p), " "), "SnapshotSource"), "one snapshot")

	for p.Steps[0].Why != plan.WhySourceLast {
		stuck, err := w.apply(p.Steps[0], c)
		require.NoError(t, err)
		require.False(t, stuck, "%v", p.Steps[0])
		p = Plan(c, w.observe())
	}
	_, err := w.apply(p.Steps[0], c)
	require.NoError(t, err)
	p = Plan(c, w.observe())
	require.Equal(t, []string{"Acknowledge "}, summary(p))
	require.Equal(t, plan.WhySourceStopped, p.Steps[0].Why)
	require.Contains(t, p.Steps[0].Reason, "src-0, src-1, src-2")
	_, err = w.apply(p.Steps[0], c)
	require.NoError(t, err)
	require.Empty(t, summary(Plan(c, w.observe())), "acknowledged: the adoption is done")
}

// Leadership moves to a member of the cluster's own only once raft messages pass between
// it and every source member, as their metrics show.
func TestAdoptionHandsOverOnlyToAConnectedMember(t *testing.T) {
	c := adoption(3)
	w := adoptedWorld(c, 3)
	p := Plan(c, w.observe())
	for p.Steps[0].Action != plan.TransferLeadership {
		_, err := w.apply(p.Steps[0], c)
		require.NoError(t, err)
		p = Plan(c, w.observe())
	}
	o := w.observe()
	ok, why := Check(c, p.Steps[0], o)
	require.True(t, ok, why)

	src1, demo0 := w.members["src-1"].id, w.members["demo-0"].id
	o.Join.Peers[src1] = slices.DeleteFunc(slices.Clone(o.Join.Peers[src1]), func(id string) bool { return id == demo0 })
	ok, why = Check(c, p.Steps[0], o)
	require.False(t, ok)
	require.Contains(t, why, "src-1 does not count demo-0 an active peer")

	delete(o.Join.Peers, src1)
	ok, why = Check(c, p.Steps[0], o)
	require.False(t, ok)
	require.Contains(t, why, "src-1's metrics not read")
}
