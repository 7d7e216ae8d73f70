// Package planner turns the desired EtcdCluster spec and the observed cluster into an
// ordered plan. It is pure: no client, no clock, no I/O, no randomness. The same input
// gives the same plan, byte for byte.
package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/etcdplan/etcdplan/api/plan"
)

// Step is the API's type: a plan is recorded in status as the planner makes it.
type Step = plan.Step

// maxSteps bounds a plan; a longer one means a rule that does not converge.
const maxSteps = 200

// Desired is what the EtcdCluster spec asks of the planner.
type Desired struct {
	// Name of the cluster; members are named <name>-<ordinal>.
	Name string `json:"name"`
	// Namespace of the cluster: members' peer URLs name it. Empty accepts any (offline use).
	Namespace string `json:"namespace,omitempty"`
	// Generation of the spec, recorded in the plan.
	Generation int64  `json:"generation"`
	Replicas   int    `json:"replicas"`
	Version    string `json:"version"`
	// ConfigHash is the hash of the spec fields member Pods are rendered from.
	ConfigHash string `json:"configHash"`
	// ConfigFields hashes each of those fields on its own ("field=hash,..."), to say which
	// changed.
	ConfigFields string `json:"configFields,omitempty"`
	// Memory: member data lives in memory, so it is gone with the Pod.
	Memory bool `json:"memory,omitempty"`
	// RecoveryApproved: spec.recovery lets a recovery from quorum loss run without
	// approval; the snapshot of a survivor is then stored as soon as no quorum answers
	// (snapshotEarly).
	RecoveryApproved bool `json:"recoveryApproved,omitempty"`
	// StorageClass is spec.storage.storageClassName: members whose volume is of another
	// class are replaced by new members. Empty asks for none in particular.
	StorageClass string `json:"storageClass,omitempty"`
	// StorageBytes is spec.storage.size: smaller volumes grow, or are replaced when their
	// class cannot grow them.
	StorageBytes int64 `json:"storageBytes,omitempty"`
	// QuotaBytes is spec.options.quotaBackendBytes (0: etcd's default).
	QuotaBytes int64 `json:"quotaBytes,omitempty"`
	// DefragPercent: members whose database is at least this share free space are
	// defragmented (spec.maintenance.defrag; 0: never for that reason alone).
	DefragPercent int `json:"defragPercent,omitempty"`
	// Restore names the snapshot a new cluster's seed is restored from
	// (spec.bootstrap.restore); "" starts an empty cluster.
	Restore string `json:"restore,omitempty"`
	// ClientTLS and PeerTLS: the spec has members serve clients, and peers, over TLS.
	ClientTLS bool `json:"clientTLS,omitempty"`
	PeerTLS   bool `json:"peerTLS,omitempty"`
	// Auth: the spec asks for etcd's authentication (spec.auth.enabled).
	Auth bool `json:"auth,omitempty"`
	// Users identifies the users spec.auth.users asks for ("" for none).
	Users string `json:"users,omitempty"`
	// Join: the spec asks to adopt a running cluster (spec.bootstrap.join).
	Join bool `json:"join,omitempty"`
}

// Plan returns the ordered steps that take the observed cluster to the desired state.
func Plan(d Desired, observed Observed) plan.Plan {
	m := newModel(d, observed)
	p := plan.Plan{
		FormatVersion: plan.FormatVersion,
		Generation:    d.Generation,
		Fingerprint:   observed.Fingerprint(),
		Warnings:      warnings(d, observed),
	}
	stale := observed.Stale() != ""
	if b := refuse(m, d, observed); b != nil {
		p.Blocked = b
	} else {
		for len(p.Steps) < maxSteps && !m.halt {
			s, ok := next(m, d)
			// On a stale view the membership is a guess: the plan stops before the first
			// step Check would refuse for want of a linearizable member list, unless a
			// recovery made the membership anew (one member, or a new seed).
			if !ok || stale && s.Action.NeedsLinearizable() {
				break
			}
			stale = stale && !s.Action.Recovers()
			p.Steps = append(p.Steps, s)
			m.satisfy(s.Precondition)
			m.apply(s, d)
		}
		if len(p.Steps) == 0 {
			p.Blocked = noSpaceLeft(m, d)
		}
		if len(m.awaiting) > 0 {
			lost, all := m.lostVoters(d)
			p.Warnings = append(p.Warnings, fmt.Sprintf("%d of %d voters lost their data, so the rest can never form a quorum; no recovery is planned yet: %s",
				lost, all, unprovenReason(m.awaiting)))
		}
	}
	p.ID = PlanID(p)
	return p
}

