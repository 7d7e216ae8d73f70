package planner

import (
	"fmt"
	"strings"

	"github.com/etcdplan/etcdplan/api/plan"
)

// Check tells whether a step may start now, given a fresh observation. When it may not,
// the reason says what the step waits for. Beyond the step's own precondition it enforces
// the safety rules every step obeys: membership changes, deletions and restarts act on a
// linearizable member list and on the member ID the step names; the leader moves before it is taken
// down; and no step takes down a voter that is up when the rest would then fall short of
// quorum.
func Check(d Desired, s plan.Step, o Observed) (bool, string) {
	m := newModel(d, o)
	if m.blocked != nil {
		return false, m.blocked.Message
	}
	if s.Action.NeedsLinearizable() && !m.linearizable {
		return false, "waiting for a linearizable member list: a quorum of members must answer before a member is added, removed, " +
			"restarted or deleted (one member's own view may be stale, and says nothing of the members it does not list)"
	}
	target := m.get(s.Member)
	if s.Action == plan.AddLearner && target != nil {
		return false, fmt.Sprintf("the name %s is taken: etcd or Kubernetes has a member by that name", s.Member)
	}
	// DeleteMember and DisarmAlarm act on IDs etcd may no longer list.
	if s.MemberID != "" && s.Action != plan.DeleteMember && s.Action != plan.DisarmAlarm && (target == nil || target.id != s.MemberID) {
		return false, fmt.Sprintf("member %s is no longer etcd member %s", s.Member, s.MemberID)
	}
	if t := m.get(s.Target); s.TargetID != "" && (t == nil || t.id != s.TargetID) {
		return false, fmt.Sprintf("member %s is no longer etcd member %s", s.Target, s.TargetID)
	}
	if s.Action.TakesDown() && target != nil {
		if m.leader == s.Member && m.countVoters() > 1 {
			return false, fmt.Sprintf("%s leads the cluster; leadership must move first", s.Member)
		}
		if ok, why := withinBudget(m, target, s.Action); !ok {
			return false, why
		}
	}
	return precondition(m, d, s)
}

func precondition(m *model, d Desired, s plan.Step) (bool, string) {
	p, memberID := s.Precondition, s.MemberID
	switch p.Kind {
	case plan.PreNone, "":
		return true, ""
	case plan.PreMemberHealthy:
		if mm := m.get(p.Member); mm != nil && mm.inEtcd && mm.healthy() {
			return true, ""
		}
		return false, fmt.Sprintf("waiting for member %s to be healthy", p.Member)
	case plan.PreClusterHealthy:
		all, _, healthy := m.voters()
		if all > 0 && healthy == all && m.leader != "" {
			return true, ""
		}
		return false, fmt.Sprintf("waiting for all voters to be healthy (%d of %d, leader %q)", healthy, all, m.leader)
	case plan.PreQuorumHealthy:
		return quorumHealthy(m)
	case plan.PreLearnerCaughtUp:
		return learnerCaughtUp(m, p.Member)
	case plan.PrePeersConnected:
		if mm := m.get(p.Member); mm == nil || !mm.inEtcd || !mm.healthy() {
			return false, fmt.Sprintf("waiting for member %s to be healthy", p.Member)
		}
		return peersConnected(m, p.Member)
	case plan.PreQuorumWithout:
		all, up, _ := m.voters()
		if mm := m.get(p.Member); mm != nil && mm.voter() {
			all--
			if mm.up {
				up--
			}
		}
		if all > 0 && up >= quorum(all) {
			return true, ""
		}
		return false, fmt.Sprintf("without %s, %d voters up of %d would not keep quorum", p.Member, up, all)
	case plan.PreNotLeader:
		if m.leader != p.Member {
			return true, ""
		}
		return false, fmt.Sprintf("%s leads the cluster", p.Member)
	case plan.PreMemberGone:
		if mm := m.get(p.Member); mm != nil && mm.inEtcd {
			return false, fmt.Sprintf("member %s is still in etcd's member list", p.Member)
		}
		for _, mm := range m.members {
			if memberID != "" && mm.inEtcd && mm.id == memberID {
				return false, fmt.Sprintf("etcd member %s, recorded on the volume of %s, is still in etcd's member list", memberID, p.Member)
			}
		}
		return true, ""
	case plan.PreQuorumLost:
		return m.mayForce(d, p.Member)
	case plan.PreAllDataLost:
		return m.mayRestore(d, s)
	case plan.PreSurvivorInMemory, plan.PreSurvivorNewest:
		return m.maySnapshot(d, s)
	case plan.PreQuorumDown:
		return m.mayEarly(d, s)
	}
	return false, fmt.Sprintf("unknown precondition %q", p.Kind)
}

// quorumHealthy: a learner may join once the member list was read through a quorum, the
// leader answers, and no voter is down or shown to have lost its data: each voter that does
// not answer runs on its data (it is starting, or publishing itself, which etcd 3.6 takes up
// to 7 s over while it already takes part in raft and in the quorum the read went through).
// A learner does not vote, so its join costs no quorum; etcd's strict reconfiguration check
// refuses it until the leader has been connected to enough voters for 5 s, which the
// executor polls as a wait.
func quorumHealthy(m *model) (bool, string) {
	var down []string
	for _, mm := range m.members {
		if mm.voter() && !mm.up && (!mm.running && !mm.silent || mm.podDeleting || mm.dataLost) {
			down = append(down, mm.name)
		}
	}
	switch l := m.get(m.leader); {
	case !m.linearizable:
		return false, "waiting for a member list read through a quorum"
	case l == nil || !l.voter() || !l.healthy():
		return false, fmt.Sprintf("waiting for the leader to answer (leader %q)", m.leader)
	case len(down) > 0:
		return false, fmt.Sprintf("waiting for voters %s to run on their data: no member joins while a voter is down or lost", strings.Join(down, ", "))
	}
	return true, ""
}

// withinBudget: taking down a voter that is up, or may be (silent), may not leave fewer
// voters up than quorum of the cluster that remains. A member that is down can always be
// restarted or removed: that takes nothing more down. A cluster of one voter has no budget:
// its restarts make it unavailable for a moment, which the plan's warning says.
func withinBudget(m *model, target *member, a plan.Action) (bool, string) {
	all, up, _ := m.voters()
	if !target.voter() || !(target.up || target.silent) || all == 1 {
		return true, ""
	}
	after, others := all, up
	if a == plan.RemoveMember {
		after--
	}
	if target.up {
		others--
	}
	if others >= quorum(after) {
		return true, ""
	}
	return false, fmt.Sprintf("taking %s down would leave %d of %d voters up, below quorum %d: waiting for the others to be up",
		target.name, others, after, quorum(after))
}

// learnerCaughtUp lets the promotion be asked once the learner runs and a leader leads.
// Whether its log is close enough is etcd's own rule (within a tenth of the leader's, by
// the leader's record of what it replicated), which etcd applies when asked and which no
// outside look can apply as early: a learner answers only once it caught up and published
// itself. The executor waits while etcd refuses.
func learnerCaughtUp(m *model, name string) (bool, string) {
	mm := m.get(name)
	switch {
	case mm == nil || !mm.learner:
		return false, fmt.Sprintf("%s is not a learner", name)
	case !mm.pod || !mm.running || mm.podDeleting:
		return false, fmt.Sprintf("waiting for the Pod of learner %s to run etcd", name)
	case m.get(m.leader) == nil:
		return false, "waiting for a leader"
	}
	return true, ""
}
