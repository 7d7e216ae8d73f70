package planner

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/vocab"
)

const name = "demo"

func cluster(replicas int, version string) Desired {
	return Desired{Name: name, Namespace: "default", Generation: 1, Replicas: replicas, Version: version, ConfigHash: "cfg-1"}
}

// running returns a world of n healthy voters on version, led by the first.
func running(c Desired, n int, version string) *world {
	w := &world{cluster: name, clusterID: "c1", members: map[string]*wmember{}}
	for i := 0; i < n; i++ {
		w.nextID++
		m := &wmember{name: vocab.MemberName(name, i), id: strconv.Itoa(w.nextID), inEtcd: true, started: true,
			pod: true, up: true, pvc: true, version: version, hash: c.ConfigHash, listen: final(c), peerTLS: c.PeerTLS}
		w.members[m.name] = m
	}
	if n > 0 {
		w.leader = vocab.MemberName(name, 0)
	}
	return w
}

// summary renders steps as "Action member[>target]" for compact expectations.
func summary(p plan.Plan) []string {
	out := []string{}
	for _, s := range p.Steps {
		x := string(s.Action) + " " + s.Member
		if s.Target != "" {
			x += ">" + s.Target
		}
		out = append(out, x)
	}
	return out
}

// converge applies the plan to the world step by step, re-planning after each step and
// checking that the new plan is the rest of the old one, step for step (the executor
// supersedes a plan whose next step differs from the fresh plan's in any field).
func converge(t *testing.T, c Desired, w *world) { convergeWith(t, c, w, nil) }

// convergedSteps is converge calling after (when not nil) with each step once it is
// applied, and returns the steps applied, each as "Action member".
func convergedSteps(t *testing.T, c Desired, w *world, after func(plan.Step)) []string {
	t.Helper()
	var steps []string
	convergeWith(t, c, w, func(s plan.Step) {
		steps = append(steps, string(s.Action)+" "+s.Member)
		if after != nil {
			after(s)
		}
	})
	return steps
}

// convergeWith is converge calling after (when not nil) with each step once it is applied.
func convergeWith(t *testing.T, c Desired, w *world, after func(plan.Step)) {
	t.Helper()
	p := Plan(c, w.observe())
	for i := 0; len(p.Steps) > 0; i++ {
		require.Less(t, i, 100, "plan does not converge")
		stuck, err := w.apply(p.Steps[0], c)
		require.NoError(t, err)
		if stuck && w.settle() {
			stuck, err = w.apply(p.Steps[0], c)
			require.NoError(t, err)
		}
		require.False(t, stuck, "step %v cannot start", p.Steps[0])
		if after != nil {
			after(p.Steps[0])
		}
		next := Plan(c, w.observe())
		if p.Steps[0].Action == plan.SnapshotSurvivor && SpaceStepsShown(c, p.Steps, w.observe()) == 1 {
			p = next // the plan stopped at a step whose effect shows on its own
			continue
		}
		if n := len(next.Steps); p.Steps[0].Why == plan.WhySourceLast && n > 0 && next.Steps[n-1].Action == plan.Acknowledge {
			next.Steps = next.Steps[:n-1] // status shows the source gone: the acknowledgement comes last
			require.Equal(t, summary(p)[1:], summary(next), "re-planning after %s %s", p.Steps[0].Action, p.Steps[0].Member)
			p = Plan(c, w.observe())
			continue
		}
		require.Equal(t, summary(p)[1:], summary(next), "re-planning after %s %s", p.Steps[0].Action, p.Steps[0].Member)
		for j, s := range next.Steps {
			require.True(t, SameStep(p.Steps[j+1], s), "step %d after %s %s:\nwas %+v\nnow %+v", j+1, p.Steps[0].Action, p.Steps[0].Member, p.Steps[j+1], s)
		}
		p = next
		if len(p.Steps) == 0 && p.Blocked == nil && w.settle() {
			p = Plan(c, w.observe()) // the plan waited for starting members to show what they hold
		}
	}
	require.Nil(t, p.Blocked)
}

func TestPlanScenarios(t *testing.T) {
	tests := []struct {
		name  string
		spec  Desired
		world func(c Desired) *world
		want  []string
	}{
		{"bootstrap 1", cluster(1, "3.6.16"), empty, []string{"CreateSeed demo-0"}},
		{"bootstrap 3", cluster(3, "3.6.16"), empty, []string{
			"CreateSeed demo-0",
			"AddLearner demo-1", "StartMember demo-1", "PromoteLearner demo-1",
			"AddLearner demo-2", "StartMember demo-2", "PromoteLearner demo-2"}},
		{"converged", cluster(3, "3.6.16"), healthy3, []string{}},
		{"a seed that does not answer yet still leads to the rest of the bootstrap", cluster(3, "3.6.16"), func(c Desired) *world {
			w := empty(c)
			w.members["demo-0"] = &wmember{name: "demo-0", id: "1", inEtcd: true, started: true, pod: true, seed: true, pvc: true,
				version: "3.6.16", hash: c.ConfigHash}
			return w // no cluster ID yet: etcd does not answer
		}, []string{"AddLearner demo-1", "StartMember demo-1", "PromoteLearner demo-1",
			"AddLearner demo-2", "StartMember demo-2", "PromoteLearner demo-2"}},

		{"scale 3 to 5", cluster(5, "3.6.16"), healthy3, []string{
			"AddLearner demo-3", "StartMember demo-3", "PromoteLearner demo-3",
			"AddLearner demo-4", "StartMember demo-4", "PromoteLearner demo-4"}},
		{"scale 3 to 1 removes the newest", cluster(1, "3.6.16"), healthy3, []string{
			"RemoveMember demo-2", "DeleteMember demo-2", "RemoveMember demo-1", "DeleteMember demo-1"}},
		{"scale down moves leadership first", cluster(2, "3.6.16"), func(c Desired) *world {
			w := running(c, 3, "3.6.16")
			w.leader = "demo-2"
			return w
		}, []string{"TransferLeadership demo-2>demo-0", "RemoveMember demo-2", "DeleteMember demo-2"}},
		{"scale down removes a broken member first", cluster(2, "3.6.16"), func(c Desired) *world {
			w := running(c, 3, "3.6.16")
			w.leader = "demo-1"
			w.members["demo-0"].up = false
			return w
		}, []string{"RemoveMember demo-0", "DeleteMember demo-0"}},
		{"scale to zero parks, leader last", cluster(0, "3.6.16"), healthy3, []string{
			"StopMember demo-1", "StopMember demo-2", "StopMember demo-0"}},
		{"scale from zero starts the parked members", cluster(3, "3.6.16"), func(c Desired) *world {
			w := running(c, 3, "3.6.16")
			for _, m := range w.members {
				m.pod, m.up = false, false
			}
			return w
		}, []string{"StartMember demo-0", "StartMember demo-1", "StartMember demo-2"}},
		{"a deleted Pod comes back as the same member", cluster(3, "3.6.16"), func(c Desired) *world {
			w := running(c, 3, "3.6.16")
			w.members["demo-1"].pod, w.members["demo-1"].up = false, false
			return w
		}, []string{"StartMember demo-1"}},
		{"a member whose data is gone is replaced", cluster(3, "3.6.16"), func(c Desired) *world {
			w := running(c, 3, "3.6.16")
			w.members["demo-1"].dataLost, w.members["demo-1"].up = true, false
			return w
		}, []string{"RemoveMember demo-1", "DeleteMember demo-1", "AddLearner demo-3", "StartMember demo-3", "PromoteLearner demo-3"}},
		{"upgrade followers first, leader last", cluster(3, "3.6.16"), func(c Desired) *world {
			w := running(c, 3, "3.5.35")
			w.leader = "demo-1"
			return w
		}, []string{"UpgradeMember demo-0", "UpgradeMember demo-2", "TransferLeadership demo-1>demo-0", "UpgradeMember demo-1"}},
		{"patch upgrade of one member", cluster(1, "3.6.16"), func(c Desired) *world {
			return running(c, 1, "3.6.15")
		}, []string{"UpgradeMember demo-0"}},
		{"configuration change restarts one at a time", func() Desired {
			c := cluster(3, "3.6.16")
			c.ConfigHash = "cfg-2"
			return c
		}(), func(c Desired) *world {
			return running(cluster(3, "3.6.16"), 3, "3.6.16")
		}, []string{"RestartMember demo-1", "RestartMember demo-2", "TransferLeadership demo-0>demo-1", "RestartMember demo-0"}},
		{"a learner left by a scale-up is removed when no longer wanted", cluster(3, "3.6.16"), func(c Desired) *world {
			w := running(c, 3, "3.6.16")
			w.members["demo-3"] = &wmember{name: "demo-3", id: "9", inEtcd: true, learner: true}
			return w
		}, []string{"RemoveMember demo-3"}},
		{"a learner join in flight is finished first", cluster(5, "3.6.16"), func(c Desired) *world {
			w := running(c, 3, "3.6.16")
			w.members["demo-3"] = &wmember{name: "demo-3", id: "9", inEtcd: true, learner: true}
			return w
		}, []string{"StartMember demo-3", "PromoteLearner demo-3", "AddLearner demo-4", "StartMember demo-4", "PromoteLearner demo-4"}},
		{"leftovers of a removed member are deleted", cluster(3, "3.6.16"), func(c Desired) *world {
			w := running(c, 3, "3.6.16")
			w.members["demo-3"] = &wmember{name: "demo-3", pod: true, pvc: true, version: "3.6.16"}
			return w
		}, []string{"DeleteMember demo-3"}},
		{"an alarm is not a member down: a NOSPACE cluster rolls one at a time, the leader last", func() Desired {
			c := cluster(3, "3.6.16")
			c.ConfigHash = "cfg-2" // a raised quota
			return c
		}(), func(c Desired) *world {
			w := running(cluster(3, "3.6.16"), 3, "3.6.16")
			w.alarms = []Alarm{{MemberID: "1", Type: "NOSPACE"}, {MemberID: "2", Type: "NOSPACE"}}
			return w
		}, []string{"RestartMember demo-1", "RestartMember demo-2", "TransferLeadership demo-0>demo-1", "RestartMember demo-0",
			"Compact ", "DisarmAlarm demo-0", "DisarmAlarm demo-1"}},
		{"a voter's Pod is started before a learner stuck without one is promoted", cluster(4, "3.6.16"), func(c Desired) *world {
			w := running(c, 3, "3.6.16")
			w.members["demo-2"].pod, w.members["demo-2"].up = false, false
			w.members["demo-3"] = &wmember{name: "demo-3", id: "9", inEtcd: true, learner: true}
			return w
		}, []string{"StartMember demo-2", "StartMember demo-3", "PromoteLearner demo-3"}},
		{"a volume lost while parked is replaced, not started under its old ID", cluster(3, "3.6.16"), func(c Desired) *world {
			w := running(c, 3, "3.6.16")
			for _, m := range w.members {
				m.pod, m.up = false, false
			}
			w.members["demo-2"].pvc = false
			return w
		}, []string{"StartMember demo-0", "StartMember demo-1", "RemoveMember demo-2", "AddLearner demo-3", "StartMember demo-3", "PromoteLearner demo-3"}},
		{"two voters restart behind a temporary third member", func() Desired {
			c := cluster(2, "3.6.16")
			c.ConfigHash = "cfg-2"
			return c
		}(), func(c Desired) *world {
			return running(cluster(2, "3.6.16"), 2, "3.6.16")
		}, []string{"AddLearner demo-2", "StartMember demo-2", "PromoteLearner demo-2",
			"RestartMember demo-1", "TransferLeadership demo-0>demo-1", "RestartMember demo-0",
			"RemoveMember demo-2", "DeleteMember demo-2"}},
		{"a member that is down restarts first, at no cost", func() Desired {
			c := cluster(3, "3.6.16")
			c.ConfigHash = "cfg-2"
			return c
		}(), func(c Desired) *world {
			w := running(cluster(3, "3.6.16"), 3, "3.6.16")
			w.members["demo-2"].up = false
			return w
		}, []string{"RestartMember demo-2", "RestartMember demo-1", "TransferLeadership demo-0>demo-1", "RestartMember demo-0"}},
		{"ordinals only grow", cluster(3, "3.6.16"), func(c Desired) *world {
			w := running(c, 2, "3.6.16")
			return w
		}, []string{"AddLearner demo-2", "StartMember demo-2", "PromoteLearner demo-2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := tt.world(tt.spec)
			p := Plan(tt.spec, w.observe())
			require.Nil(t, p.Blocked)
			if diff := cmp.Diff(tt.want, summary(p)); diff != "" {
				t.Fatalf("plan (-want +got):\n%s", diff)
			}
			for _, s := range p.Steps {
				require.NotEmpty(t, s.Reason, "step %s %s has no reason", s.Action, s.Member)
				require.NotEmpty(t, s.Precondition.Kind)
			}
			converge(t, tt.spec, w)
		})
	}
}

