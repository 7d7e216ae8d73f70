package planner

import (
	"fmt"

	"github.com/etcdplan/etcdplan/api/plan"
)

// Each rule looks at the model and returns the first step its concern needs, if any.

func step(a plan.Action, mm *member, pre plan.PreconditionKind, reason string, args ...any) plan.Step {
	s := plan.Step{Action: a, Member: mm.name, Reason: fmt.Sprintf(reason, args...),
		Precondition: plan.Precondition{Kind: pre}}
	if pre != plan.PreNone && pre != plan.PreClusterHealthy {
		s.Precondition.Member = mm.name
	}
	return s
}

// bootstrap seeds a cluster that has never formed. A volume left by an earlier seed is
// re-used, so a seed whose Pod was lost before the cluster formed keeps its name.
func bootstrap(m *model, d Desired) (plan.Step, bool) {
	if m.bootstrapped || d.Replicas == 0 {
		return plan.Step{}, false
	}
	var seed *member
	for _, mm := range m.members {
		if mm.inEtcd {
			return plan.Step{}, false // a seed is starting
		}
		if seed == nil && mm.pvc {
			seed = mm
		}
	}
	if seed == nil {
		seed = &member{name: MemberName(m.cluster, m.nextOrdinal), ordinal: m.nextOrdinal}
	}
	s := step(plan.CreateSeed, seed, plan.PreNone, "bootstrap: the cluster starts from one seed member")
	s.Version = d.Version
	return s, true
}

// finishMembershipChange completes (or undoes) a learner join before any other change:
// etcd allows one membership change at a time.
func finishMembershipChange(m *model, d Desired) (plan.Step, bool) {
	for _, mm := range m.learners() {
		voters, _ := m.voters()
		switch {
		case mm.dataLost:
			return step(plan.RemoveMember, mm, plan.PreNone, "learner %s lost its data; it is removed and added anew", mm.name), true
		case voters >= d.Replicas:
			return step(plan.RemoveMember, mm, plan.PreNone, "learner %s is not needed: %d voters reach spec.replicas %d", mm.name, voters, d.Replicas), true
		case !mm.pod:
			s := step(plan.StartMember, mm, plan.PreNone, "learner %s needs its Pod (spec.replicas %d, %d voters)", mm.name, d.Replicas, voters)
			s.Version = d.Version
			return s, true
		default:
			return step(plan.PromoteLearner, mm, plan.PreLearnerCaughtUp, "learner %s becomes a voter (spec.replicas %d, %d voters)", mm.name, d.Replicas, voters), true
		}
	}
	return plan.Step{}, false
}

// replaceLostMember removes a voter whose data is gone; scaleUp then adds a fresh member.
// refuseQuorum has already made sure the others keep quorum without it.
func replaceLostMember(m *model, d Desired) (plan.Step, bool) {
	if !m.reachable {
		return plan.Step{}, false
	}
	for _, mm := range m.members {
		if mm.voter() && m.lost(mm, d) {
			return step(plan.RemoveMember, mm, plan.PreQuorumWithout,
				"member %s lost its data; it is removed so a new member can replace it", mm.name), true
		}
	}
	return plan.Step{}, false
}

// deleteLeftovers deletes the Pods and volumes of members etcd no longer knows. It only
// runs while etcd answers: an unreachable cluster says nothing about its membership.
func deleteLeftovers(m *model, d Desired) (plan.Step, bool) {
	if !m.reachable || !m.bootstrapped {
		return plan.Step{}, false
	}
	for _, mm := range m.members {
		if !mm.inEtcd && ((mm.pod && !mm.podDeleting) || (mm.pvc && !mm.pvcDeleting)) {
			return step(plan.DeleteMember, mm, plan.PreNone, "member %s is not in etcd's membership", mm.name), true
		}
	}
	return plan.Step{}, false
}

// stopMembers parks a cluster at replicas 0: Pods go, volumes and membership stay. The
// leader goes last so the cluster answers for as long as it can.
func stopMembers(m *model, d Desired) (plan.Step, bool) {
	if d.Replicas != 0 {
		return plan.Step{}, false
	}
	for _, mm := range leaderLast(m) {
		if mm.pod && !mm.podDeleting {
			return step(plan.StopMember, mm, plan.PreNone, "spec.replicas is 0: the cluster is parked on its volumes"), true
		}
	}
	return plan.Step{}, false
}