// PlanID hashes what identifies a plan: the generation it was made for, the state it was
// made from, and what its steps do and why (without their progress), or why it is blocked.
// Reasons are hashed by their codes, never their words, so rewording one keeps plan IDs and
// the approvals given to them. The words' parameters come from the spec and the observed
// state, which the generation and the fingerprint cover; so do the warnings, which change
// no step and are left out.
func PlanID(p plan.Plan) string {
	type step struct {
		Action              plan.Action
		Member, Target, Ver string
		Precondition        plan.Precondition
		Why                 plan.Why
		MemberID, TargetID  string
		Backup              string
		Secret              string `json:",omitempty"` // omitted, plans of other steps keep their IDs
	}
	steps := make([]step, len(p.Steps))
	for i, s := range p.Steps {
		steps[i] = step{s.Action, s.Member, s.Target, s.Version, s.Precondition, s.Why, s.MemberID, s.TargetID, s.Backup, s.Secret}
	}
	var blocked plan.BlockReason
	if p.Blocked != nil {
		blocked = p.Blocked.Reason
	}
	return hashJSON(struct {
		Generation  int64
		Fingerprint string
		Steps       []step
		Blocked     plan.BlockReason
	}{p.Generation, p.Fingerprint, steps, blocked})[:12]
}

// refuse returns why no plan can be made, or nil.
func refuse(m *model, d Desired, o Observed) *plan.Blocker {
	if m.blocked != nil {
		return m.blocked
	}
	if b := refuseJoin(m, d, o); b != nil {
		return b
	}
	if b := refuseVersion(m, d); b != nil {
		return b
	}
	if b := refuseCorrupt(m); b != nil {
		return b
	}
	return refuseQuorum(m, d)
}

// minPatch is, per minor release, the oldest patch etcd's upgrade guide allows to upgrade
// to the next minor from.
var minPatch = map[[2]int]int{{3, 5}: 32}

// refuseVersion checks spec.version against the version each member's data was last
// served by (or the one its Pod runs, when it never answered): patch releases of a minor go
// either way; a minor goes up one at a time, from a patch recent enough; a minor goes down
// only while etcd's cluster version has not moved past it (a member that ran the new minor
// beside ones of the old may return to it; once all moved, etcd refuses).
func refuseVersion(m *model, d Desired) *plan.Blocker {
	want, err := ParseVersion(d.Version)
	if err != nil {
		return &plan.Blocker{Reason: plan.BlockInvalidSpec, Message: "spec." + err.Error()}
	}
	for _, mm := range m.members {
		ran := cmp.Or(mm.ran, mm.version)
		if ran == "" || !mm.inEtcd && !mm.pod { // a parked member is assumed in etcd

			continue
		}
		have, err := ParseVersion(ran)
		if err != nil {
			continue
		}
		switch {
		case want.Major != have.Major || want.Minor > have.Minor+1:
			return &plan.Blocker{Reason: plan.BlockSkippedMinor, Message: fmt.Sprintf(
				"member %s ran %s and spec.version asks for %s: etcd upgrades one minor version at a time; set spec.version to a %d.%d.x release first",
				mm.name, have, want, have.Major, have.Minor+1)}
		case want.Minor == have.Minor+1 && have.Patch < minPatch[[2]int{have.Major, have.Minor}]:
			first := Version{have.Major, have.Minor, minPatch[[2]int{have.Major, have.Minor}]}
			return &plan.Blocker{Reason: plan.BlockPatchTooOld, Message: fmt.Sprintf(
				"member %s ran %s and spec.version asks for %s: etcd's upgrade guide asks every member to run %s or later before %d.%d; "+
					"upgrade to %s (or a later %d.%d release) first", mm.name, have, want, first, want.Major, want.Minor, first, have.Major, have.Minor)}
		case want.Minor < have.Minor:
			if b := refuseMinorDown(m, mm.name, have, want); b != nil {
				return b
			}
		}
	}
	return nil
}