func empty(Desired) *world {
	return &world{cluster: name, members: map[string]*wmember{}}
}

func healthy3(c Desired) *world { return running(c, 3, c.Version) }

func TestPlanRefusals(t *testing.T) {
	tests := []struct {
		name   string
		spec   Desired
		world  func(c Desired) *world
		reason plan.BlockReason
		says   string
	}{
		{"minor downgrade once the cluster version moved", cluster(3, "3.5.35"), func(c Desired) *world { return running(c, 3, "3.6.16") },
			plan.BlockDowngrade, "etcd's cluster version is 3.6: etcd cannot return to 3.5.35"},
		{"minor downgrade of a parked cluster", cluster(3, "3.5.35"), func(c Desired) *world {
			w := running(c, 3, "3.6.16")
			w.observe() // the claims record 3.6.16
			for _, m := range w.members {
				m.pod, m.up = false, false
			}
			return w
		}, plan.BlockDowngrade, "etcd's cluster version is not known"},
		{"skipped minor", cluster(3, "3.6.16"), func(c Desired) *world { return running(c, 3, "3.4.30") },
			plan.BlockSkippedMinor, "a 3.5.x release first"},
		{"skipped minor of a parked cluster", cluster(3, "3.8.0"), func(c Desired) *world {
			w := running(c, 3, "3.6.16")
			w.observe()
			for _, m := range w.members {
				m.pod, m.up = false, false
			}
			return w
		}, plan.BlockSkippedMinor, "member demo-0 ran 3.6.16"},
		{"minor upgrade from an old patch", cluster(3, "3.6.16"), func(c Desired) *world { return running(c, 3, "3.5.20") },
			plan.BlockPatchTooOld, "upgrade to 3.5.32 (or a later 3.5 release) first"},
		{"every voter lost its data", cluster(3, "3.6.16"), func(c Desired) *world {
			w := running(c, 3, "3.6.16")
			for _, m := range w.members {
				m.dataLost, m.up = true, false
			}
			return w
		}, plan.BlockQuorumLost, "3 of 3 voting members lost their data, so the rest cannot form a quorum: no EtcdBackup of this cluster (its artifact records this cluster's ID) succeeded to start anew from"},
		{"quorum lost in memory", func() Desired { c := cluster(3, "3.6.16"); c.Memory = true; return c }(), func(c Desired) *world {
			w := running(c, 3, "3.6.16")
			w.memory = true
			for _, n := range []string{"demo-1", "demo-2"} {
				w.members[n].pod, w.members[n].pvc, w.members[n].up = false, false, false
			}
			return w
		}, plan.BlockSurvivorInMemory, "2 of 3 voting members lost their data, so the rest cannot form a quorum, but demo-0 still runs with its data in memory"},
		{"quorum lost in memory, no member left", func() Desired { c := cluster(3, "3.6.16"); c.Memory = true; return c }(), func(c Desired) *world {
			w := running(c, 3, "3.6.16")
			w.memory = true
			for _, m := range w.members {
				m.pod, m.pvc, m.up = false, false, false
			}
			return w
		}, plan.BlockQuorumLost, "3 of 3 voting members lost their data, so the rest cannot form a quorum: no EtcdBackup of this cluster"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Plan(tt.spec, tt.world(tt.spec).observe())
			require.NotNil(t, p.Blocked)
			require.Empty(t, p.Steps)
			require.Equal(t, tt.reason, p.Blocked.Reason)
			require.Contains(t, p.Blocked.Message, tt.says)
		})
	}
}

// Going back is allowed where etcd allows it: a patch release of the same minor, and a
// minor while etcd's cluster version has not moved (a failed upgrade rolled back).
func TestVersionsGoBackWhereEtcdAllows(t *testing.T) {
	t.Run("patch downgrade", func(t *testing.T) {
		c := cluster(3, "3.6.15")
		p := Plan(c, running(c, 3, "3.6.16").observe())
		require.Nil(t, p.Blocked)
		require.Equal(t, []string{"UpgradeMember demo-1", "UpgradeMember demo-2", "TransferLeadership demo-0>demo-1", "UpgradeMember demo-0"}, summary(p))
	})
	t.Run("a failed upgrade rolled back", func(t *testing.T) {
		c := cluster(3, "3.5.35")
		w := running(c, 3, "3.5.35")
		w.observe()
		failed := w.members["demo-1"] // its new version never answered: the claim still says 3.5.35
		failed.version, failed.up = "3.6.16", false
		p := Plan(c, w.observe())
		require.Nil(t, p.Blocked)
		require.Equal(t, []string{"UpgradeMember demo-1"}, summary(p))
		require.Equal(t, "3.5.35", p.Steps[0].Version)
		require.Contains(t, p.Steps[0].Reason, "demo-1 is down")
	})
	t.Run("members that ran the new minor go back while the cluster version has not moved", func(t *testing.T) {
		c := cluster(3, "3.5.35")
		w := running(c, 3, "3.5.35")
		w.observe()
		for _, n := range []string{"demo-1", "demo-2"} {
			w.members[n].version = "3.6.16"
		}
		w.members["demo-0"].up = false // the cluster version stays 3.5: not all answer
		o := w.observe()
		require.Equal(t, "3.5.0", o.Etcd.ClusterVersion)
		w.members["demo-0"].up = true
		o = w.observe()
		require.Equal(t, "3.5.0", o.Etcd.ClusterVersion, "the lowest minor any member runs")
		p := Plan(c, o)
		require.Nil(t, p.Blocked)
		require.Equal(t, []string{"UpgradeMember demo-1", "UpgradeMember demo-2"}, summary(p))
	})
}

// A rolling restart says which spec fields it is for, when the Pods record them.
func TestRestartSaysWhichFieldsChanged(t *testing.T) {
	c := cluster(3, "3.6.16")
	o := running(c, 3, "3.6.16").observe()
	for i := range o.Members {
		o.Members[i].Pod.ConfigFields = "image=1,options=2,resources=3"
	}
	c.ConfigHash, c.ConfigFields = "cfg-2", "image=1,options=9,resources=8"
	p := Plan(c, o)
	require.Equal(t, []string{"RestartMember demo-1", "RestartMember demo-2", "TransferLeadership demo-0>demo-1", "RestartMember demo-0"}, summary(p))
	for _, s := range p.Steps {
		if s.Action == plan.RestartMember {
			require.Equal(t, "spec.options, spec.resources changed", s.Reason)
		}
	}
	o.Members[1].Pod.ConfigFields = "" // a Pod of an earlier version
	require.Equal(t, "the Pod of demo-1 differs from the spec", Plan(c, o).Steps[0].Reason)
}

func TestPlanIsDeterministicAndSerialisable(t *testing.T) {
	c := cluster(5, "3.6.16")
	o := running(c, 3, "3.6.16").observe()
	a, b := Plan(c, o), Plan(c, o)
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	require.Equal(t, string(ja), string(jb))
	require.Contains(t, string(ja), `"formatVersion":2`)
	require.Contains(t, string(ja), `"why":"ScaleUp"`)
	require.Len(t, a.ID, 12)

	var back plan.Plan
	require.NoError(t, json.Unmarshal(ja, &back))
	require.Equal(t, a, back)

	// Counters that move with every write do not change the plan's ID.
	o.Etcd.Members[0].RaftIndex, o.Etcd.Members[0].DBSize = 9999, 1<<20
	require.Equal(t, a.ID, Plan(c, o).ID)
	// A new generation does.
	c.Generation++
	require.NotEqual(t, a.ID, Plan(c, o).ID)
}

func TestCheckPreconditions(t *testing.T) {
	c := cluster(3, "3.6.16")
	w := running(c, 3, "3.6.16")
	w.members["demo-2"].up = false
	o := w.observe()

	ok, why := Check(c, plan.Step{Action: plan.UpgradeMember, Member: "demo-1",
		Precondition: plan.Precondition{Kind: plan.PreClusterHealthy}}, o)
	require.False(t, ok)
	require.Contains(t, why, "1 of 3 voters up")

	ok, _ = Check(c, plan.Step{Action: plan.RemoveMember, Member: "demo-2",
		Precondition: plan.Precondition{Kind: plan.PreQuorumWithout, Member: "demo-2"}}, o)
	require.True(t, ok, "removing the broken member keeps 2 of 2")

	ok, why = Check(c, plan.Step{Action: plan.RemoveMember, Member: "demo-1",
		Precondition: plan.Precondition{Kind: plan.PreQuorumWithout, Member: "demo-1"}}, o)
	require.False(t, ok, why)

	ok, why = Check(c, plan.Step{Action: plan.RestartMember, Member: "demo-0",
		Precondition: plan.Precondition{Kind: plan.PreNone}}, o)
	require.False(t, ok)
	require.True(t, strings.Contains(why, "leads"), why)
}

func TestMemberNameFromPeerURL(t *testing.T) {
	require.Equal(t, "demo-3", EtcdMember{PeerURLs: []string{"http://demo-3.demo.ns.svc:2380"}}.MemberName())
	require.Equal(t, "x", EtcdMember{Name: "x", PeerURLs: []string{"http://y:2380"}}.MemberName())
	require.Equal(t, 12, vocab.Ordinal("a-b", "a-b-12"))
	require.Equal(t, -1, vocab.Ordinal("a", "a-01"))
	require.Equal(t, -1, vocab.Ordinal("a", "b-1"))
}

// A member that lags (or is cut off) and missed joins serves a stale member list: nothing is
// deleted or removed on it, though it makes the members it missed look like leftovers.
func TestStaleViewDeletesNothing(t *testing.T) {
	c := cluster(5, "3.6.16")
	w := running(c, 5, "3.6.16")
	w.staleBelow = 3 // demo-3 and demo-4 joined after the view's member last heard
	p := Plan(c, w.observe())
	for _, s := range p.Steps {
		require.NotContains(t, []plan.Action{plan.DeleteMember, plan.RemoveMember}, s.Action, "on a stale view: %v", summary(p))
	}
	for _, s := range p.Steps {
		ok, why := Check(c, s, w.observe())
		if s.Action == plan.AddLearner {
			require.False(t, ok, "a membership change waits for a linearizable list")
			require.Contains(t, why, "linearizable")
		}
	}
	w.staleBelow = 0
	require.Empty(t, Plan(c, w.observe()).Steps, "once the list is linearizable, the cluster is whole")
}

