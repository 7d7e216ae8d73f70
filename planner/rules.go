package planner

import (
	"fmt"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// Each rule looks at the model and returns the first step its concern needs, if any.

func step(a v1alpha1.Action, mm *member, pre v1alpha1.PreconditionKind, reason string, args ...any) v1alpha1.Step {
	s := v1alpha1.Step{Action: a, Member: mm.name, Reason: fmt.Sprintf(reason, args...),
		Precondition: v1alpha1.Precondition{Kind: pre}}
	if pre != v1alpha1.PreNone && pre != v1alpha1.PreClusterHealthy {
		s.Precondition.Member = mm.name
	}
	return s
}

// bootstrap seeds a cluster that has never formed. A volume left by an earlier seed is
// re-used, so a seed whose Pod was lost before the cluster formed keeps its name.
func bootstrap(m *model, d desiredState) (v1alpha1.Step, bool) {
	if m.bootstrapped || d.replicas == 0 {
		return v1alpha1.Step{}, false
	}
	var seed *member
	for _, mm := range m.members {
		if mm.inEtcd {
			return v1alpha1.Step{}, false // a seed is starting
		}
		if seed == nil && mm.pvc {
			seed = mm
		}
	}
	if seed == nil {
		seed = &member{name: MemberName(m.cluster, m.nextOrdinal), ordinal: m.nextOrdinal}
	}
	s := step(v1alpha1.ActionCreateSeed, seed, v1alpha1.PreNone, "bootstrap: the cluster starts from one seed member")
	s.Version = d.version
	return s, true
}

// finishMembershipChange completes (or undoes) a learner join before any other change:
// etcd allows one membership change at a time.
func finishMembershipChange(m *model, d desiredState) (v1alpha1.Step, bool) {
	for _, mm := range m.learners() {
		voters, _ := m.voters()
		switch {
		case mm.dataLost:
			return step(v1alpha1.ActionRemoveMember, mm, v1alpha1.PreNone, "learner %s lost its data; it is removed and added anew", mm.name), true
		case voters >= d.replicas:
			return step(v1alpha1.ActionRemoveMember, mm, v1alpha1.PreNone, "learner %s is not needed: %d voters reach spec.replicas %d", mm.name, voters, d.replicas), true
		case !mm.pod:
			s := step(v1alpha1.ActionStartMember, mm, v1alpha1.PreNone, "learner %s needs its Pod (spec.replicas %d, %d voters)", mm.name, d.replicas, voters)
			s.Version = d.version
			return s, true
		default:
			return step(v1alpha1.ActionPromoteLearner, mm, v1alpha1.PreLearnerCaughtUp, "learner %s becomes a voter (spec.replicas %d, %d voters)", mm.name, d.replicas, voters), true
		}
	}
	return v1alpha1.Step{}, false
}

// replaceLostMember removes a voter whose data is gone; scaleUp then adds a fresh member.
// refuseQuorum has already made sure the others keep quorum without it.
func replaceLostMember(m *model, d desiredState) (v1alpha1.Step, bool) {
	if !m.reachable {
		return v1alpha1.Step{}, false
	}
	for _, mm := range m.members {
		if mm.voter() && m.lost(mm, d) {
			return step(v1alpha1.ActionRemoveMember, mm, v1alpha1.PreQuorumWithout,
				"member %s lost its data; it is removed so a new member can replace it", mm.name), true
		}
	}
	return v1alpha1.Step{}, false
}

// deleteLeftovers deletes the Pods and volumes of members etcd no longer knows. It only
// runs while etcd answers: an unreachable cluster says nothing about its membership.
func deleteLeftovers(m *model, d desiredState) (v1alpha1.Step, bool) {
	if !m.reachable || !m.bootstrapped {
		return v1alpha1.Step{}, false
	}
	for _, mm := range m.members {
		if !mm.inEtcd && ((mm.pod && !mm.podDeleting) || mm.pvc) {
			return step(v1alpha1.ActionDeleteMember, mm, v1alpha1.PreNone, "member %s is not in etcd's membership", mm.name), true
		}
	}
	return v1alpha1.Step{}, false
}

// stopMembers parks a cluster at replicas 0: Pods go, volumes and membership stay. The
// leader goes last so the cluster answers for as long as it can.
func stopMembers(m *model, d desiredState) (v1alpha1.Step, bool) {
	if d.replicas != 0 {
		return v1alpha1.Step{}, false
	}
	for _, mm := range leaderLast(m) {
		if mm.pod && !mm.podDeleting {
			return step(v1alpha1.ActionStopMember, mm, v1alpha1.PreNone, "spec.replicas is 0: the cluster is parked on its volumes"), true
		}
	}
	return v1alpha1.Step{}, false
}

// startMissingPods re-creates the Pod of a member that still has its place in etcd.
func startMissingPods(m *model, d desiredState) (v1alpha1.Step, bool) {
	if d.replicas == 0 {
		return v1alpha1.Step{}, false
	}
	for _, mm := range m.members {
		if mm.voter() && mm.started && !mm.pod {
			s := step(v1alpha1.ActionStartMember, mm, v1alpha1.PreNone, "member %s has no Pod", mm.name)
			s.Version = mm.version
			if s.Version == "" {
				s.Version = d.version
			}
			return s, true
		}
	}
	return v1alpha1.Step{}, false
}

// scaleDown removes one voter: a broken one first, else the newest. Leadership moves away
// first when the victim leads.
func scaleDown(m *model, d desiredState) (v1alpha1.Step, bool) {
	voters, _ := m.voters()
	if d.replicas == 0 || voters <= d.replicas {
		return v1alpha1.Step{}, false
	}
	var victim, broken *member
	for _, mm := range m.members {
		if mm.voter() {
			victim = mm
			if !mm.healthy {
				broken = mm
			}
		}
	}
	if broken != nil {
		victim = broken
	}
	if s, ok := transferFrom(m, victim, "scale down removes the leader %s", victim.name); ok {
		return s, true
	}
	return step(v1alpha1.ActionRemoveMember, victim, v1alpha1.PreQuorumWithout,
		"spec.replicas %d -> %d: member %s leaves", voters, voters-1, victim.name), true
}

// scaleUp adds a learner; finishMembershipChange starts and promotes it.
func scaleUp(m *model, d desiredState) (v1alpha1.Step, bool) {
	voters, _ := m.voters()
	if !m.bootstrapped || voters >= d.replicas {
		return v1alpha1.Step{}, false
	}
	mm := &member{name: MemberName(m.cluster, m.nextOrdinal), ordinal: m.nextOrdinal}
	return step(v1alpha1.ActionAddLearner, mm, v1alpha1.PreClusterHealthy,
		"spec.replicas %d -> %d: member %s joins as a learner", voters, voters+1, mm.name), true
}

// upgrade moves one member at a time to spec.version: followers first, the leader last
// after leadership has moved to an upgraded member.
func upgrade(m *model, d desiredState) (v1alpha1.Step, bool) {
	return rollOne(m, func(mm *member) bool { return mm.version != d.version }, func(mm *member) v1alpha1.Step {
		s := step(v1alpha1.ActionUpgradeMember, mm, v1alpha1.PreClusterHealthy, "spec.version %s -> %s", mm.version, d.version)
		s.Version = d.version
		return s
	})
}

// reconfigure re-creates, one at a time, the Pods whose configuration differs from the spec.
func reconfigure(m *model, d desiredState) (v1alpha1.Step, bool) {
	return rollOne(m, func(mm *member) bool { return mm.configHash != d.configHash }, func(mm *member) v1alpha1.Step {
		s := step(v1alpha1.ActionRestartMember, mm, v1alpha1.PreClusterHealthy, "the Pod of %s differs from the spec", mm.name)
		s.Version = mm.version
		return s
	})
}

// rollOne returns the step for the first voter that needs it, taking the leader last and
// moving leadership away from it first.
func rollOne(m *model, needs func(*member) bool, do func(*member) v1alpha1.Step) (v1alpha1.Step, bool) {
	for _, mm := range leaderLast(m) {
		if !mm.voter() || !mm.pod || !needs(mm) {
			continue
		}
		if s, ok := transferFrom(m, mm, "%s leads and is restarted last", mm.name); ok {
			return s, true
		}
		return do(mm), true
	}
	return v1alpha1.Step{}, false
}

// transferFrom moves leadership away from mm when it leads and another voter can take it.
func transferFrom(m *model, mm *member, reason string, args ...any) (v1alpha1.Step, bool) {
	if m.leader != mm.name {
		return v1alpha1.Step{}, false
	}
	var target *member
	for _, x := range m.members {
		if x != mm && x.voter() && x.pod && !x.dataLost {
			if target == nil || (x.healthy && !target.healthy) {
				target = x
			}
		}
	}
	if target == nil {
		return v1alpha1.Step{}, false // a single voter has nobody to hand over to
	}
	s := step(v1alpha1.ActionTransferLeadership, mm, v1alpha1.PreMemberHealthy, reason, args...)
	s.Target, s.Precondition.Member = target.name, target.name
	return s, true
}

// leaderLast returns the members in ordinal order with the leader moved to the end.
func leaderLast(m *model) []*member {
	out := make([]*member, 0, len(m.members))
	var leader *member
	for _, mm := range m.members {
		if mm.name == m.leader {
			leader = mm
			continue
		}
		out = append(out, mm)
	}
	if leader != nil {
		out = append(out, leader)
	}
	return out
}