// refuseMinorDown allows a member to go back a minor release only while etcd's cluster
// version is still that minor: etcd keeps the cluster on the lowest minor any member runs,
// and raises it for good once all run the new one.
func refuseMinorDown(m *model, member string, have, want Version) *plan.Blocker {
	cv, err := ParseVersion(m.clusterVersion)
	switch {
	case err != nil:
		return &plan.Blocker{Reason: plan.BlockDowngrade, Message: fmt.Sprintf(
			"member %s ran %s and spec.version asks for %s: going back a minor release is safe only while etcd's cluster version is still %d.%d, "+
				"and etcd's cluster version is not known (no member answers); set spec.version to a %d.%d release",
			member, have, want, want.Major, want.Minor, have.Major, have.Minor)}
	case cv.Major != want.Major || cv.Minor > want.Minor:
		return &plan.Blocker{Reason: plan.BlockDowngrade, Message: fmt.Sprintf(
			"member %s ran %s and etcd's cluster version is %d.%d: etcd cannot return to %s once every member ran %d.%d "+
				"(etcdplan does not run etcd's downgrade procedure); set spec.version to a %d.%d release, or restore a backup taken before the upgrade",
			member, have, cv.Major, cv.Minor, want, cv.Major, cv.Minor, have.Major, have.Minor)}
	}
	return nil
}

// refuseQuorum blocks when so many voters lost their data that the rest cannot form a
// quorum, no voter that kept its data can restart alone (none kept it, or members live in
// memory, where a restart loses it too), and the cluster has nothing to start anew from
// (recoverQuorum), or a survivor in memory cannot be snapshotted first.
func refuseQuorum(m *model, d Desired) *plan.Blocker {
	if !m.quorumLost(d) || m.restoreSeed() != nil {
		return nil
	}
	lost, all := m.lostVoters(d)
	if s := m.survivorInMemory(d); s != nil {
		return refuseSurvivor(m, s, lost, all)
	}
	if b, _ := m.restoreSource(""); b != nil {
		return nil
	}
	why := "no EtcdBackup of this cluster (its artifact records this cluster's ID) succeeded to start anew from: " +
		"take backups with an EtcdBackupSchedule, or restore a new cluster from a snapshot (spec.bootstrap.restore; see docs/backup-restore.md)"
	switch {
	case d.Memory && lost < all:
		why = "members keep their data in memory, so the survivors cannot restart alone without losing it too, and " + why
	case lost < all:
		return nil
	}
	return &plan.Blocker{Reason: plan.BlockQuorumLost, Message: fmt.Sprintf(
		"%d of %d voting members lost their data, so the rest cannot form a quorum: %s", lost, all, why)}
}