func TestMembersTheOperatorDoesNotManageBlock(t *testing.T) {
	for _, tt := range []struct {
		name   string
		add    EtcdMember
		reason plan.BlockReason
		says   string
	}{
		{"another cluster's peer URL", EtcdMember{ID: "f1", Name: "x", PeerURLs: []string{"http://10.89.0.9:2380"}, Answering: true},
			plan.BlockForeignMember, "etcdctl member remove f1"},
		{"a learner added by hand under a member's name", EtcdMember{ID: "f2", PeerURLs: []string{"http://demo-1.demo.default.svc:2380"}, Learner: true},
			plan.BlockDuplicateMember, "both claim the name demo-1"},
		{"a name that is not its peer URL's", EtcdMember{ID: "f3", Name: "demo-7", PeerURLs: []string{"http://demo-3.demo.default.svc:2380"}, Answering: true},
			plan.BlockForeignMember, "not a member of this cluster's form"},
		{"a voter added without --learner that never started", EtcdMember{ID: "f4", PeerURLs: []string{"http://demo-3.demo.default.svc:2380"}},
			plan.BlockForeignMember, "never started"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := cluster(3, "3.6.16")
			w := running(c, 3, "3.6.16")
			w.foreign = []EtcdMember{tt.add}
			o := w.observe()
			p := Plan(c, o)
			require.NotNil(t, p.Blocked, "%v", summary(p))
			require.Equal(t, tt.reason, p.Blocked.Reason)
			require.Contains(t, p.Blocked.Message, tt.says)
			ok, _ := Check(c, plan.Step{Action: plan.RestartMember, Member: "demo-1", MemberID: "2", Precondition: plan.Precondition{Kind: plan.PreNone}}, o)
			require.False(t, ok, "no step runs while the membership cannot be trusted")
		})
	}
}

// A learner the operator added and promoted can be a voter before it publishes its name (a
// restored cluster's log is short: a new learner is in sync at once). Its ID, recorded as
// joined under that name, makes it the operator's member, not a voter added by hand.
func TestPromotedBeforeItPublishedItsName(t *testing.T) {
	c := cluster(4, "3.6.16")
	w := running(c, 4, "3.6.16")
	o := w.observe()
	for i, em := range o.Etcd.Members {
		if em.Name == "demo-3" {
			o.Etcd.Members[i] = EtcdMember{ID: em.ID, PeerURLs: em.PeerURLs}
		}
	}
	p := Plan(c, o)
	require.Nil(t, p.Blocked, "%v", summary(p))

	for i := range o.Members { // a voter of that name whose ID the operator never saw join
		if o.Members[i].Name == "demo-3" {
			o.Members[i].PVC.MemberID = "f9"
		}
	}
	o.Recorded = slices.DeleteFunc(o.Recorded, func(r RecordedMember) bool { return r.Name == "demo-3" })
	p = Plan(c, o)
	require.NotNil(t, p.Blocked)
	require.Contains(t, p.Blocked.Message, "never started")
}

// A claim that records a member ID is deleted only once a linearizable list shows that ID
// gone; a step acts on the member ID it carries, never on a member that took the name.
func TestDestructiveChecks(t *testing.T) {
	c := cluster(3, "3.6.16")
	w := running(c, 3, "3.6.16")
	o := w.observe()
	del := plan.Step{Action: plan.DeleteMember, Member: "demo-2", MemberID: "3", Precondition: plan.Precondition{Kind: plan.PreMemberGone, Member: "demo-2"}}
	ok, why := Check(c, del, o)
	require.False(t, ok)
	require.Contains(t, why, "still in etcd's member list")

	remove := plan.Step{Action: plan.RemoveMember, Member: "demo-2", MemberID: "99", Precondition: plan.Precondition{Kind: plan.PreQuorumWithout, Member: "demo-2"}}
	ok, why = Check(c, remove, o)
	require.False(t, ok)
	require.Contains(t, why, "no longer etcd member 99")

	add := plan.Step{Action: plan.AddLearner, Member: "demo-2", Precondition: plan.Precondition{Kind: plan.PreClusterHealthy}}
	ok, why = Check(c, add, o)
	require.False(t, ok)
	require.Contains(t, why, "is taken")

	o.Etcd.Linearizable = false
	remove.MemberID = "3"
	ok, why = Check(c, remove, o)
	require.False(t, ok)
	require.Contains(t, why, "linearizable")
	require.Contains(t, Plan(c, o).Warnings, "etcd's member list was not read through a quorum: no membership change is planned or found done until it is",
		"a plan made on a stale view says so, so an empty one is not read as converged")
}

// Two voters have no budget: the planner never restarts one of them while both are up.
func TestTwoVotersNeverLoseQuorum(t *testing.T) {
	c := cluster(2, "3.6.16")
	o := running(c, 2, "3.6.16").observe()
	ok, why := Check(c, plan.Step{Action: plan.RestartMember, Member: "demo-1", MemberID: "2", Precondition: plan.Precondition{Kind: plan.PreClusterHealthy}}, o)
	require.False(t, ok)
	require.Contains(t, why, "below quorum")
	require.Contains(t, Plan(c, o).Warnings[0], "even")
}

// A silent member (it accepts connections and answers nothing, as a member publishing itself
// does in etcd 3.6 while it already serves raft) may be up: it is not restarted as a member
// that is down, and taking it down needs the budget of a member that is up.
func TestSilentMemberMayBeUp(t *testing.T) {
	c := cluster(3, "3.6.16")
	o := running(c, 3, "3.6.16").observe()
	o.Etcd.Members[1].Answering, o.Etcd.Members[1].Leader = false, "" // demo-1: down
	o.Etcd.Members[2].Answering, o.Etcd.Members[2].Leader, o.Etcd.Members[2].Silent = false, "", true
	restart := func(member, id string) plan.Step {
		return plan.Step{Action: plan.RestartMember, Member: member, MemberID: id, Precondition: plan.Precondition{Kind: plan.PreNone}}
	}
	ok, why := Check(c, restart("demo-2", "3"), o)
	require.False(t, ok, "demo-0 and a silent demo-2 may be the quorum: restarting demo-2 could cost it")
	require.Contains(t, why, "below quorum")
	ok, _ = Check(c, restart("demo-1", "2"), o)
	require.True(t, ok, "demo-1 is down: restarting it takes nothing more down")

	c.ConfigHash = "cfg-2"
	require.Equal(t, []string{"RestartMember demo-1"}, summary(Plan(c, o))[:1], "the member that is down restarts first, not the silent one")
	o.Etcd.Members[1].Answering, o.Etcd.Members[1].Leader = true, "1"
	p := Plan(c, o)
	require.Equal(t, "RestartMember demo-2", summary(p)[0], "once the others keep quorum without it, the silent member (maybe hung) restarts first")
	require.Contains(t, p.Steps[0].Reason, "does not answer")
	ok, _ = Check(c, p.Steps[0], o)
	require.True(t, ok)

	o.Etcd.LeaderID = "3"
	ok, why = Check(c, restart("demo-2", "3"), o)
	require.False(t, ok, "a silent leader is not restarted before leadership moves")
	require.Contains(t, why, "leads")
	require.NotEqual(t, "RestartMember demo-2", summary(Plan(c, o))[0])
}

// Observed states saved as formatVersion 1 (one "healthy" verdict per member) still plan.
func TestObservedFormatVersion1(t *testing.T) {
	v1 := `{"formatVersion":1,"clusterID":"c1","members":[{"name":"demo-0","pod":{"running":true,"ready":true,"version":"3.6.16","configHash":"cfg-1"},"pvc":{"bound":true,"memberID":"1"}}],
		"etcd":{"clusterID":"c1","leaderID":"1","members":[{"id":"1","name":"demo-0","peerURLs":["http://demo-0.demo.default.svc:2380"],"healthy":true,"version":"3.6.16"}]}}`
	var o Observed
	require.NoError(t, json.Unmarshal([]byte(v1), &o))
	require.NoError(t, o.Upgrade())
	require.Equal(t, ObservedFormatVersion, o.FormatVersion)
	require.True(t, o.Etcd.Members[0].Answering)
	require.Equal(t, "1", o.Etcd.Members[0].Leader)
	require.False(t, o.Etcd.Linearizable, "version 1 never read the member list through a quorum")
	require.NotEmpty(t, o.Stale())
	require.Empty(t, Plan(cluster(1, "3.6.16"), o).Steps)
	o.FormatVersion = 9
	require.ErrorContains(t, o.Upgrade(), "formatVersion 9 is not supported")
}

// A formatVersion 1 file of a NOSPACE cluster calls its members unhealthy, though they
// answered (each reported its version and raft index): they are not down, so nothing
// restarts them "at no cost", and on the unread membership nothing is removed.
func TestObservedFormatVersion1IsReadPessimistically(t *testing.T) {
	c := cluster(3, "3.6.16")
	o := running(c, 3, "3.6.16").observe()
	o.FormatVersion, o.Etcd.Linearizable = 1, true
	for i := range o.Etcd.Members {
		m := &o.Etcd.Members[i]
		m.Answering, m.Leader, m.Healthy, m.RaftIndex = false, "", false, 100
	}
	o.Etcd.Alarms = []Alarm{{MemberID: "1", Type: AlarmNoSpace}}
	require.NoError(t, o.Upgrade())
	for _, m := range o.Etcd.Members {
		require.True(t, m.Answering, "%s reported a raft index: it answered", m.Name)
	}
	c.ConfigHash = "cfg-2"
	c.Replicas = 1
	for _, s := range Plan(c, o).Steps {
		require.False(t, needsLinearizable(s.Action), "no restart, removal or deletion on a version 1 file: %v", s)
	}
}

// On a stale view the plan stops before the first step that needs a linearizable member
// list: repairs that cost nothing still show, membership changes do not.
func TestStaleViewPlansNoMembershipStep(t *testing.T) {
	c := cluster(3, "3.6.16")
	w := running(c, 3, "3.6.16")
	w.members["demo-2"].dataLost = true // would be removed and replaced
	o := w.observe()
	require.Contains(t, summary(Plan(c, o)), "RemoveMember demo-2")
	o.Etcd.Linearizable = false
	require.NotEmpty(t, o.Stale())
	p := Plan(c, o)
	for _, s := range p.Steps {
		require.False(t, needsLinearizable(s.Action), "on a stale view: %v", summary(p))
	}
	require.Contains(t, strings.Join(p.Warnings, "\n"), "not read through a quorum")
}

// A learner whose promotion passed its deadline is removed, and a new member joins.
func TestStalledLearnerIsReplaced(t *testing.T) {
	c := cluster(4, "3.6.16")
	w := running(c, 3, "3.6.16")
	w.members["demo-3"] = &wmember{name: "demo-3", id: "9", inEtcd: true, learner: true, started: true, pod: true, pvc: true, up: true,
		version: "3.6.16", hash: c.ConfigHash}
	o := w.observe()
	require.Equal(t, []string{"PromoteLearner demo-3"}, summary(Plan(c, o)))
	o.StalledLearners = []string{"9"}
	p := Plan(c, o)
	require.Equal(t, []string{"RemoveMember demo-3", "DeleteMember demo-3", "AddLearner demo-4", "StartMember demo-4", "PromoteLearner demo-4"}, summary(p))
	require.Equal(t, "9", p.Steps[0].MemberID)
}

