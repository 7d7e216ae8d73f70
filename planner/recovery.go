package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/vocab"
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
// A member list read through a quorum shows the old cluster's quorum alive, whatever else
// is seen.
func (m *model) quorumLost(d Desired) bool {
	lost, all := m.lostVoters(d)
	return all > 0 && all-lost < quorum(all) && !m.linearizable
}

// survivors are the voters shown to hold their data (holdsData): only such evidence makes
// a member one a recovery may restart alone, or must compare with the one it restarts.
func (m *model) survivors(d Desired) []*member {
	var out []*member
	for _, mm := range m.members {
		if mm.voter() && !m.lost(mm, d) && mm.holdsData() {
			out = append(out, mm)
		}
	}
	return out
}

// unproven are the voters whose data is neither shown gone nor shown held: a recovery
// waits for each to say (answer, or its preflight check), since any may hold the longest log.
func (m *model) unproven(d Desired) []string {
	var out []string
	for _, mm := range m.members {
		if mm.voter() && !m.lost(mm, d) && !mm.holdsData() {
			out = append(out, mm.name)
		}
	}
	return out
}

// forceTarget is the survivor a recovery restarts alone, or restores from its snapshot: the
// one already chosen (its claim says so, or its snapshot succeeded), else the most recent by
// (raft term, raft index) among those that answer (the lowest ordinal on a tie), else the
// first.
func (m *model) forceTarget(d Desired) *member {
	var best *member
	for _, mm := range m.survivors(d) {
		switch {
		case mm.forcing, mm.copied:
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

// keptBy are the members whose claims a recovery on target keeps (a restart of target alone,
// or a restore on target as a new seed): every other member that held data (voters and
// learners alike) leaves etcd's membership, and the writes only it received live on its
// volume alone. The seeds of a restore under way are the new cluster's, not kept apart.
func (m *model) keptBy(d Desired, target *member) []*member {
	var out []*member
	for _, mm := range m.members {
		if mm != target && mm.pvc && mm.pvcID != "" && !mm.pvcDeleting && !mm.retained && mm.restoring == nil && !m.lost(mm, d) {
			out = append(out, mm)
		}
	}
	return out
}

// Retains names the members whose volume claims a recovery on member (ForceNewCluster, or
// RestoreFromBackup with member as the seed) keeps on this look (keptBy): the executor marks
// them retained before the recovery runs.
func Retains(d Desired, o Observed, member string) []string {
	m := newModel(d, o)
	var out []string
	for _, mm := range m.keptBy(d, m.get(member)) {
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
// lives in memory), the cluster starts anew from a backup (recoverFromBackup).
func recoverQuorum(m *model, d Desired) (plan.Step, bool) {
	if d.Replicas == 0 {
		return plan.Step{}, false
	}
	if seed := m.restoreSeed(); seed != nil {
		_, why := m.restoreSource(seed.restoring.Name)
		return restoreStep(m, seed, seed.restoring, why, d), true
	}
	if !m.quorumLost(d) {
		return plan.Step{}, false
	}
	target := m.forceTarget(d)
	if names := m.awaited(d, target); len(names) > 0 {
		// No survivor is named, nor a restore chosen, before every voter showed whether it
		// holds data: any may hold the longest log. Check refuses both alike.
		m.halt, m.awaiting = true, names
		return plan.Step{}, false
	}
	if target == nil || d.Memory || target.copied {
		return recoverFromBackup(m, d)
	}
	if m.copies(target) {
		return copyStep(m, target, d), true
	}
	lost, all := m.lostVoters(d)
	s := step(plan.ForceNewCluster, target, plan.PreQuorumLost, plan.WhySurvivorRestartsAlone,
		"%d of %d voters lost their data, so the rest can never form a quorum: %s, the surviving voter with the highest raft term and index, "+
			"restarts alone with --force-new-cluster on its data (writes it had not received are lost), and new members join it",
		lost, all, target.name)
	s.Version = target.version
	if s.Version == "" {
		s.Version = d.Version
	}
	return s, true
}

// copies: the recovery restores every member from a snapshot of target, the survivor a
// restart alone would take, rather than restart it alone and join new members to it one at
// a time: a snapshot needs no quorum, and members restored at once serve in seconds where
// each join waits out etcd's publish timeout (docs/design/etcd-publish-wait.md). It holds
// the same writes: a survivor without a quorum commits nothing more. It needs a destination
// for the snapshot; one that failed falls back to the restart alone, as does an early
// snapshot (snapshotEarly) the survivor is no longer current with: its name is taken
// until the executor forgets it, once the member serves in a quorum again.
func (m *model) copies(target *member) bool {
	s := m.snapshotOf(target)
	return m.snapshotTo != "" && !target.forcing && (s == nil || s.Phase != SnapshotFailed && (target.snapshotted || current(target, s)))
}

// current: the snapshot was asked for when the member reported the raft term and index it
// reports now. A member that commits nothing in between (it has no quorum) holds nothing
// the snapshot lacks.
func current(mm *member, s *MemberSnapshot) bool {
	return mm.up && s.RaftIndex != 0 && s.RaftTerm == mm.raftTerm && s.RaftIndex == mm.raftIndex
}

// snapshotEarly stores the snapshot of the most recent voter that answers as soon as no
// quorum answers, when spec.recovery lets a recovery run on its own (earlySurvivor). It
// loses nothing and decides nothing: while the other voters show whether they kept their
// data (their Pods start first, as startVoters would), the snapshot is taken; if they did
// not, the recovery that restores every member from this voter (copyStep) finds it stored.
// The step is done once the EtcdBackup is asked for; it comes before startVoters, which
// goes on meanwhile.
func snapshotEarly(m *model, d Desired) (plan.Step, bool) {
	sv := m.earlySurvivor(d)
	if sv == nil {
		return plan.Step{}, false
	}
	s := step(plan.SnapshotSurvivor, sv, plan.PreQuorumDown, plan.WhySurvivorSnapshotEarly,
		"no quorum of voters answers: while the others show whether they kept their data, the snapshot of %s, the most recent voter that "+
			"answers, is stored as EtcdBackup %s at %s (a snapshot needs no quorum and loses nothing); should a recovery restore the "+
			"cluster from %s, it restores this snapshot, taken before anything more could be committed",
		sv.name, SnapshotName(sv.name, sv.id), m.snapshotTo, sv.name)
	s.Backup = SnapshotName(sv.name, sv.id)
	return s, true
}

// earlySurvivor is the voter snapshotEarly snapshots, if any: a recovery may run on its
// own, members keep their data on volumes, a destination is known, the cluster formed and
// is not restored or adopted under way, no recovery chose its survivor, fewer than a
// quorum of voters answer and the member list was not read through one; the voter answers,
// is the most recent of those that do (raft term, then index), and has no snapshot yet.
func (m *model) earlySurvivor(d Desired) *member {
	if !d.RecoveryApproved || d.Memory || d.Replicas == 0 || !m.bootstrapped || m.linearizable || m.snapshotTo == "" ||
		m.restoreSeed() != nil || m.adopting() {
		return nil
	}
	var best *member
	voters, up := 0, 0
	for _, mm := range m.members {
		switch {
		case mm.forcing || mm.snapshotted:
			return nil
		case !mm.voter():
			continue
		}
		voters++
		if mm.up {
			up++
			if best == nil || newer(mm, best) {
				best = mm
			}
		}
	}
	if best == nil || up >= quorum(voters) || m.snapshotOf(best) != nil {
		return nil
	}
	return best
}

// mayEarly checks, on a fresh look, that an early snapshot of the step's member may be
// asked for (earlySurvivor).
func (m *model) mayEarly(d Desired, s plan.Step) (bool, string) {
	if sv := m.earlySurvivor(d); sv == nil || sv.name != s.Member || sv.id != s.MemberID {
		return false, fmt.Sprintf("%s is not the most recent voter that answers while no quorum does, or a recovery chose its survivor, "+
			"or its snapshot was asked for already", s.Member)
	}
	return true, ""
}

// copyStep stores the snapshot of the survivor on a volume a recovery restores every
// member from (copies). Its reason reads the same while the snapshot is taken.
func copyStep(m *model, sv *member, d Desired) plan.Step {
	lost, all := m.lostVoters(d)
	s := step(plan.SnapshotSurvivor, sv, plan.PreSurvivorNewest, plan.WhySurvivorSnapshot,
		"%d of %d voters lost their data, so the rest can never form a quorum: the snapshot of %s, the surviving voter with the highest raft term "+
			"and index, is stored as EtcdBackup %s at %s (a snapshot needs no quorum), and the cluster starts anew from it on new members "+
			"restored at once (writes %s had not received are lost); its volume is kept",
		lost, all, sv.name, SnapshotName(sv.name, sv.id), m.snapshotTo, sv.name)
	s.Backup = SnapshotName(sv.name, sv.id)
	return s
}

// recoverFromBackup starts the cluster anew from a backup. A survivor that still runs
// alone with its data in memory is snapshotted first (one at a time, and the plan stops
// there: what comes next depends on the snapshot's revision); then the old cluster's Pods
// stop, and a new seed restores whichever of the snapshots and the newest backup holds the
// higher revision. refuseQuorum blocks when there is nothing to restore, or a survivor
// cannot be snapshotted.
func recoverFromBackup(m *model, d Desired) (plan.Step, bool) {
	if sv := m.survivorInMemory(d); sv != nil {
		if m.halt || m.snapshotTo == "" || m.snapshotOf(sv) != nil && m.snapshotOf(sv).Phase == SnapshotFailed {
			return plan.Step{}, false
		}
		return snapshotStep(m, sv, d), true
	}
	b, why := m.restoreSource("")
	if b == nil {
		return plan.Step{}, false
	}
	if old := m.oldPod(); old != nil {
		return step(plan.StopMember, old, plan.PreNone, plan.WhyOldClusterPod,
			"the Pod of %s, of the cluster that lost its quorum, stops and goes before the cluster starts anew from a backup: "+
				"one cluster alone serves behind the client Service", old.name), true
	}
	return restoreStep(m, &member{name: vocab.MemberName(m.cluster, m.nextOrdinal)}, b, why, d), true
}

// snapshotStep stores a snapshot of a survivor in memory as a new EtcdBackup of the
// cluster. Its reason reads the same while the snapshot is taken.
func snapshotStep(m *model, sv *member, d Desired) plan.Step {
	lost, all := m.lostVoters(d)
	then := "that snapshot (the cluster has no other backup)"
	if m.backup != nil {
		then = "whichever of that snapshot and " + m.backup.String() + " holds the higher revision"
	}
	s := step(plan.SnapshotSurvivor, sv, plan.PreSurvivorInMemory, plan.WhySurvivorInMemory,
		"%d of %d voters lost their data, so the rest can never form a quorum, and %s still runs alone with its data in memory, "+
			"which may hold writes no backup has: its snapshot is stored first, as EtcdBackup %s at %s (a snapshot needs no quorum); "+
			"then the cluster starts anew from %s",
		lost, all, sv.name, SnapshotName(sv.name, sv.id), m.snapshotTo, then)
	s.Backup = SnapshotName(sv.name, sv.id)
	return s
}

// SnapshotName names the EtcdBackup a recovery takes of a survivor in memory: one per
// member name and ID, so every later look finds the one it took.
func SnapshotName(member, id string) string { return member + "-survivor-" + id }

// snapshotOf is the EtcdBackup a recovery took of a member, if any.
func (m *model) snapshotOf(mm *member) *MemberSnapshot {
	for i := range m.snapshots {
		if s := &m.snapshots[i]; s.MemberID == mm.id && s.Name == SnapshotName(mm.name, mm.id) {
			return s
		}
	}
	return nil
}

// restoreSource is what a recovery from a backup restores: the newest backup, or the
// survivor's snapshot with the highest revision when it is higher (a tie keeps the backup,
// which a drill may have verified). why says which and why when a snapshot was in the
// running, and only when the source is named (or name is empty).
func (m *model) restoreSource(name string) (*Backup, string) {
	var snap *MemberSnapshot
	for i := range m.snapshots {
		if s := &m.snapshots[i]; s.Phase == SnapshotSucceeded && (snap == nil || s.Revision > snap.Revision) {
			snap = s
		}
	}
	b, why := m.backup, ""
	switch {
	case snap == nil:
	case b == nil:
		b, why = &snap.Backup, fmt.Sprintf("%s is the snapshot of %s, taken while no quorum answered; the cluster has no other backup",
			snap.Name, snap.Member)
	case snap.Revision > b.Revision:
		why = fmt.Sprintf("%s, the snapshot of %s taken while no quorum answered, holds a higher revision than the newest backup, %s",
			snap.Name, snap.Member, b)
		b = &snap.Backup
	default:
		why = fmt.Sprintf("%s holds a revision at least as high as %s, the snapshot of %s taken while no quorum answered (revision %d): "+
			"that member had fallen behind", b.Name, snap.Name, snap.Member, snap.Revision)
	}
	if b != nil && name != "" && b.Name != name {
		return b, ""
	}
	return b, why
}

// oldPod is a member of the old cluster whose Pod has not ended: it may run etcd (a
// learner, a member whose Pod is Terminating), and a cluster starts anew from a backup only
// once every such Pod is gone, so that one cluster alone serves behind the client Service.
// It is asked only before a seed is chosen: every Pod then is the old cluster's.
func (m *model) oldPod() *member {
	for _, mm := range m.members {
		if mm.pod && !mm.dataLost { // a preflight that found no data runs no etcd
			return mm
		}
	}
	return nil
}

// survivorInMemory is a voter that keeps its data in memory and still runs after a
// majority lost theirs, and whose snapshot has not succeeded: its data may be newer than
// any backup, and stopping it for a restore would lose it. The operator snapshots it
// first, or blocks (refuseQuorum says what to do).
func (m *model) survivorInMemory(d Desired) *member {
	if !d.Memory {
		return nil
	}
	for _, mm := range m.survivors(d) {
		if s := m.snapshotOf(mm); s == nil || s.Phase != SnapshotSucceeded {
			return mm
		}
	}
	return nil
}

// restoreSeed is the first new seed of a recovery from a backup under way: its claim is
// marked, and no quorum answers (the marks go once the restored cluster's does). A seed
// that answers alone has peers still to start, whose Pods the restore makes.
func (m *model) restoreSeed() *member {
	if m.linearizable {
		return nil
	}
	for _, mm := range m.members {
		if mm.restoring != nil {
			return mm
		}
	}
	return nil
}

// restoreSeeds are the members a recovery from a backup restores at once, the first one
// first: those marked as its seeds already, else as many new members as spec.replicas.
// All of them restore the one snapshot and start as one cluster, so none joins it later:
// a join waits out etcd's publish timeout and its reconfiguration check
// (docs/design/etcd-publish-wait.md). Members in memory restore one seed, which the others
// join: their marks live on their Pods, which are made one at a time, so a set of seeds
// cut short would be a cluster of peers that never start.
func (m *model) restoreSeeds(d Desired, first string) []string {
	if mm := m.get(first); mm != nil && mm.restoring != nil {
		var out []string
		for _, x := range m.members {
			if x.restoring != nil && x.restoring.Name == mm.restoring.Name && x.ordinal >= mm.ordinal {
				out = append(out, x.name)
			}
		}
		return out
	}
	n, ord := max(d.Replicas, 1), vocab.Ordinal(m.cluster, first)
	if d.Memory {
		n = 1
	}
	out := make([]string, 0, n)
	for i := range n {
		out = append(out, vocab.MemberName(m.cluster, ord+i))
	}
	return out
}

// RestoreSeeds names the members a RestoreFromBackup step whose first seed is first
// restores at once (restoreSeeds).
func RestoreSeeds(d Desired, o Observed, first string) []string {
	return newModel(d, o).restoreSeeds(d, first)
}

// restoreStep starts the cluster anew from a backup, on new seed members (restoreSeeds,
// seed first) that each restore it; why says why that backup when a survivor's snapshot was
// in the running. Its reason depends on the backup and the seeds alone (and the backups of the
// cluster, which do not change while no cluster answers), so it reads the same while the
// seeds start.
func restoreStep(m *model, seed *member, b *Backup, why string, d Desired) plan.Step {
	seeds := m.restoreSeeds(d, seed.name)
	if why != "" {
		why = "; " + why
	}
	on := "seed " + seed.name
	if len(seeds) > 1 {
		on = fmt.Sprintf("%d new members restored at once (%s)", len(seeds), strings.Join(seeds, ", "))
	}
	what := "no voter can bring the cluster back (a majority lost its data, and none kept data it can restart on)"
	if !d.Memory && slices.ContainsFunc(m.snapshots, func(x MemberSnapshot) bool { return x.Name == b.Name }) {
		what = "a majority of voters lost their data, and the snapshot of the most recent survivor holds what it kept"
	}
	s := step(plan.RestoreFromBackup, seed, plan.PreAllDataLost, plan.WhyNoSurvivor,
		"%s: the cluster starts anew from %s as %s, under a new cluster ID; writes after that backup are lost, and the old members' Pods and volumes go once it answers%s",
		what, b, on, why)
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
	if t := m.forceTarget(d); t != nil && !d.Memory && !t.copied {
		return false, fmt.Sprintf("%s kept its data and can restart alone on it: that loses less than a restore", t.name)
	}
	if names := m.unproven(d); len(names) > 0 && !d.Memory {
		return false, unprovenReason(names)
	}
	if t := m.survivorInMemory(d); t != nil {
		return false, fmt.Sprintf("%s still runs with its data in memory and no snapshot of it succeeded: a restore would lose it", t.name)
	}
	if old := m.oldPod(); old != nil {
		return false, fmt.Sprintf("waiting for the Pod of %s to stop and go: one cluster alone serves behind the client Service", old.name)
	}
	if b, _ := m.restoreSource(""); b == nil || b.Name != s.Backup {
		return false, fmt.Sprintf("EtcdBackup %s is no longer the backup of the cluster with the highest revision (the newest backup, "+
			"or the snapshot of a member that ran alone in memory)", s.Backup)
	}
	return true, ""
}

// maySnapshot checks, on a fresh look, that a survivor in memory may be snapshotted: a
// majority of voters lost their data, the member is one that runs alone with its data in
// memory and answers, no snapshot of it failed, and a destination is known.
func (m *model) maySnapshot(d Desired, s plan.Step) (bool, string) {
	if !m.quorumLost(d) {
		return false, "a quorum of voters holds its data: the cluster can form a quorum without a recovery"
	}
	mm := m.get(s.Member)
	if s.Precondition.Kind == plan.PreSurvivorNewest {
		if t := m.forceTarget(d); mm == nil || t != mm || !m.copies(mm) {
			return false, fmt.Sprintf("%s is not the survivor a recovery restores, or its snapshot failed or is not current", s.Member)
		}
		if ok, why := m.mayForce(d, s.Member); !ok {
			return false, why
		}
	}
	switch {
	case s.Precondition.Kind == plan.PreSurvivorNewest:
	case mm == nil || m.survivorInMemory(d) != mm:
		return false, fmt.Sprintf("%s is not the member that still runs with its data in memory and has no snapshot", s.Member)
	case !mm.up:
		return false, fmt.Sprintf("waiting for %s to answer: its snapshot is read from it", s.Member)
	case m.snapshotTo == "":
		return false, "no backup destination is known to store the snapshot in"
	case m.snapshotOf(mm) != nil && m.snapshotOf(mm).Phase == SnapshotFailed:
		return false, fmt.Sprintf("the snapshot of %s (EtcdBackup %s) failed", s.Member, s.Backup)
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
	if names := m.unproven(d); len(names) > 0 {
		return false, unprovenReason(names)
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

// awaited are the voters a recovery waits for (unproven), unless a survivor was chosen on
// a look where none was (its claim is marked, or its snapshot succeeded), or members live
// in memory, where a new Pod holds no data.
func (m *model) awaited(d Desired, target *member) []string {
	if d.Memory || target != nil && (target.forcing || target.copied) {
		return nil
	}
	return m.unproven(d)
}

// Awaiting says what a plan made on o cannot know yet ("" for nothing): after a majority of
// voters lost their data, whether the others kept theirs. Until each has shown it, the plan
// names no survivor, and an empty plan does not mean the cluster matches the spec.
func Awaiting(d Desired, o Observed) string {
	m := newModel(d, o)
	if d.Replicas == 0 || m.restoreSeed() != nil || !m.quorumLost(d) {
		return ""
	}
	if names := m.awaited(d, m.forceTarget(d)); len(names) > 0 {
		return "a majority of voters lost their data, and the recovery is " + unprovenReason(names)
	}
	return ""
}

// unprovenReason says what a recovery waits for while voters have not shown whether they
// kept their data.
func unprovenReason(names []string) string {
	return fmt.Sprintf("waiting for %s to show whether it kept its data (answer, or pass its preflight check): "+
		"a recovery restarts the survivor with the longest log, and any of them may hold it "+
		"(if one can never come back, delete its volume claim, and the recovery goes on without it)", strings.Join(names, ", "))
}

// StopAtOnce says whether the Pod of member, once it is deleted, may stop without etcd's
// graceful shutdown (a grace period of one second: SIGTERM, then SIGKILL). A graceful stop
// hands leadership to a peer and lets requests in flight finish, and etcd gives each up to
// its request timeout (7 s); neither can succeed while no quorum answers and fewer than a
// quorum of voters run etcd in Pods other than member's that are not going too. Killed,
// etcd loses nothing it acknowledged: every write is in its WAL before it is. Members in
// memory keep their whole grace period: their data lives in the process alone.
func StopAtOnce(d Desired, o Observed, member string) bool {
	return newModel(d, o).stopsAtOnce(d, member)
}

// stopsAtOnce is StopAtOnce on the model.
func (m *model) stopsAtOnce(d Desired, member string) bool {
	if d.Memory || m.linearizable || m.blocked != nil {
		return false
	}
	all, staying := 0, 0
	for _, mm := range m.members {
		if mm.voter() {
			all++
			if mm.name != member && mm.running && !mm.dataLost && !mm.podDeleting {
				staying++
			}
		}
	}
	return all > 0 && staying < quorum(all)
}

// checkData starts a check Pod beside the going Pod of each voter that has not shown
// whether it kept its data, while no quorum can form (stopsAtOnce, as observed: not after
// the starts this plan foresees): it mounts the claim read-only and reads the data
// directory as a preflight check would. A recovery then need not wait for the old Pod to go
// and a new one to start on the claim: what the check finds counts once the old Pod is gone
// (lost), and until then a recovery waits anyway. Members a recovery chose, the seeds of a
// restore, and members in memory (their data goes with the Pod) get none; nor does a
// cluster being parked or adopted.
func checkData(m *model, d Desired) (plan.Step, bool) {
	if d.Memory || d.Replicas == 0 || !m.bootstrapped || m.restoreSeed() != nil || m.adopting() {
		return plan.Step{}, false
	}
	for _, mm := range m.members {
		chosen := mm.forcing || mm.snapshotted || mm.copied || mm.retained || mm.restoring != nil
		if !mm.voter() || !mm.started || !mm.goesAtOnce || !mm.pod || !mm.podDeleting || !mm.pvc || mm.pvcDeleting || mm.check != nil || chosen ||
			m.lost(mm, d) {
			continue
		}
		return step(plan.CheckData, mm, plan.PreNone, plan.WhyCheckData,
			"no quorum can form while the Pod of %s goes: a check Pod beside it reads whether its volume still holds its data, "+
				"so a recovery need not wait for a new Pod to start on it", mm.name), true
	}
	return plan.Step{}, false
}
