package planner

import (
	"fmt"

	"github.com/etcdplan/etcdplan/api/plan"
)

// Check tells whether a step may start now, given a fresh observation. When it may not,
// the reason says what the step waits for.
func Check(cluster string, s plan.Step, o Observed) (bool, string) {
	m := newModel(cluster, o)
	if takesDown(s.Action) && m.leader == s.Member && countVoters(m) > 1 {
		return false, fmt.Sprintf("%s leads the cluster; leadership must move first", s.Member)
	}
	p := s.Precondition
	switch p.Kind {
	case plan.PreNone, "":
		return true, ""
	case plan.PreMemberHealthy:
		if mm := m.get(p.Member); mm != nil && mm.inEtcd && mm.healthy {
			return true, ""
		}
		return false, fmt.Sprintf("waiting for member %s to be healthy", p.Member)
	case plan.PreClusterHealthy:
		all, healthy := m.voters()
		if all > 0 && healthy == all && m.leader != "" {
			return true, ""
		}
		return false, fmt.Sprintf("waiting for all voters to be healthy (%d of %d, leader %q)", healthy, all, m.leader)
	case plan.PreLearnerCaughtUp:
		return learnerCaughtUp(m, p.Member)
	case plan.PreQuorumWithout:
		all, healthy := m.voters()
		mm := m.get(p.Member)
		if mm != nil && mm.voter() {
			all--
			if mm.healthy {
				healthy--
			}
		}
		if all > 0 && healthy >= quorum(all) {
			return true, ""
		}
		return false, fmt.Sprintf("without %s, %d healthy of %d voters would not keep quorum", p.Member, healthy, all)
	case plan.PreNotLeader:
		if m.leader != p.Member {
			return true, ""
		}
		return false, fmt.Sprintf("%s leads the cluster", p.Member)
	}
	return false, fmt.Sprintf("unknown precondition %q", p.Kind)
}

// learnerCaughtUp follows etcd's own rule for promotion: the learner's log must be within
// a tenth of the leader's.
func learnerCaughtUp(m *model, name string) (bool, string) {
	mm, leader := m.get(name), m.get(m.leader)
	switch {
	case mm == nil || !mm.learner:
		return false, fmt.Sprintf("%s is not a learner", name)
	case !mm.started || !mm.healthy:
		return false, fmt.Sprintf("waiting for learner %s to start", name)
	case leader == nil:
		return false, "waiting for a leader"
	case mm.raftIndex*10 < leader.raftIndex*9:
		return false, fmt.Sprintf("learner %s is catching up (raft index %d of %d)", name, mm.raftIndex, leader.raftIndex)
	}
	return true, ""
}

// takesDown reports whether the action stops or removes its member.
func takesDown(a plan.Action) bool {
	switch a {
	case plan.RemoveMember, plan.UpgradeMember, plan.RestartMember:
		return true
	}
	return false
}

func countVoters(m *model) int {
	all, _ := m.voters()
	return all
}