// BenchmarkPlan measures the planner on clusters of 1 to 9 members: bootstrapping from
// nothing (the longest plan) and converged (the plan of every idle reconcile).
func BenchmarkPlan(b *testing.B) {
	for _, n := range []int{1, 3, 5, 7, 9} {
		c := cluster(n, "3.6.16")
		for _, bench := range []struct {
			name string
			o    Observed
		}{
			{"cold", empty(c).observe()},
			{"converged", running(c, n, "3.6.16").observe()},
		} {
			b.Run(fmt.Sprintf("%s-%d", bench.name, n), func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					Plan(c, bench.o)
				}
			})
		}
	}
}

// A cluster restored from a snapshot says so in its seed's step; spec.bootstrap.restore set
// on a cluster that formed without it plans nothing and warns that it is ignored.
func TestRestoreSeedsOnlyANewCluster(t *testing.T) {
	c := cluster(3, "3.6.16")
	c.Restore = "EtcdBackup nightly"
	p := Plan(c, Observed{FormatVersion: ObservedFormatVersion})
	require.Equal(t, plan.CreateSeed, p.Steps[0].Action)
	require.Equal(t, "bootstrap: the cluster starts from one seed member restored from EtcdBackup nightly", p.Steps[0].Reason)
	require.Empty(t, p.Warnings)

	o := healthy3(c).observe()
	p = Plan(c, o)
	require.Empty(t, p.Steps)
	require.Contains(t, p.Warnings, "spec.bootstrap.restore is ignored: the cluster formed without it, and a restore seeds only a new cluster")
	o.RestoredFrom = "s3://backups/x.db"
	require.Empty(t, Plan(c, o).Warnings, "a cluster that was restored is not warned about")
}

// spec.bootstrap.restore on a new EtcdCluster whose name finds volumes retained from an
// earlier cluster blocks: neither the restore nor the old data is chosen for the user.
func TestRestoreOverRetainedVolumesBlocks(t *testing.T) {
	c := cluster(3, "3.6.16")
	o := healthy3(c).observe()
	o.ClusterID, o.Etcd, o.Recorded = "", nil, nil // the EtcdCluster was deleted and created again
	for i := range o.Members {
		o.Members[i].Pod = nil
	}
	require.Equal(t, "StartMember demo-0", summary(Plan(c, o))[0], "without a restore the retained volumes start as they were")
	c.Restore = "EtcdBackup nightly"
	p := Plan(c, o)
	require.NotNil(t, p.Blocked)
	require.Equal(t, plan.BlockRestoreOnRetained, p.Blocked.Reason)
	for _, want := range []string{"demo-0 (member 1)", "demo-1 (member 2)", "demo-2 (member 3)", "delete those claims", "remove spec.bootstrap.restore"} {
		require.Contains(t, p.Blocked.Message, want)
	}
	ok, _ := Check(c, plan.Step{Action: plan.StartMember, Member: "demo-0", MemberID: "1", Precondition: plan.Precondition{Kind: plan.PreNone}}, o)
	require.False(t, ok, "a step recorded before the block does not run either")

	o.Members = append(o.Members[:0], Member{Name: "demo-0", PVC: &PVC{Bound: true}}) // a claim that never joined
	require.Equal(t, plan.CreateSeed, Plan(c, o).Steps[0].Action)
	o.Members = []Member{{Name: "demo-0", Pod: &Pod{Seed: true, Running: true}, PVC: &PVC{Bound: true, MemberID: "1"}}}
	require.Nil(t, Plan(c, o).Blocked, "the cluster's own restored seed joined before status recorded it")
}

// oneSurvivorOfThree: demo-1's volume was wiped and demo-2's Pod and volume are gone; demo-0
// alone kept its data.
func oneSurvivorOfThree(c Desired) *world {
	w := running(c, 3, "3.6.16")
	w.members["demo-1"].dataLost, w.members["demo-1"].up = true, false
	w.members["demo-2"].pod, w.members["demo-2"].pvc, w.members["demo-2"].up = false, false, false
	w.elect()
	return w
}

// A majority of voters lost their data: the survivor with the longest log restarts alone,
// the others' leftovers go, and new members join it.
func TestQuorumLossRecoversFromTheSurvivor(t *testing.T) {
	t.Run("one survivor of three", func(t *testing.T) {
		c := cluster(3, "3.6.16")
		w := oneSurvivorOfThree(c)
		p := Plan(c, w.observe())
		require.Nil(t, p.Blocked)
		require.Equal(t, []string{"ForceNewCluster demo-0", "DeleteMember demo-1", "AddLearner demo-3", "StartMember demo-3", "PromoteLearner demo-3",
			"AddLearner demo-4", "StartMember demo-4", "PromoteLearner demo-4"}, summary(p))
		require.Equal(t, plan.Step{Action: plan.ForceNewCluster, Member: "demo-0", MemberID: "1", Version: "3.6.16",
			Precondition: plan.Precondition{Kind: plan.PreQuorumLost, Member: "demo-0"}, Why: plan.WhySurvivorRestartsAlone,
			Reason: "2 of 3 voters lost their data, so the rest can never form a quorum: demo-0, the surviving voter with the highest raft term and index, " +
				"restarts alone with --force-new-cluster on its data (writes it had not received are lost), and new members join it"}, p.Steps[0])
		converge(t, c, w)
	})
	t.Run("the longest log of two survivors of five", func(t *testing.T) {
		c := cluster(5, "3.6.16")
		w := running(c, 5, "3.6.16")
		w.members["demo-3"].index = 7
		for _, n := range []string{"demo-0", "demo-1", "demo-4"} {
			w.members[n].dataLost, w.members[n].up = true, false
		}
		w.elect()
		o := w.observe()
		p := Plan(c, o)
		require.Equal(t, "ForceNewCluster demo-3", summary(p)[0])
		ok, why := Check(c, plan.Step{Action: plan.ForceNewCluster, Member: "demo-2", MemberID: "3",
			Precondition: plan.Precondition{Kind: plan.PreQuorumLost, Member: "demo-2"}}, o)
		require.False(t, ok)
		require.Equal(t, "demo-3 is more recent (raft term 2, index 107) than demo-2 (term 2, index 100)", why)
		w.members["demo-2"].up = false // the other survivor no longer answers
		ok, why = Check(c, p.Steps[0], w.observe())
		require.False(t, ok)
		require.Contains(t, why, "waiting for demo-2 to answer: its raft term and index must be compared with demo-3's")
		w.members["demo-2"].up = true
		converge(t, c, w)
	})
	t.Run("survivors of different terms: the later term wins, the other's claim is kept", func(t *testing.T) {
		c := cluster(5, "3.6.16")
		w := running(c, 5, "3.6.16")
		w.members["demo-3"].index = 7 // a longer commit index, of an earlier term
		w.members["demo-2"].term = 1
		for _, n := range []string{"demo-0", "demo-1", "demo-4"} {
			w.members[n].dataLost, w.members[n].up = true, false
		}
		w.elect()
		o := w.observe()
		p := Plan(c, o)
		require.Equal(t, []string{"ForceNewCluster demo-2", "DeleteMember demo-0", "DeleteMember demo-1", "DeleteMember demo-3", "DeleteMember demo-4"}, summary(p)[:5])
		require.Contains(t, p.Steps[3].Reason, "its volume claim is kept (retained)")
		require.Equal(t, []string{"demo-3"}, Retains(c, o, "demo-2"))
		rv := ReviewPlan(c, o, p)
		require.Contains(t, rv.Steps[0].Loses, "the volume claims of demo-3 (member 4), which held data too, are kept (retained)")
		require.Contains(t, rv.Steps[3].Loses, "deletes the Pod of demo-3")
		require.NotContains(t, rv.Steps[3].Loses, "volume of")
		ok, why := Check(c, plan.Step{Action: plan.ForceNewCluster, Member: "demo-3", MemberID: "4",
			Precondition: plan.Precondition{Kind: plan.PreQuorumLost, Member: "demo-3"}}, o)
		require.False(t, ok)
		require.Equal(t, "demo-2 is more recent (raft term 3, index 100) than demo-3 (term 2, index 107)", why)
		converge(t, c, w)
		require.True(t, w.members["demo-3"].retained && w.members["demo-3"].pvc && !w.members["demo-3"].pod, "the claim stays, the Pod went")
		o = w.observe()
		require.Empty(t, Plan(c, o).Steps, "a retained claim is left alone")
		require.Contains(t, strings.Join(Plan(c, o).Warnings, "\n"), "volume claims demo-3 (member 4) are retained")
	})
	t.Run("a quorum that kept its data is not forced", func(t *testing.T) {
		c := cluster(3, "3.6.16")
		w := running(c, 3, "3.6.16")
		w.members["demo-2"].dataLost, w.members["demo-2"].up = true, false
		o := w.observe()
		require.NotContains(t, summary(Plan(c, o)), "ForceNewCluster demo-0")
		ok, why := Check(c, plan.Step{Action: plan.ForceNewCluster, Member: "demo-0", MemberID: "1",
			Precondition: plan.Precondition{Kind: plan.PreQuorumLost, Member: "demo-0"}}, o)
		require.False(t, ok)
		require.Contains(t, why, "a quorum of voters holds its data")
	})
	t.Run("the chosen member goes on while its Pod is replaced", func(t *testing.T) {
		c := cluster(3, "3.6.16")
		w := running(c, 3, "3.6.16")
		for _, n := range []string{"demo-1", "demo-2"} {
			w.members[n].dataLost, w.members[n].up = true, false
		}
		w.members["demo-0"].pod, w.members["demo-0"].up = false, false // the executor deleted it
		w.elect()
		o := w.observe()
		require.Equal(t, "StartMember demo-0", summary(Plan(c, o))[0], "an unmarked survivor without a Pod starts again first")
		for i := range o.Members {
			if o.Members[i].Name == "demo-0" {
				o.Members[i].PVC.ForceNewCluster = true
			}
		}
		p := Plan(c, o)
		require.Equal(t, "ForceNewCluster demo-0", summary(p)[0])
		ok, why := Check(c, p.Steps[0], o)
		require.True(t, ok, why)
	})
}