// restoreOverRetained blocks spec.bootstrap.restore on a cluster with an empty status
// whose volume claims record member IDs: volumes retained from an earlier cluster of the
// name. Starting them would ignore the restore the user asked for; restoring would need
// them deleted, with their data: only the user can choose. A seed Pod of the cluster means
// the claims are its own seed's, whose joining status has not recorded yet.
func restoreOverRetained(d Desired, o Observed) *plan.Blocker {
	if d.Restore == "" || o.ClusterID != "" || len(o.Recorded) > 0 {
		return nil
	}
	var claims []string
	for _, k := range o.Members {
		if k.Pod != nil && k.Pod.Seed {
			return nil
		}
		if k.PVC != nil && k.PVC.MemberID != "" {
			claims = append(claims, fmt.Sprintf("%s (member %s)", k.Name, k.PVC.MemberID))
		}
	}
	if len(claims) == 0 {
		return nil
	}
	return &plan.Blocker{Reason: plan.BlockRestoreOnRetained, Message: fmt.Sprintf(
		"spec.bootstrap.restore asks for a new cluster restored from %s, but volume claims %s hold the data of members of an earlier cluster of this name "+
			"(retained when it was deleted): to restore, delete those claims (their data is lost); to keep their data, remove spec.bootstrap.restore, "+
			"and the cluster starts on them", d.Restore, strings.Join(claims, ", "))}
}

// refuseSurvivor blocks while a survivor in memory cannot be snapshotted: no destination
// is known to store its snapshot in, or its snapshot failed. Otherwise the recovery
// snapshots it first (recoverFromBackup).
func refuseSurvivor(m *model, s *member, lost, all int) *plan.Blocker {
	byHand := fmt.Sprintf("or save its data by hand: `kubectl exec %s -c etcd -- etcdctl snapshot save /tmp/survivor.db` and copy it out "+
		"(a snapshot needs no quorum), then restore a new cluster from it (spec.bootstrap.restore, see docs/backup-restore.md); "+
		"or delete the Pod of %s to let the operator restore %s, losing the writes after it", s.name, s.name, backupName(m.backup))
	if snap := m.snapshotOf(s); snap != nil && snap.Phase == SnapshotFailed {
		return &plan.Blocker{Reason: plan.BlockSurvivorSnapshotFailed, Message: fmt.Sprintf(
			"%d of %d voting members lost their data, so the rest cannot form a quorum, and %s still runs with its data in memory, "+
				"but its snapshot failed (EtcdBackup %s: %s): the operator starts no cluster anew while a member of the old one runs. "+
				"Delete EtcdBackup %s to take the snapshot again (`kubectl delete etcdbackup %s`), once its cause is fixed; %s",
			lost, all, s.name, snap.Name, snap.Message, snap.Name, snap.Name, byHand)}
	}
	if m.snapshotTo != "" {
		return nil
	}
	return &plan.Blocker{Reason: plan.BlockSurvivorInMemory, Message: fmt.Sprintf(
		"%d of %d voting members lost their data, so the rest cannot form a quorum, but %s still runs with its data in memory, "+
			"which may hold writes no backup has: the operator starts no cluster anew while a member of the old one runs "+
			"(two clusters would serve, and those writes would be lost), and it knows no backup destination to store a snapshot of it in "+
			"(the cluster has no successful backup and no EtcdBackupSchedule). Create an EtcdBackupSchedule for the cluster, and the recovery "+
			"snapshots %s first and restores whichever of its snapshot and the newest backup holds the higher revision; %s",
		lost, all, s.name, s.name, byHand)}
}

// warnings are what the user should know of the spec itself.
func warnings(d Desired, o Observed) []string {
	var out []string
	switch {
	case d.Replicas == 1:
		out = append(out, "spec.replicas is 1: the cluster is unavailable while its only member restarts, and it has no copy of its data")
	case d.Replicas > 0 && d.Replicas%2 == 0:
		out = append(out, fmt.Sprintf("spec.replicas %d is even: %d voters tolerate no more failures than %d, and need one more answer for every write",
			d.Replicas, d.Replicas, d.Replicas-1))
	}
	if d.Restore != "" && o.ClusterID != "" && o.RestoredFrom == "" {
		out = append(out, "spec.bootstrap.restore is ignored: the cluster formed without it, and a restore seeds only a new cluster")
	}
	out = append(out, joinWarnings(d, o)...)
	if o.Etcd != nil && !o.Etcd.Linearizable {
		out = append(out, "etcd's member list was not read through a quorum: no membership change is planned or found done until it is")
	}
	if kept := retainedClaims(o); kept != "" {
		out = append(out, "volume claims "+kept+" are retained: their members held data when a recovery from quorum loss replaced the cluster, "+
			"and may hold writes the cluster lacks; the operator never deletes them: inspect them, then delete them by hand (docs/operations.md, retained volume claims)")
	}
	return out
}