// startMissingPods re-creates the Pod of a member that still has its place in etcd.
func startMissingPods(m *model, d Desired) (plan.Step, bool) {
	if d.Replicas == 0 {
		return plan.Step{}, false
	}
	for _, mm := range m.members {
		if mm.voter() && mm.started && !mm.pod {
			s := step(plan.StartMember, mm, plan.PreNone, "member %s has no Pod", mm.name)
			s.Version = mm.version
			if s.Version == "" {
				s.Version = d.Version
			}
			return s, true
		}
	}
	return plan.Step{}, false
}

// scaleDown removes one voter: a broken one first, else the newest. Leadership moves away
// first when the victim leads.
func scaleDown(m *model, d Desired) (plan.Step, bool) {
	voters, _ := m.voters()
	if d.Replicas == 0 || voters <= d.Replicas {
		return plan.Step{}, false
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
	return step(plan.RemoveMember, victim, plan.PreQuorumWithout,
		"member %s leaves (spec.replicas %d, %d voters)", victim.name, d.Replicas, voters), true
}

// scaleUp adds a learner; finishMembershipChange starts and promotes it.
func scaleUp(m *model, d Desired) (plan.Step, bool) {
	voters, _ := m.voters()
	if voters == 0 || voters >= d.Replicas { // no voter yet: bootstrap seeds first
		return plan.Step{}, false
	}
	mm := &member{name: MemberName(m.cluster, m.nextOrdinal), ordinal: m.nextOrdinal}
	return step(plan.AddLearner, mm, plan.PreClusterHealthy,
		"member %s joins as a learner (spec.replicas %d, %d voters)", mm.name, d.Replicas, voters), true
}

// upgrade moves one member at a time to spec.version: followers first, the leader last
// after leadership has moved to an upgraded member.
func upgrade(m *model, d Desired) (plan.Step, bool) {
	return rollOne(m, func(mm *member) bool { return mm.version != d.Version }, func(mm *member, pre plan.PreconditionKind) plan.Step {
		s := step(plan.UpgradeMember, mm, pre, "spec.version %s -> %s", mm.version, d.Version)
		s.Version = d.Version
		return s
	})
}

// reconfigure re-creates, one at a time, the Pods whose configuration differs from the spec.
func reconfigure(m *model, d Desired) (plan.Step, bool) {
	return rollOne(m, func(mm *member) bool { return mm.configHash != d.ConfigHash }, func(mm *member, pre plan.PreconditionKind) plan.Step {
		s := step(plan.RestartMember, mm, pre, "the Pod of %s differs from the spec", mm.name)
		s.Version = mm.version
		return s
	})
}

// rollOne returns the step for the first voter that needs it. Broken members go first:
// restarting them costs nothing, and the new spec may be what mends them. Healthy ones
// follow while the whole cluster is healthy, the leader last, after leadership moved.
func rollOne(m *model, needs func(*member) bool, do func(*member, plan.PreconditionKind) plan.Step) (plan.Step, bool) {
	for _, mm := range m.members {
		if mm.voter() && mm.pod && !mm.healthy && needs(mm) {
			return do(mm, plan.PreNone), true
		}
	}
	for _, mm := range leaderLast(m) {
		if !mm.voter() || !mm.pod || !needs(mm) {
			continue
		}
		if s, ok := transferFrom(m, mm, "%s leads and is restarted last", mm.name); ok {
			return s, true
		}
		return do(mm, plan.PreClusterHealthy), true
	}
	return plan.Step{}, false
}

// transferFrom moves leadership away from mm when it leads and another voter can take it.
func transferFrom(m *model, mm *member, reason string, args ...any) (plan.Step, bool) {
	if m.leader != mm.name {
		return plan.Step{}, false
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
		return plan.Step{}, false // a single voter has nobody to hand over to
	}
	s := step(plan.TransferLeadership, mm, plan.PreMemberHealthy, reason, args...)
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