// With a destination for its snapshot, the survivor with the longest log is not restarted
// alone: its snapshot is stored, and every member is restored from it at once, which
// spares the joins one at a time. A snapshot that fails falls back to the restart alone.
func TestQuorumLossRestoresTheSurvivorsSnapshot(t *testing.T) {
	withDestination := func(c Desired) *world {
		w := oneSurvivorOfThree(c)
		w.snapshotTo, w.snapshotRev = "s3://backups/etcd/", 50
		w.backup, w.backupOf = &Backup{Name: "nightly", Revision: 42, TakenAt: "2026-11-23T03:00:00Z"}, w.clusterID
		return w
	}
	t.Run("snapshot, stop, restore every member", func(t *testing.T) {
		c := cluster(3, "3.6.16")
		w := withDestination(c)
		o := w.observe()
		p := Plan(c, o)
		require.Nil(t, p.Blocked)
		require.Equal(t, []string{"SnapshotSurvivor demo-0"}, summary(p), "what comes next depends on the snapshot's revision")
		s := p.Steps[0]
		require.Equal(t, plan.Step{Action: plan.SnapshotSurvivor, Member: "demo-0", MemberID: "1", Backup: "demo-0-survivor-1",
			Precondition: plan.Precondition{Kind: plan.PreSurvivorNewest, Member: "demo-0"}, Why: plan.WhySurvivorSnapshot,
			Reason: "2 of 3 voters lost their data, so the rest can never form a quorum: the snapshot of demo-0, the surviving voter with the highest raft term " +
				"and index, is stored as EtcdBackup demo-0-survivor-1 at s3://backups/etcd/ (a snapshot needs no quorum), and the cluster starts anew from it " +
				"on new members restored at once (writes demo-0 had not received are lost); its volume is kept"}, s)
		ok, why := Check(c, s, o)
		require.True(t, ok, why)
		ok, why = Check(c, restoreAt(w.backup, c), o)
		require.False(t, ok, "no restore of an older backup while a survivor runs")
		require.Equal(t, "demo-0 kept its data and can restart alone on it: that loses less than a restore", why)

		steps := convergedSteps(t, c, w, func(s plan.Step) {
			if s.Action == plan.RestoreFromBackup {
				require.Equal(t, "demo-0-survivor-1", s.Backup)
				require.Contains(t, s.Reason, "a majority of voters lost their data, and the snapshot of the most recent survivor holds what it kept: "+
					"the cluster starts anew from EtcdBackup demo-0-survivor-1 (revision 50")
				require.Contains(t, s.Reason, "as 3 new members restored at once (demo-3, demo-4, demo-5)")
			}
		})
		require.Equal(t, []string{"SnapshotSurvivor demo-0", "StopMember demo-0", "RestoreFromBackup demo-3"}, steps[:3])
		require.True(t, w.members["demo-0"].retained, "the survivor's volume is kept")
		for _, n := range []string{"demo-3", "demo-4", "demo-5"} {
			require.True(t, w.members[n].inEtcd && !w.members[n].learner, "%s is a voter of the restored cluster", n)
		}
	})
	t.Run("a survivor not shown the newest is not snapshotted", func(t *testing.T) {
		c := cluster(5, "3.6.16")
		w := running(c, 5, "3.6.16")
		w.snapshotTo = "s3://backups/etcd/"
		w.members["demo-3"].index = 7
		for _, n := range []string{"demo-0", "demo-1", "demo-4"} {
			w.members[n].dataLost, w.members[n].up = true, false
		}
		w.elect()
		o := w.observe()
		require.Equal(t, "SnapshotSurvivor demo-3", summary(Plan(c, o))[0])
		ok, why := Check(c, plan.Step{Action: plan.SnapshotSurvivor, Member: "demo-2", MemberID: "3", Backup: "demo-2-survivor-3",
			Precondition: plan.Precondition{Kind: plan.PreSurvivorNewest, Member: "demo-2"}}, o)
		require.False(t, ok)
		require.Equal(t, "demo-2 is not the survivor a recovery restores, or its snapshot failed or is not current", why)
		snap := Plan(c, o).Steps[0]
		w.members["demo-2"].up, w.members["demo-2"].starting = false, true
		require.Empty(t, Plan(c, w.observe()).Steps)
		ok, why = Check(c, snap, w.observe())
		require.False(t, ok)
		require.Contains(t, why, "waiting for demo-2 to show whether it kept its data")
	})
	t.Run("a failed snapshot falls back to the restart alone", func(t *testing.T) {
		c := cluster(3, "3.6.16")
		w := withDestination(c)
		w.snapshotFails = "the store refused it"
		s := Plan(c, w.observe()).Steps[0]
		require.Equal(t, plan.SnapshotSurvivor, s.Action)
		stuck, err := w.apply(s, c)
		require.NoError(t, err)
		require.False(t, stuck)
		require.Equal(t, "ForceNewCluster demo-0", summary(Plan(c, w.observe()))[0])
		converge(t, c, w)
	})
}

// A voter whose Pod is gone starts before one whose Pod is still going: the step for that
// one waits for its old Pod to go, and the other's Pod need not wait with it. No quorum can
// form as the cluster is now, so the going one's data is checked before all, beside its Pod
// (a Pod made at once, read while the old one stops).
func TestPodsGoneStartBeforePodsGoing(t *testing.T) {
	c := cluster(3, "3.6.16")
	w := running(c, 3, "3.6.16")
	w.members["demo-1"].deleting, w.members["demo-1"].up = true, false
	w.members["demo-2"].pod, w.members["demo-2"].up = false, false
	w.elect()
	require.Equal(t, []string{"CheckData demo-1", "StartMember demo-2", "StartMember demo-1"}, summary(Plan(c, w.observe())))
}

// As soon as no quorum answers, and spec.recovery lets a recovery run on its own, the
// snapshot of the most recent voter that answers is asked for, before the others' Pods
// start to show what they hold: a recovery that then restores from that voter finds it
// stored, as long as the voter committed nothing since. It decides nothing.
func TestQuorumDownSnapshotsTheSurvivorEarly(t *testing.T) {
	twoPodsGone := func(approved bool) (Desired, *world) {
		c := cluster(3, "3.6.16")
		c.RecoveryApproved = approved
		w := running(c, 3, "3.6.16")
		w.snapshotTo, w.snapshotRev = "s3://backups/etcd/", 50
		for _, n := range []string{"demo-1", "demo-2"} {
			w.members[n].pod, w.members[n].up = false, false // wiped or not: their Pods will say
		}
		w.elect()
		return c, w
	}
	early := plan.Step{Action: plan.SnapshotSurvivor, Member: "demo-0", MemberID: "1", Backup: "demo-0-survivor-1",
		Precondition: plan.Precondition{Kind: plan.PreQuorumDown, Member: "demo-0"}, Why: plan.WhySurvivorSnapshotEarly,
		Reason: "no quorum of voters answers: while the others show whether they kept their data, the snapshot of demo-0, the most recent voter " +
			"that answers, is stored as EtcdBackup demo-0-survivor-1 at s3://backups/etcd/ (a snapshot needs no quorum and loses nothing); " +
			"should a recovery restore the cluster from demo-0, it restores this snapshot, taken before anything more could be committed"}
	t.Run("the snapshot is asked for first, and the Pods start meanwhile", func(t *testing.T) {
		c, w := twoPodsGone(true)
		o := w.observe()
		p := Plan(c, o)
		require.Equal(t, []string{"SnapshotSurvivor demo-0", "StartMember demo-1", "StartMember demo-2"}, summary(p))
		require.Equal(t, early, p.Steps[0])
		ok, why := Check(c, p.Steps[0], o)
		require.True(t, ok, why)

		// Asked for, it is done: the Pods start, whatever phase it is in.
		w.snapshots = []MemberSnapshot{{Backup: Backup{Name: "demo-0-survivor-1"}, MemberID: "1", Member: "demo-0", Phase: "Running", RaftTerm: 2, RaftIndex: 100}}
		o = w.observe()
		require.Equal(t, []string{"StartMember demo-1", "StartMember demo-2"}, summary(Plan(c, o)))
		require.Equal(t, 1, SpaceStepsShown(c, []plan.Step{early}, o))
		ok, why = Check(c, early, o)
		require.False(t, ok)
		require.Equal(t, "demo-0 is not the most recent voter that answers while no quorum does, or a recovery chose its survivor, "+
			"or its snapshot was asked for already", why)
	})
	t.Run("only when a recovery may run on its own, to a known destination, without a quorum", func(t *testing.T) {
		c, w := twoPodsGone(false)
		require.Equal(t, []string{"StartMember demo-1", "StartMember demo-2"}, summary(Plan(c, w.observe())), "a recovery needs approval")
		ok, _ := Check(c, early, w.observe())
		require.False(t, ok)

		c, w = twoPodsGone(true)
		w.snapshotTo = ""
		require.Equal(t, []string{"StartMember demo-1", "StartMember demo-2"}, summary(Plan(c, w.observe())), "nowhere to store it")

		c, w = twoPodsGone(true)
		w.members["demo-1"].pod, w.members["demo-1"].up = true, true
		w.elect()
		require.Equal(t, []string{"StartMember demo-2"}, summary(Plan(c, w.observe())), "a quorum answers")
	})
	t.Run("the recovery restores it when the others lost their data", func(t *testing.T) {
		c, w := twoPodsGone(true)
		for _, s := range Plan(c, w.observe()).Steps {
			stuck, err := w.apply(s, c)
			require.NoError(t, err)
			require.False(t, stuck)
		}
		for _, n := range []string{"demo-1", "demo-2"} {
			w.members[n].dataLost, w.members[n].up = true, false // their Pods' preflight checks found no data
		}
		steps := convergedSteps(t, c, w, func(s plan.Step) {
			if s.Action == plan.RestoreFromBackup {
				require.Equal(t, "demo-0-survivor-1", s.Backup)
			}
		})
		require.Equal(t, []string{"SnapshotSurvivor demo-0", "StopMember demo-0", "RestoreFromBackup demo-3"}, steps[:3],
			"the recovery's SnapshotSurvivor marks the claim, and finds the snapshot stored")
		require.Len(t, w.snapshots, 1)
	})
	lostAfterEarly := func(phase string, term, index uint64) (Desired, *world) {
		c, w := twoPodsGone(true)
		for _, n := range []string{"demo-1", "demo-2"} {
			w.members[n].pod, w.members[n].dataLost = true, true
		}
		w.snapshots = []MemberSnapshot{{Backup: Backup{Name: "demo-0-survivor-1", Revision: 50}, MemberID: "1", Member: "demo-0", Phase: phase,
			RaftTerm: term, RaftIndex: index}}
		return c, w
	}
	t.Run("one still taken is waited for", func(t *testing.T) {
		c, w := lostAfterEarly("Running", 2, 100)
		p := Plan(c, w.observe())
		require.Equal(t, []string{"SnapshotSurvivor demo-0"}, summary(p))
		require.Equal(t, plan.WhySurvivorSnapshot, p.Steps[0].Why)
		require.Equal(t, 0, SpaceStepsShown(c, p.Steps, w.observe()), "not done before the claim is marked")
	})
	t.Run("one the survivor is no longer current with is not restored", func(t *testing.T) {
		c, w := lostAfterEarly(SnapshotSucceeded, 2, 99) // the member committed more since
		o := w.observe()
		require.Equal(t, "ForceNewCluster demo-0", summary(Plan(c, o))[0], "its name is taken: the survivor restarts alone")
		ok, why := Check(c, plan.Step{Action: plan.SnapshotSurvivor, Member: "demo-0", MemberID: "1", Backup: "demo-0-survivor-1",
			Precondition: plan.Precondition{Kind: plan.PreSurvivorNewest, Member: "demo-0"}, Why: plan.WhySurvivorSnapshot}, o)
		require.False(t, ok)
		require.Equal(t, "demo-0 is not the survivor a recovery restores, or its snapshot failed or is not current", why)
		converge(t, c, w)

		c, w = lostAfterEarly(SnapshotSucceeded, 0, 0) // not recorded
		require.Equal(t, "ForceNewCluster demo-0", summary(Plan(c, w.observe()))[0])
	})
}

