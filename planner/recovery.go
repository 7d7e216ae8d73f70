package planner

import (
	"fmt"

	"github.com/etcdplan/etcdplan/api/plan"
)

// lostVoters counts the voters and those whose data is gone.
func (m *model) lostVoters(d Desired) (lost, all int) {
	for _, mm := range m.members {
		if mm.voter() {
			all++
			if m.lost(mm, d) {
				lost++
			}
		}
	}
	return lost, all
}

// quorumLost: so many voters lost their data that the rest can never form a quorum again.
func (m *model) quorumLost(d Desired) bool {
	lost, all := m.lostVoters(d)
	return all > 0 && all-lost < quorum(all)
}

// survivors are the voters that hold their data.
func (m *model) survivors(d Desired) []*member {
	var out []*member
	for _, mm := range m.members {
		if mm.voter() && !m.lost(mm, d) {
			out = append(out, mm)
		}
	}
	return out
}

// forceTarget is the survivor a recovery restarts alone: the one already chosen (its claim
// says so), else the one with the highest raft index among those that answer (the
// lowest ordinal on a tie), else the first.
func (m *model) forceTarget(d Desired) *member {
	var best *member
	for _, mm := range m.survivors(d) {
		switch {
		case mm.forcing:
			return mm
		case best == nil, mm.up && (!best.up || mm.raftIndex > best.raftIndex):
			best = mm
		}
	}
	return best
}

// recoverQuorum brings back a cluster a majority of whose voters lost their data: it can
// never form a quorum on its own. The surviving voter with the highest raft index restarts
// alone with etcd's --force-new-cluster, keeping what it committed; etcd drops the other
// members, whose leftovers then go, and new members join as after any lost member. Writes
// the survivor had not received are lost: the executor runs the step only once approved
// (spec.recovery). Survivors whose Pods are gone start first (startVoters), so their raft
// indexes can be compared.
func recoverQuorum(m *model, d Desired) (plan.Step, bool) {
	if d.Replicas == 0 || !m.quorumLost(d) {
		return plan.Step{}, false
	}
	target := m.forceTarget(d)
	if target == nil {
		return plan.Step{}, false // refuseQuorum blocks
	}
	lost, all := m.lostVoters(d)
	s := step(plan.ForceNewCluster, target, plan.PreQuorumLost,
		"%d of %d voters lost their data, so the rest can never form a quorum: %s, the surviving voter with the highest raft index, "+
			"restarts alone with --force-new-cluster on its data (writes it had not received are lost), and new members join it",
		lost, all, target.name)
	s.Version = target.version
	if s.Version == "" {
		s.Version = d.Version
	}
	return s, true
}

// mayForce checks, on a fresh look, that a member may restart alone: a majority of voters
// lost their data, the member kept its own, and no other survivor has a higher raft index
// (each must answer to say). A member already chosen (its claim is marked, its Pod may be
// gone) was chosen on such a look.
func (m *model) mayForce(d Desired, name string) (bool, string) {
	if !m.quorumLost(d) {
		return false, "a quorum of voters holds its data: the cluster can form a quorum without --force-new-cluster"
	}
	mm := m.get(name)
	if mm == nil || !mm.voter() || m.lost(mm, d) {
		return false, fmt.Sprintf("%s is not a voter that holds its data", name)
	}
	if mm.forcing {
		return true, ""
	}
	if !mm.up {
		return false, fmt.Sprintf("waiting for %s to answer, to read its raft index", name)
	}
	for _, o := range m.survivors(d) {
		switch {
		case o == mm:
		case o.forcing:
			return false, fmt.Sprintf("%s was chosen to restart alone already", o.name)
		case !o.up:
			return false, fmt.Sprintf("waiting for %s to answer: its raft index must be compared with %s's "+
				"(if it can never come back, delete its volume claim, and the recovery goes on without it)", o.name, name)
		case o.raftIndex > mm.raftIndex:
			return false, fmt.Sprintf("%s has a higher raft index (%d) than %s (%d)", o.name, o.raftIndex, name, mm.raftIndex)
		}
	}
	return true, ""
}