// retainedClaims names the retained volume claims, with the member IDs they record.
func retainedClaims(o Observed) string {
	var out []string
	for _, k := range o.Members {
		if k.PVC != nil && k.PVC.Retained {
			out = append(out, fmt.Sprintf("%s (member %s)", k.Name, k.PVC.MemberID))
		}
	}
	return strings.Join(out, ", ")
}

// next returns the first step towards the desired state, in a fixed order of concerns:
// bootstrap, repairs that restore quorum (the data of voters whose Pods go while no quorum
// can form checked beside them, a survivor's snapshot asked for early, start voters' Pods:
// those gone, then those going, recover from a lost majority, restart voters that are down on the new spec), finish a membership change in
// flight, renew certificates, replace lost members, delete leftovers,
// grow volumes, park, switch auth (it waits for a TLS switch), scale down (and replace),
// scale up, switch TLS, rotate the CA, upgrade, configuration, then
// space: a NOSPACE alarm, then fragmented members; last, the acknowledgement that an
// adopted cluster's source members are stopped, which waits for the user alone.
func next(m *model, d Desired) (plan.Step, bool) {
	rules := []func(*model, Desired) (plan.Step, bool){
		bootstrap, checkData, snapshotEarly, startVoters, startGoing, recoverQuorum, rollDown, finishMembershipChange, renewCertificates, replaceLostMember, deleteLeftovers,
		expandVolumes, stopMembers, switchAuth,
		scaleDown, scaleUp, switchTLS, rotateCA, upgrade, reconfigure, recoverSpace, defragFragmented, acknowledgeSource,
	}
	if m.adopting() { // the adoption's plan alone, until its source is gone
		rules = []func(*model, Desired) (plan.Step, bool){startVoters, startGoing, adopt, finishMembershipChange, deleteLeftovers}
	}
	for _, rule := range rules {
		if s, ok := rule(m, d); ok {
			return m.withListen(s, d), true
		}
		if m.halt {
			return plan.Step{}, false
		}
	}
	return plan.Step{}, false
}

// SameStep reports whether a recorded step is the fresh plan's step: every field equal,
// except member IDs the recorded step could not know yet (a learner's, before it was added),
// and the reason code of a step recorded before steps had one (formatVersion 1), whose words
// must then be the same. The executor supersedes a recorded plan whose current step is not
// the fresh plan's.
func SameStep(recorded, fresh plan.Step) bool {
	r := recorded
	if r.MemberID == "" {
		r.MemberID = fresh.MemberID
	}
	if r.Why == "" {
		r.Why = fresh.Why
	}
	if r.TargetID == "" {
		r.TargetID = fresh.TargetID
	}
	return r == fresh
}

// DoneUpTo returns k when the fresh plan is exactly the recorded steps from k on, for some
// k at or after current: the steps before k have had their effect. "Exactly" is SameStep
// for every step, so a recorded step a fresh plan would not give is never taken as the rest.
func DoneUpTo(recorded []plan.Step, current int, fresh plan.Plan) (int, bool) {
	if fresh.Blocked != nil {
		return 0, false
	}
	for k := current; k <= len(recorded); k++ {
		rest := recorded[k:]
		if len(rest) == len(fresh.Steps) && slices.EqualFunc(rest, fresh.Steps, SameStep) {
			return k, true
		}
	}
	return 0, false
}

// backupName names the backup a recovery would restore.
func backupName(b *Backup) string {
	if b == nil {
		return "the newest backup (there is none yet)"
	}
	return b.String()
}