// When no voter can bring the cluster back, it starts anew from its newest backup on new
// members that each restore it at once; the lost members' leftovers go once it answers.
func TestQuorumLossRestoresTheNewestBackup(t *testing.T) {
	nightly := &Backup{Name: "nightly", Revision: 42, TakenAt: "2026-11-23T03:00:00Z"}
	lostAll := func(c Desired) *world {
		w := running(c, 3, "3.6.16")
		for _, m := range w.members {
			m.dataLost, m.up = true, false
		}
		w.backup, w.backupOf = nightly, w.clusterID
		w.elect()
		return w
	}
	t.Run("every voter lost its data", func(t *testing.T) {
		c := cluster(3, "3.6.16")
		w := lostAll(c)
		p := Plan(c, w.observe())
		require.Nil(t, p.Blocked)
		require.Equal(t, []string{"RestoreFromBackup demo-3", "DeleteMember demo-0", "DeleteMember demo-1", "DeleteMember demo-2"}, summary(p))
		require.Equal(t, plan.Step{Action: plan.RestoreFromBackup, Member: "demo-3", Backup: "nightly", Version: "3.6.16",
			Precondition: plan.Precondition{Kind: plan.PreAllDataLost, Member: "demo-3"}, Why: plan.WhyNoSurvivor,
			Reason: "no voter can bring the cluster back (a majority lost its data, and none kept data it can restart on): the cluster starts anew " +
				"from EtcdBackup nightly (revision 42, taken 2026-11-23T03:00:00Z) as 3 new members restored at once (demo-3, demo-4, demo-5), " +
				"under a new cluster ID; writes after that backup are lost, and the old members' Pods and volumes go once it answers"}, p.Steps[0])
		converge(t, c, w)
	})
	t.Run("a backup of another cluster is never restored", func(t *testing.T) {
		c := cluster(3, "3.6.16")
		w := lostAll(c)
		w.backupOf = "another"
		p := Plan(c, w.observe())
		require.NotNil(t, p.Blocked)
		require.Equal(t, plan.BlockQuorumLost, p.Blocked.Reason)
	})
	t.Run("a survivor loses less than a backup", func(t *testing.T) {
		c := cluster(3, "3.6.16")
		w := lostAll(c)
		w.members["demo-0"].dataLost = false
		w.members["demo-0"].up = true
		o := w.observe()
		require.Equal(t, "ForceNewCluster demo-0", summary(Plan(c, o))[0])
		ok, why := Check(c, restoreAt(nightly, c), o)
		require.False(t, ok)
		require.Equal(t, "demo-0 kept its data and can restart alone on it: that loses less than a restore", why)
	})
	t.Run("members in memory cannot restart alone, and a survivor that runs is never stopped for a restore", func(t *testing.T) {
		c := cluster(3, "3.6.16")
		c.Memory = true
		w := running(c, 3, "3.6.16")
		w.memory = true
		for _, n := range []string{"demo-1", "demo-2"} {
			w.members[n].pod, w.members[n].pvc, w.members[n].up = false, false, false
		}
		w.backup, w.backupOf = nightly, w.clusterID
		o := w.observe()
		p := Plan(c, o)
		require.NotNil(t, p.Blocked)
		require.Equal(t, plan.BlockSurvivorInMemory, p.Blocked.Reason)
		require.Contains(t, p.Blocked.Message, "demo-0 still runs with its data in memory")
		require.Contains(t, p.Blocked.Message, "or delete the Pod of demo-0 to let the operator restore EtcdBackup nightly (revision 42")
		ok, why := Check(c, restoreAt(nightly, c), o)
		require.False(t, ok)
		require.Equal(t, "demo-0 still runs with its data in memory and no snapshot of it succeeded: a restore would lose it", why)

		w.members["demo-0"].pod, w.members["demo-0"].up = false, false // the user chose the backup
		require.Equal(t, "RestoreFromBackup demo-3", summary(Plan(c, w.observe()))[0])
		converge(t, c, w)
	})
	t.Run("the seeds go on while they start", func(t *testing.T) {
		c := cluster(3, "3.6.16")
		w := lostAll(c)
		first := Plan(c, w.observe()).Steps[0]
		// The executor marked the seeds' claims, forgot the old cluster's ID (its backups no
		// longer count) and created the seeds' Pods, which do not answer yet.
		o := w.observe()
		o.ClusterID, o.Etcd, o.Backup = "", nil, nil
		for _, n := range []string{"demo-3", "demo-4", "demo-5"} {
			o.Members = append(o.Members, Member{Name: n, Pod: &Pod{Seed: true}, PVC: &PVC{Bound: true, Restoring: nightly}})
		}
		p := Plan(c, o)
		require.Nil(t, p.Blocked)
		require.Equal(t, first, p.Steps[0])
		require.Equal(t, []string{"demo-3", "demo-4", "demo-5"}, RestoreSeeds(c, o, "demo-3"))
		ok, why := Check(c, p.Steps[0], o)
		require.True(t, ok, why)
		// With nothing left of the old members but the record, or not even that, alike.
		o.Members = o.Members[len(o.Members)-3:]
		require.Equal(t, first, Plan(c, o).Steps[0])
		o.Recorded = nil
		require.Equal(t, first, Plan(c, o).Steps[0])
		// A restore whose marks were cut short goes on with the seeds marked: their Pods
		// are made only once every claim is marked.
		short := o
		short.Members = o.Members[:2]
		require.Equal(t, []string{"demo-3", "demo-4"}, RestoreSeeds(c, short, "demo-3"))
		require.Contains(t, Plan(c, short).Steps[0].Reason, "as 2 new members restored at once (demo-3, demo-4)")
		// In memory, one seed restores, and its Pod carries the mark.
		c.Memory = true
		o.Members = o.Members[:1]
		o.Members[0].PVC, o.Members[0].Pod.Restoring = nil, nightly
		require.Equal(t, []string{"demo-3"}, RestoreSeeds(c, o, "demo-3"))
		require.Contains(t, Plan(c, o).Steps[0].Reason, "as seed demo-3,")
	})
	t.Run("a seed answers alone, the old members still recorded", func(t *testing.T) {
		c := cluster(3, "3.6.16")
		w := lostAll(c)
		first := Plan(c, w.observe()).Steps[0]
		// A seed's etcd answers before its peers do (no quorum read yet), under the new
		// cluster ID, which the executor took as the cluster's first answer. The old
		// members are still in status and their claims still record their IDs: they are
		// the old cluster's members, not voters of this one that lost their data.
		o := w.observe()
		o.ClusterID, o.Backup = "c2", nil
		var members []EtcdMember
		for i, n := range []string{"demo-3", "demo-4", "demo-5"} {
			o.Members = append(o.Members, Member{Name: n, Pod: &Pod{Seed: true, Running: true, Version: "3.6.16", ConfigHash: c.ConfigHash},
				PVC: &PVC{Bound: true, Restoring: nightly}})
			members = append(members, EtcdMember{ID: "d" + n[5:], Name: n, PeerURLs: []string{"http://" + n + ".demo.default.svc:2380"},
				Answering: i == 0, Version: "3.6.16", RaftTerm: 1, RaftIndex: 3})
		}
		o.Etcd = &EtcdView{ClusterID: "c2", Members: members}
		p := Plan(c, o)
		require.Nil(t, p.Blocked)
		require.True(t, SameStep(first, p.Steps[0]), "the restore goes on until a quorum of its seeds answers: %v", p.Steps[0])
		require.Equal(t, []string{"RestoreFromBackup demo-3", "DeleteMember demo-0", "DeleteMember demo-1", "DeleteMember demo-2"}, summary(p),
			"the seeds' Pods come from the restore, and the old members' leftovers go after it")
		ok, why := Check(c, plan.Step{Action: plan.ForceNewCluster, Member: "demo-3", MemberID: "d3",
			Precondition: plan.Precondition{Kind: plan.PreQuorumLost, Member: "demo-3"}}, o)
		require.False(t, ok, "a restored seed is never forced: %s", why)
		ok, why = Check(c, p.Steps[0], o)
		require.True(t, ok, why)
		// A seed's Pod that went is made again by the restore, not started as a member.
		pod := o.Members[len(o.Members)-1].Pod
		o.Members[len(o.Members)-1].Pod = nil
		require.True(t, SameStep(first, Plan(c, o).Steps[0]))
		o.Members[len(o.Members)-1].Pod = pod
		// Once a quorum of them answers, they are the cluster: the old members' leftovers go.
		o.Etcd.Linearizable, o.Etcd.LeaderID, o.Etcd.Members[0].Leader = true, "d3", "d3"
		o.Etcd.Members[1].Answering = true
		require.Equal(t, "DeleteMember demo-0", summary(Plan(c, o))[0])
	})
	t.Run("the old members are known from status alone", func(t *testing.T) {
		c := cluster(3, "3.6.16")
		w := lostAll(c)
		for _, m := range w.members {
			m.pod, m.pvc = false, false
		}
		p := Plan(c, w.observe())
		require.Equal(t, []string{"RestoreFromBackup demo-3"}, summary(p))
		converge(t, c, w)
	})
}

// In memory, a member whose Pod is Terminating but whose etcd runs and answers (its node
// cut off from the API server) is down, not lost: no restore while it serves.
func TestTerminatingMembersInMemoryAreNotLost(t *testing.T) {
	c := cluster(3, "3.6.16")
	c.Memory = true
	w := running(c, 3, "3.6.16")
	w.memory = true
	for _, n := range []string{"demo-1", "demo-2"} {
		w.members[n].pvc, w.members[n].deleting = false, true
	}
	w.members["demo-0"].pvc = false
	w.backup, w.backupOf = &Backup{Name: "nightly", Revision: 42, TakenAt: "2026-11-23T03:00:00Z"}, w.clusterID
	o := w.observe()
	p := Plan(c, o)
	require.Nil(t, p.Blocked)
	require.Empty(t, p.Steps, "nothing to do but wait for the Pods to go or the node to return")
	ok, why := Check(c, restoreAt(w.backup, c), o)
	require.False(t, ok)
	require.Equal(t, "a quorum of voters holds its data: the cluster can form a quorum without a restore", why)

	// Still running, no longer answering (the node is cut off from the operator too): its
	// data is there as long as its Pod is, so nothing is restored while it runs.
	for _, n := range []string{"demo-1", "demo-2"} {
		w.members[n].up = false
	}
	o = w.observe()
	require.Empty(t, Plan(c, o).Steps)
	ok, _ = Check(c, restoreAt(w.backup, c), o)
	require.False(t, ok)

	// Once their Pods are gone, their data is: the survivor that runs blocks the restore.
	w.settle()
	p = Plan(c, w.observe())
	require.NotNil(t, p.Blocked)
	require.Equal(t, plan.BlockSurvivorInMemory, p.Blocked.Reason)
}

// memorySurvivor is a cluster in memory whose demo-1 and demo-2 are gone while demo-0 runs
// alone, with a nightly backup (revision 42) whose destination is known.
func memorySurvivor() (Desired, *world) {
	c := cluster(3, "3.6.16")
	c.Memory = true
	w := running(c, 3, "3.6.16")
	w.memory = true
	for _, m := range w.members {
		m.pvc = false
	}
	for _, n := range []string{"demo-1", "demo-2"} {
		w.members[n].pod, w.members[n].up = false, false
	}
	w.backup, w.backupOf = &Backup{Name: "nightly", Revision: 42, TakenAt: "2026-11-23T03:00:00Z"}, w.clusterID
	w.snapshotTo = "s3://backups/etcd/"
	return c, w
}

