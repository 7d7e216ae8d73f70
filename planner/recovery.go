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
// says so), else the most recent by (raft term, raft index) among those that answer (the
// lowest ordinal on a tie), else the first.
func (m *model) forceTarget(d Desired) *member {
	var best *member
	for _, mm := range m.survivors(d) {
		switch {
		case mm.forcing:
			return mm
		case best == nil, mm.up && (!best.up || newer(mm, best)):
			best = mm
		}
	}
	return best
}

// newer: a's log is more recent than b's by what each reports, (raft term, raft index). The
// index is the commit index a member knows, which a follower learns a heartbeat late: the
// term orders first, as raft's elections do.
func newer(a, b *member) bool {
	return a.raftTerm > b.raftTerm || a.raftTerm == b.raftTerm && a.raftIndex > b.raftIndex
}

// keptBy are the members whose claims a restart of target alone keeps: every other member
// that held data (voters and learners alike) leaves etcd's membership, and the writes only
// it received live on its volume alone.
func (m *model) keptBy(d Desired, target *member) []*member {
	var out []*member
	for _, mm := range m.members {
		if mm != target && mm.pvc && mm.pvcID != "" && !mm.pvcDeleting && !mm.retained && !m.lost(mm, d) {
			out = append(out, mm)
		}
	}
	return out
}

// Retains names the members whose volume claims a ForceNewCluster of member keeps on this
// look (keptBy): the executor marks them retained before the member restarts alone.
func Retains(d Desired, o Observed, member string) []string {
	m := newModel(d, o)
	target := m.get(member)
	if target == nil {
		return nil
	}
	var out []string
	for _, mm := range m.keptBy(d, target) {
		out = append(out, mm.name)
	}
	return out
}

// recoverQuorum brings back a cluster a majority of whose voters lost their data: it can
// never form a quorum on its own. The most recent surviving voter restarts alone with etcd's
// --force-new-cluster, keeping what it committed; etcd drops the other members, whose Pods
// then go (the claims of those that held data are kept, retained: keptBy), and new members
// join as after any lost member. Writes
// the survivor had not received are lost: the executor runs the step only once approved
// (spec.recovery). Survivors whose Pods are gone start first (startVoters), so their raft
// indexes can be compared. When no survivor can restart alone (none kept its data, or it
// lives in memory), the cluster starts anew from its newest backup (restoreBackup).
func recoverQuorum(m *model, d Desired) (plan.Step, bool) {
	if d.Replicas == 0 {
		return plan.Step{}, false
	}
	if seed := m.restoreSeed(); seed != nil {
		return restoreStep(seed, seed.restoring, d), true
	}
	if !m.quorumLost(d) {
		return plan.Step{}, false
	}
	target := m.forceTarget(d)
	if target == nil || d.Memory {
		if m.backup == nil {
			return plan.Step{}, false // refuseQuorum blocks
		}
		return restoreStep(&member{name: MemberName(m.cluster, m.nextOrdinal)}, m.backup, d), true
	}
	lost, all := m.lostVoters(d)
	s := step(plan.ForceNewCluster, target, plan.PreQuorumLost,
		"%d of %d voters lost their data, so the rest can never form a quorum: %s, the surviving voter with the highest raft term and index, "+
			"restarts alone with --force-new-cluster on its data (writes it had not received are lost), and new members join it",
		lost, all, target.name)
	s.Version = target.version
	if s.Version == "" {
		s.Version = d.Version
	}
	return s, true
}

// restoreSeed is the new seed of a recovery from a backup under way: its claim is marked,
// and no cluster has answered since (the mark goes once the new one does).
func (m *model) restoreSeed() *member {
	for _, mm := range m.members {
		if mm.restoring != nil && !mm.inEtcd && !m.reachable {
			return mm
		}
	}
	return nil
}

// restoreStep starts the cluster anew from a backup, on a new seed member. Its reason
// depends on the backup and the seed alone, so it reads the same while the seed starts.
func restoreStep(seed *member, b *Backup, d Desired) plan.Step {
	s := step(plan.RestoreFromBackup, seed, plan.PreAllDataLost,
		"no voter can bring the cluster back (a majority lost its data, and none kept data it can restart on): the cluster starts anew "+
			"from %s as seed %s, under a new cluster ID; writes after that backup are lost, and the old members' Pods and volumes go once it answers",
		b, seed.name)
	s.Backup, s.Version = b.Name, d.Version
	return s
}

// mayRestore checks, on a fresh look, that the cluster may start anew from a backup on a
// new seed: no voter can bring it back, and the backup is the newest of the cluster. A seed
// already chosen (its claim is marked) was chosen on such a look.
func (m *model) mayRestore(d Desired, s plan.Step) (bool, string) {
	mm := m.get(s.Member)
	if mm != nil {
		if mm == m.restoreSeed() && mm.restoring.Name == s.Backup {
			return true, ""
		}
		return false, fmt.Sprintf("%s exists already: a recovery from a backup starts on a new member", s.Member)
	}
	if !m.quorumLost(d) {
		return false, "a quorum of voters holds its data: the cluster can form a quorum without a restore"
	}
	if t := m.forceTarget(d); t != nil && !d.Memory {
		return false, fmt.Sprintf("%s kept its data and can restart alone on it: that loses less than a restore", t.name)
	}
	if m.backup == nil || m.backup.Name != s.Backup {
		return false, fmt.Sprintf("EtcdBackup %s is no longer the newest successful backup of the cluster", s.Backup)
	}
	return true, ""
}

// mayForce checks, on a fresh look, that a member may restart alone: a majority of voters
// lost their data, the member kept its own, and no other survivor is more recent by (raft
// term, raft index) (each must answer to say). A member already chosen (its claim is marked, its Pod may be
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
			return false, fmt.Sprintf("waiting for %s to answer: its raft term and index must be compared with %s's "+
				"(if it can never come back, delete its volume claim, and the recovery goes on without it)", o.name, name)
		case newer(o, mm):
			return false, fmt.Sprintf("%s is more recent (raft term %d, index %d) than %s (term %d, index %d)",
				o.name, o.raftTerm, o.raftIndex, name, mm.raftTerm, mm.raftIndex)
		}
	}
	return true, ""
}