// In memory, a member that still runs alone after a majority's Pods went is snapshotted
// first; the recovery then restores whichever of its snapshot and the newest backup holds
// the higher revision, and says which and why.
func TestSurvivorInMemoryIsSnapshottedFirst(t *testing.T) {
	t.Run("the plan is the snapshot, then the restore from it when it is newer", func(t *testing.T) {
		c, w := memorySurvivor()
		w.snapshotRev = 57
		o := w.observe()
		p := Plan(c, o)
		require.Nil(t, p.Blocked)
		require.Equal(t, []string{"SnapshotSurvivor demo-0"}, summary(p), "what comes next depends on the snapshot's revision")
		s := p.Steps[0]
		require.Equal(t, "1", s.MemberID)
		require.Equal(t, "demo-0-survivor-1", s.Backup)
		require.Equal(t, plan.Precondition{Kind: plan.PreSurvivorInMemory, Member: "demo-0"}, s.Precondition)
		require.Contains(t, s.Reason, "demo-0 still runs alone with its data in memory, which may hold writes no backup has: "+
			"its snapshot is stored first, as EtcdBackup demo-0-survivor-1 at s3://backups/etcd/ (a snapshot needs no quorum); "+
			"then the cluster starts anew from whichever of that snapshot and EtcdBackup nightly (revision 42")
		require.True(t, s.Action.Recovers(), "it is approved with the restore")
		ok, why := Check(c, s, o)
		require.True(t, ok, why)
		ok, why = Check(c, restoreAt(w.backup, c), o)
		require.False(t, ok)
		require.Contains(t, why, "demo-0 still runs with its data in memory and no snapshot of it succeeded")

		// While the snapshot is taken, the plan is the same step.
		w.snapshots = []MemberSnapshot{{Backup: Backup{Name: "demo-0-survivor-1"}, MemberID: "1", Member: "demo-0", Phase: "Running"}}
		require.Equal(t, p.Steps, Plan(c, w.observe()).Steps)
		w.snapshots = nil

		steps := convergedSteps(t, c, w, func(s plan.Step) {
			if s.Action == plan.RestoreFromBackup {
				require.Equal(t, "demo-0-survivor-1", s.Backup)
				require.Contains(t, s.Reason, "; demo-0-survivor-1, the snapshot of demo-0 taken while no quorum answered, "+
					"holds a higher revision than the newest backup, EtcdBackup nightly (revision 42")
			}
		})
		require.Equal(t, []string{"SnapshotSurvivor demo-0", "StopMember demo-0", "RestoreFromBackup demo-3"}, steps[:3])
	})
	t.Run("a survivor that had fallen behind loses to the newest backup", func(t *testing.T) {
		c, w := memorySurvivor()
		w.snapshots = []MemberSnapshot{{Backup: Backup{Name: "demo-0-survivor-1", Revision: 40, TakenAt: "2026-11-24T10:00:00Z"},
			MemberID: "1", Member: "demo-0", Phase: SnapshotSucceeded}}
		o := w.observe()
		p := Plan(c, o)
		require.Nil(t, p.Blocked)
		require.Equal(t, []string{"StopMember demo-0", "RestoreFromBackup demo-3"}, summary(p)[:2])
		require.Equal(t, "nightly", p.Steps[1].Backup)
		require.Contains(t, p.Steps[1].Reason, "; nightly holds a revision at least as high as demo-0-survivor-1, the snapshot of demo-0 "+
			"taken while no quorum answered (revision 40): that member had fallen behind")
		ok, why := Check(c, p.Steps[1], o)
		require.False(t, ok)
		require.Equal(t, "waiting for the Pod of demo-0 to stop and go: one cluster alone serves behind the client Service", why)
		converge(t, c, w)
	})
	t.Run("without another backup the snapshot is restored", func(t *testing.T) {
		c, w := memorySurvivor()
		w.backup, w.snapshotRev = nil, 7
		p := Plan(c, w.observe())
		require.Contains(t, p.Steps[0].Reason, "then the cluster starts anew from that snapshot (the cluster has no other backup)")
		convergeWith(t, c, w, func(s plan.Step) {
			if s.Action == plan.RestoreFromBackup {
				require.Equal(t, "demo-0-survivor-1", s.Backup)
				require.Contains(t, s.Reason, "the cluster has no other backup")
			}
		})
	})
	t.Run("the seed goes on with the reason it was chosen for", func(t *testing.T) {
		c, w := memorySurvivor()
		w.snapshots = []MemberSnapshot{{Backup: Backup{Name: "demo-0-survivor-1", Revision: 57, TakenAt: "2026-11-24T10:00:00Z"},
			MemberID: "1", Member: "demo-0", Phase: SnapshotSucceeded}}
		w.members["demo-0"].pod, w.members["demo-0"].up = false, false // stopped
		o := w.observe()
		first := Plan(c, o).Steps[0]
		require.Equal(t, "RestoreFromBackup demo-3", summary(Plan(c, o))[0])
		o.ClusterID, o.Etcd, o.Backup = "", nil, w.backup
		o.Members = append(o.Members, Member{Name: "demo-3", Pod: &Pod{Seed: true, Restoring: &w.snapshots[0].Backup}})
		require.Equal(t, first, Plan(c, o).Steps[0])
	})
	t.Run("a failed snapshot blocks, saying why and what to do", func(t *testing.T) {
		c, w := memorySurvivor()
		w.snapshotFails = "no snapshot stored within 10m0s; last: store unavailable"
		p := Plan(c, w.observe())
		_, err := w.apply(p.Steps[0], c)
		require.NoError(t, err)
		p = Plan(c, w.observe())
		require.NotNil(t, p.Blocked)
		require.Equal(t, plan.BlockSurvivorSnapshotFailed, p.Blocked.Reason)
		require.Contains(t, p.Blocked.Message, "demo-0 still runs with its data in memory, but its snapshot failed "+
			"(EtcdBackup demo-0-survivor-1: no snapshot stored within 10m0s; last: store unavailable)")
		require.Contains(t, p.Blocked.Message, "`kubectl delete etcdbackup demo-0-survivor-1`")
		require.Contains(t, p.Blocked.Message, "or delete the Pod of demo-0 to let the operator restore EtcdBackup nightly (revision 42")
		ok, _ := Check(c, plan.Step{Action: plan.SnapshotSurvivor, Member: "demo-0", MemberID: "1", Backup: "demo-0-survivor-1",
			Precondition: plan.Precondition{Kind: plan.PreSurvivorInMemory, Member: "demo-0"}}, w.observe())
		require.False(t, ok)

		// Deleting the failed backup takes the snapshot again.
		w.snapshots, w.snapshotFails, w.snapshotRev = nil, "", 57
		require.Equal(t, []string{"SnapshotSurvivor demo-0"}, summary(Plan(c, w.observe())))
	})
	t.Run("without a destination the survivor blocks the recovery", func(t *testing.T) {
		c, w := memorySurvivor()
		w.snapshotTo = ""
		p := Plan(c, w.observe())
		require.NotNil(t, p.Blocked)
		require.Equal(t, plan.BlockSurvivorInMemory, p.Blocked.Reason)
		require.Contains(t, p.Blocked.Message, "it knows no backup destination to store a snapshot of it in")
		require.Contains(t, p.Blocked.Message, "Create an EtcdBackupSchedule for the cluster")
	})
	t.Run("a survivor that does not answer is waited for", func(t *testing.T) {
		c, w := memorySurvivor()
		p := Plan(c, w.observe())
		w.members["demo-0"].silent = true
		ok, why := Check(c, p.Steps[0], w.observe())
		require.False(t, ok)
		require.Equal(t, "waiting for demo-0 to answer: its snapshot is read from it", why)
	})
}

// A cluster starts anew from a backup only once every Pod of the old one is gone: a learner
// that was joining when the voters lost their data is stopped first, so one cluster alone
// serves behind the client Service.
func TestRestoreStopsTheOldClusterFirst(t *testing.T) {
	c := cluster(3, "3.6.16")
	w := running(c, 3, "3.6.16")
	for _, m := range w.members {
		m.dataLost, m.up = true, false
	}
	w.members["demo-3"] = &wmember{name: "demo-3", id: "9", inEtcd: true, learner: true, started: true, pod: true, up: true, pvc: true,
		version: "3.6.16", hash: c.ConfigHash}
	w.backup, w.backupOf = &Backup{Name: "nightly", Revision: 42, TakenAt: "2026-11-23T03:00:00Z"}, w.clusterID
	w.elect()
	o := w.observe()
	p := Plan(c, o)
	require.Nil(t, p.Blocked)
	require.Equal(t, []string{"StopMember demo-3", "RestoreFromBackup demo-4"}, summary(p)[:2])
	require.Contains(t, p.Steps[0].Reason, "stops and goes before the cluster starts anew from a backup: one cluster alone serves behind the client Service")
	ok, why := Check(c, p.Steps[1], o)
	require.False(t, ok)
	require.Equal(t, "waiting for the Pod of demo-3 to stop and go: one cluster alone serves behind the client Service", why)
	converge(t, c, w)
}

// A survivor is a member shown to hold its data: no survivor is named, nor a restore
// chosen, while a voter has not shown whether it kept its data (a wiped member whose new
// Pod has not reported may be any), and the plan says whom it waits for.
func TestSurvivorsOnPositiveEvidence(t *testing.T) {
	c := cluster(3, "3.6.16")
	w := running(c, 3, "3.6.16")
	for _, n := range []string{"demo-0", "demo-1"} {
		w.members[n].dataLost, w.members[n].up = true, false
	}
	w.members["demo-2"].up, w.members["demo-2"].starting = false, true // its new Pod's preflight runs
	w.elect()
	o := w.observe()
	p := Plan(c, o)
	require.Nil(t, p.Blocked)
	require.Empty(t, p.Steps, "no survivor is named before demo-2 shows whether it kept its data")
	require.Contains(t, Awaiting(c, o), "the recovery is waiting for demo-2 to show whether it kept its data", "an empty plan is no 'No changes'")
	require.Contains(t, strings.Join(p.Warnings, "\n"), "2 of 3 voters lost their data, so the rest can never form a quorum; no recovery is planned yet: "+
		"waiting for demo-2 to show whether it kept its data (answer, or pass its preflight check)")
	force := plan.Step{Action: plan.ForceNewCluster, Member: "demo-2", MemberID: "3", Precondition: plan.Precondition{Kind: plan.PreQuorumLost, Member: "demo-2"}}
	ok, why := Check(c, force, o)
	require.False(t, ok)
	require.Contains(t, why, "waiting for demo-2 to show whether it kept its data (answer, or pass its preflight check)")
	restore := restoreAt(&Backup{Name: "nightly"}, c)
	o.Backup = &Backup{Name: "nightly"}
	ok, why = Check(c, restore, o)
	require.False(t, ok, "nor is the cluster restored while demo-2 may hold data")
	require.Contains(t, why, "waiting for demo-2 to show whether it kept its data")

	// Its Pod gone: it gets one, and the plan stops there, naming no survivor.
	w.members["demo-2"].pod, w.members["demo-2"].starting = false, false
	p = Plan(c, w.observe())
	require.Equal(t, []string{"StartMember demo-2"}, summary(p))
	require.Equal(t, plan.WhyShowData, p.Steps[0].Why)
	require.Contains(t, p.Steps[0].Reason, "demo-2 runs, to show whether it kept its own")
	require.Zero(t, SpaceStepsShown(c, p.Steps, w.observe()))
	_, err := w.apply(p.Steps[0], c)
	require.NoError(t, err)
	require.Equal(t, 1, SpaceStepsShown(c, p.Steps, w.observe()), "the step is done once its Pod is there")
	require.Empty(t, Plan(c, w.observe()).Steps)

	// Its preflight found its data: it is the survivor.
	w.members["demo-2"].starting, w.members["demo-2"].up = false, true
	p = Plan(c, w.observe())
	require.Equal(t, "ForceNewCluster demo-2", summary(p)[0])
	require.Empty(t, Awaiting(c, w.observe()))
	// Or found none: the cluster starts anew from its backup.
	w.members["demo-2"].dataLost, w.members["demo-2"].up = true, false
	w.backup, w.backupOf = &Backup{Name: "nightly"}, w.clusterID
	require.Equal(t, "RestoreFromBackup demo-3", summary(Plan(c, w.observe()))[0])
}

// Of five voters, three lost their data and two have no Pod: each gets one, and the plan
// stops there; once they show their data, the survivor with the longest log restarts alone.
func TestEveryVoterWithoutEvidenceStartsFirst(t *testing.T) {
	c := cluster(5, "3.6.16")
	w := running(c, 5, "3.6.16")
	for _, n := range []string{"demo-0", "demo-1", "demo-2"} {
		w.members[n].dataLost, w.members[n].up = true, false
	}
	for _, n := range []string{"demo-3", "demo-4"} {
		w.members[n].pod, w.members[n].up = false, false
	}
	w.members["demo-4"].index = 9
	w.elect()
	p := Plan(c, w.observe())
	require.Nil(t, p.Blocked)
	require.Equal(t, []string{"StartMember demo-3", "StartMember demo-4"}, summary(p))
	for _, s := range p.Steps {
		require.Equal(t, plan.WhyShowData, s.Why)
	}
	require.Contains(t, strings.Join(p.Warnings, "\n"), "3 of 5 voters lost their data, so the rest can never form a quorum; no recovery is planned yet: "+
		"waiting for demo-3, demo-4 to show whether it kept its data")
	steps := convergedSteps(t, c, w, nil)
	require.Equal(t, []string{"StartMember demo-3", "StartMember demo-4", "ForceNewCluster demo-4"}, steps[:3])
}

// A survivor chosen on a look where every voter had shown its data (its claim is marked)
// goes on, though a voter's evidence went since (its Pod too): the choice is not made again.
func TestChosenSurvivorGoesOn(t *testing.T) {
	c := cluster(5, "3.6.16")
	w := running(c, 5, "3.6.16")
	for _, n := range []string{"demo-1", "demo-2", "demo-3"} {
		w.members[n].dataLost, w.members[n].up = true, false
	}
	for _, n := range []string{"demo-0", "demo-4"} {
		w.members[n].pod, w.members[n].up = false, false
	}
	w.elect()
	o := w.observe()
	for i := range o.Members {
		if o.Members[i].Name == "demo-0" {
			o.Members[i].PVC.ForceNewCluster = true
		}
	}
	p := Plan(c, o)
	require.Equal(t, []string{"StartMember demo-4", "ForceNewCluster demo-0"}, summary(p)[:2])
	require.Empty(t, Awaiting(c, o))
	ok, why := Check(c, p.Steps[1], o)
	require.True(t, ok, why)
}

// A Pod being deleted may stop at once (no graceful shutdown) only while no quorum
// answers and fewer than a quorum of voters run etcd in Pods that stay: then a leadership
// transfer and requests in flight can only wait out etcd's timeouts.
func TestStopAtOnceOnlyWithoutAQuorum(t *testing.T) {
	c := cluster(3, "3.6.16")
	t.Run("a quorum answers", func(t *testing.T) {
		w := running(c, 3, "3.6.16")
		for _, m := range w.members {
			m.deleting = true // every Pod is going, etcd still serves through its grace period
		}
		require.False(t, StopAtOnce(c, w.observe(), "demo-0"))
	})
	t.Run("the operator reads no quorum, but the others' Pods run", func(t *testing.T) {
		w := running(c, 3, "3.6.16")
		w.members["demo-1"].deleting = true
		o := w.observe()
		o.Etcd.Linearizable = false
		require.False(t, StopAtOnce(c, o, "demo-1"), "two voters stay: the leadership may move to one of them")
	})
	t.Run("the last old Pod of a cluster whose other members went", func(t *testing.T) {
		w := running(c, 3, "3.6.16")
		for _, n := range []string{"demo-1", "demo-2"} {
			w.members[n].pod, w.members[n].up = false, false
		}
		w.members["demo-0"].deleting = true
		o := w.observe()
		require.False(t, o.Etcd.Linearizable)
		require.True(t, StopAtOnce(c, o, "demo-0"))
		o.Etcd = nil // no member answers at all: the voters are those recorded
		require.True(t, StopAtOnce(c, o, "demo-0"))
	})
	t.Run("the survivor of two wiped voters, restarted alone", func(t *testing.T) {
		w := running(c, 3, "3.6.16")
		for _, n := range []string{"demo-1", "demo-2"} {
			w.members[n].dataLost, w.members[n].up = true, false
		}
		w.elect()
		o := w.observe()
		require.True(t, StopAtOnce(c, o, "demo-0"))
		require.Equal(t, "ForceNewCluster demo-0", summary(Plan(c, o))[0])
	})
	t.Run("members in memory", func(t *testing.T) {
		m := c
		m.Memory = true
		w := running(m, 3, "3.6.16")
		for _, n := range []string{"demo-1", "demo-2"} {
			w.members[n].pod, w.members[n].up = false, false
		}
		w.members["demo-0"].deleting = true
		require.False(t, StopAtOnce(m, w.observe(), "demo-0"), "a survivor's data lives in its process alone")
	})
}

// restoreAt is the step that restores b on new members from demo-3 on, as a fresh plan
// of d gives it.
func restoreAt(b *Backup, d Desired) plan.Step {
	m := &model{cluster: d.Name}
	return restoreStep(m, &member{name: "demo-3"}, b, "", d)
}

// While no quorum can form and voters' Pods go, a check Pod beside each reads whether its
// volume still holds its data; what it finds counts once the old Pod is gone, and then the
// recovery need not start a new Pod on the claim to learn it.
func TestCheckDataBesideGoingPods(t *testing.T) {
	c := cluster(3, "3.6.16")
	c.RecoveryApproved = true
	allGoing := func() (*world, Observed) {
		w := running(c, 3, "3.6.16")
		for _, m := range w.members {
			m.deleting = true
		}
		w.backup, w.backupOf = &Backup{Name: "nightly", Revision: 42, TakenAt: "2026-11-23T03:00:00Z"}, w.clusterID
		o := w.observe()
		o.Etcd = nil // the look gave up on members whose Pods go
		return w, o
	}
	checked := func(o *Observed, lost bool, names ...string) {
		for i := range o.Members {
			if slices.Contains(names, o.Members[i].Name) {
				o.Members[i].Check = &DataCheck{DataLost: lost}
			}
		}
	}
	podsGone := func(o *Observed) {
		for i := range o.Members {
			o.Members[i].Pod = nil
			if o.Members[i].Check != nil {
				o.Members[i].Check.PodGone = true
			}
		}
	}
	t.Run("every voter's Pod going: the checks come first", func(t *testing.T) {
		_, o := allGoing()
		p := Plan(c, o)
		require.Equal(t, []string{"CheckData demo-0", "CheckData demo-1", "CheckData demo-2", "StartMember demo-0"}, summary(p)[:4])
		require.Equal(t, plan.WhyCheckData, p.Steps[0].Why)
		ok, why := Check(c, p.Steps[0], o)
		require.True(t, ok, why)
	})
	t.Run("data found gone while the old Pods still go: nothing is lost yet", func(t *testing.T) {
		_, o := allGoing()
		checked(&o, true, "demo-0", "demo-1", "demo-2")
		p := Plan(c, o)
		require.Equal(t, []string{"StartMember demo-0", "StartMember demo-1", "StartMember demo-2"}, summary(p))
		require.Empty(t, p.Warnings)
	})
	t.Run("data found gone and the old Pods gone: the restore, with no Pod started on the claims", func(t *testing.T) {
		_, o := allGoing()
		checked(&o, true, "demo-0", "demo-1", "demo-2")
		podsGone(&o)
		require.Equal(t, "RestoreFromBackup demo-3", summary(Plan(c, o))[0])
	})
	t.Run("data found gone, and new Pods start on the claims: what the check found counts", func(t *testing.T) {
		_, o := allGoing()
		checked(&o, true, "demo-0", "demo-1", "demo-2")
		podsGone(&o)
		for i := range o.Members {
			o.Members[i].Pod = &Pod{} // the new one's preflight check runs
		}
		require.Equal(t, []string{"StopMember demo-0", "StopMember demo-1", "StopMember demo-2", "RestoreFromBackup demo-3"}, summary(Plan(c, o))[:4],
			"the new Pods stop first: one cluster alone serves")
		o.Members[0].Pod.Running = true // it found data after all (a person put it back): it counts, not the check
		require.NotContains(t, summary(Plan(c, o)), "RestoreFromBackup demo-3")
	})
	t.Run("data found gone, and a new Pod that goes: still lost, and not started again", func(t *testing.T) {
		_, o := allGoing()
		checked(&o, true, "demo-0", "demo-1", "demo-2")
		podsGone(&o)
		o.Members[0].Pod = &Pod{Deleting: true} // a new one, stopped for the restore
		p := Plan(c, o)
		require.NotContains(t, strings.Join(summary(p), " "), "StartMember")
		require.Contains(t, summary(p), "RestoreFromBackup demo-3")
	})
	t.Run("one check found data: that voter starts, and the recovery waits for what it shows", func(t *testing.T) {
		_, o := allGoing()
		checked(&o, true, "demo-1", "demo-2")
		checked(&o, false, "demo-0")
		podsGone(&o)
		p := Plan(c, o)
		require.Equal(t, []string{"StartMember demo-0"}, summary(p))
		require.Equal(t, plan.WhyShowData, p.Steps[0].Why)
	})
	t.Run("no check", func(t *testing.T) {
		t.Run("while a quorum answers", func(t *testing.T) {
			w := running(c, 3, "3.6.16")
			w.members["demo-1"].deleting = true
			require.NotContains(t, summary(Plan(c, w.observe())), "CheckData demo-1")
		})
		t.Run("of members in memory", func(t *testing.T) {
			m, w := memorySurvivor()
			w.members["demo-0"].deleting = true
			o := w.observe()
			o.Etcd = nil
			require.NotContains(t, strings.Join(summary(Plan(m, o)), " "), "CheckData")
		})
		t.Run("of a survivor a recovery stops", func(t *testing.T) {
			_, o := allGoing()
			for i := range o.Members {
				o.Members[i].PVC.SurvivorSnapshot = true
			}
			require.NotContains(t, strings.Join(summary(Plan(c, o)), " "), "CheckData")
		})
		t.Run("twice", func(t *testing.T) {
			_, o := allGoing()
			checked(&o, false, "demo-0", "demo-1", "demo-2")
			require.NotContains(t, strings.Join(summary(Plan(c, o)), " "), "CheckData")
		})
	})
	t.Run("the checks go with the rest of the recovery", func(t *testing.T) {
		w, _ := allGoing()
		for _, m := range w.members {
			m.up = false
		}
		w.elect()
		converge(t, c, w)
	})
}
