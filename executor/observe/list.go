package observe

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/backup"
	"github.com/etcdplan/etcdplan/planner"
)

// Objects are a cluster's member Pods and volume claims, whether the claims' storage
// classes allow volume expansion (a class that could not be read is missing), and the
// cluster's EtcdBackups and EtcdBackupSchedules.
type Objects struct {
	Pods []corev1.Pod
	// Checks are the cluster's check Pods (CheckData).
	Checks     []corev1.Pod
	PVCs       []corev1.PersistentVolumeClaim
	Expandable map[string]bool
	Backups    []v1alpha1.EtcdBackup
	Schedules  []v1alpha1.EtcdBackupSchedule
}

// List reads a cluster's member Pods, volume claims and backups. Pods and claims are found
// by label, so the volumes a deleted cluster retained are found too.
func List(ctx context.Context, r client.Reader, c *v1alpha1.EtcdCluster) (Objects, error) {
	var o Objects
	pods, err := MemberPods(ctx, r, c)
	if err != nil {
		return o, err
	}
	var checks corev1.PodList
	if err := r.List(ctx, &checks, client.InNamespace(c.Namespace), CheckLabels(c)); err != nil {
		return o, fmt.Errorf("listing check Pods: %w", err)
	}
	var pvcs corev1.PersistentVolumeClaimList
	if err := r.List(ctx, &pvcs, client.InNamespace(c.Namespace), memberLabels(c)); err != nil {
		return o, fmt.Errorf("listing member volume claims: %w", err)
	}
	var backups v1alpha1.EtcdBackupList
	if err := r.List(ctx, &backups, client.InNamespace(c.Namespace)); err != nil {
		return o, fmt.Errorf("listing EtcdBackups: %w", err)
	}
	backups.Items = slices.DeleteFunc(backups.Items, func(b v1alpha1.EtcdBackup) bool { return b.Spec.ClusterRef.Name != c.Name })
	var schedules v1alpha1.EtcdBackupScheduleList
	if err := r.List(ctx, &schedules, client.InNamespace(c.Namespace)); err != nil {
		return o, fmt.Errorf("listing EtcdBackupSchedules: %w", err)
	}
	schedules.Items = slices.DeleteFunc(schedules.Items, func(s v1alpha1.EtcdBackupSchedule) bool { return s.Spec.ClusterRef.Name != c.Name })
	return Objects{Pods: pods, Checks: checks.Items, PVCs: pvcs.Items, Expandable: expandable(ctx, r, pvcs.Items), Backups: backups.Items,
		Schedules: schedules.Items}, nil
}

// SnapshotDestination is where a recovery stores the snapshot of a member that still runs
// alone with its data in memory: the destination of the cluster's newest successful
// backup, else of its first backup schedule (by name); nil when neither is known.
func (o Objects) SnapshotDestination(clusterIDs ...string) *v1alpha1.BackupDestination {
	if b := newest(o.Backups, clusterIDs...); b != nil {
		return &b.Spec.Destination
	}
	var first *v1alpha1.EtcdBackupSchedule
	for i := range o.Schedules {
		if s := &o.Schedules[i]; first == nil || s.Name < first.Name {
			first = s
		}
	}
	if first == nil {
		return nil
	}
	return &first.Spec.Destination
}

// snapshots are the EtcdBackups of one named member, as the planner sees them: all that
// have not succeeded, and those that succeeded of an etcd cluster with one of the IDs.
func snapshots(backups []v1alpha1.EtcdBackup, clusterIDs ...string) []planner.MemberSnapshot {
	var out []planner.MemberSnapshot
	for i := range backups {
		b := &backups[i]
		if b.Spec.Member == "" {
			continue
		}
		s := planner.MemberSnapshot{Backup: planner.Backup{Name: b.Name}, MemberID: b.Spec.Member, Phase: string(b.Status.Phase)}
		if _, err := fmt.Sscanf(b.Annotations[vocab.AnnotationRaftAt], "%d/%d", &s.RaftTerm, &s.RaftIndex); err != nil {
			s.RaftTerm, s.RaftIndex = 0, 0 // not recorded: never taken as current
		}
		if a := b.Status.Artifact; b.Status.Phase == v1alpha1.BackupSucceeded {
			if !ofCluster(b, clusterIDs) {
				continue
			}
			s.Backup, s.Member = *backupOf(b, nil), a.Member
		}
		if b.Status.Phase == v1alpha1.BackupFailed {
			s.Message = conditionMessage(b)
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b planner.MemberSnapshot) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// conditionMessage is what the backup's Ready condition says.
func conditionMessage(b *v1alpha1.EtcdBackup) string {
	if c := apimeta.FindStatusCondition(b.Status.Conditions, "Ready"); c != nil {
		return c.Message
	}
	return ""
}

// newestBackup is the backup a cluster that lost every voter's data starts anew from: the
// newest taken of an etcd cluster with one of the IDs (the cluster's, and the one before a
// recovery started it anew) that succeeded (its checksum held) and that no restore drill
// found wrong. A drill that has not passed (not asked, running, or could not run) holds
// nothing back: the plan says so and names the newest verified backup as the alternative.
// A backup that does not record the ID it was taken from never counts: it may be of
// another cluster of the same name. A member's snapshot (spec.member) is not one: the
// planner weighs it apart (snapshots).
func newestBackup(backups []v1alpha1.EtcdBackup, clusterIDs ...string) *planner.Backup {
	if best := newest(backups, clusterIDs...); best != nil {
		return backupOf(best, restorable(backups, clusterIDs...))
	}
	return nil
}

// newest is the newest of the restorable backups.
func newest(backups []v1alpha1.EtcdBackup, clusterIDs ...string) *v1alpha1.EtcdBackup {
	usable := restorable(backups, clusterIDs...)
	var best *v1alpha1.EtcdBackup
	for i := range usable {
		if best == nil || newer(&usable[i], best) {
			best = &usable[i]
		}
	}
	return best
}

// ofCluster: the backup records that it was taken of an etcd cluster with one of the IDs.
func ofCluster(b *v1alpha1.EtcdBackup, clusterIDs []string) bool {
	a := b.Status.Artifact
	return a != nil && a.ClusterID != "" && slices.Contains(clusterIDs, a.ClusterID)
}

// restorable are the backups of the etcd clusters with the IDs that a recovery may
// restore: succeeded, no drill found them wrong, and not a member's snapshot.
func restorable(backups []v1alpha1.EtcdBackup, clusterIDs ...string) []v1alpha1.EtcdBackup {
	return slices.DeleteFunc(slices.Clone(backups), func(b v1alpha1.EtcdBackup) bool {
		return b.Status.Phase != v1alpha1.BackupSucceeded || !ofCluster(&b, clusterIDs) || b.DrillFailed() || b.Spec.Member != ""
	})
}

// newer: a's snapshot is newer than b's.
func newer(a, b *v1alpha1.EtcdBackup) bool {
	x, y := a.Status.Artifact, b.Status.Artifact
	return x.TakenAt.After(y.TakenAt.Time) || (x.TakenAt.Equal(&y.TakenAt) && x.Revision > y.Revision)
}

// backupOf describes b to the planner: how far its drill went and, when it is not
// verified, the newest verified of others, older, as the alternative.
func backupOf(b *v1alpha1.EtcdBackup, others []v1alpha1.EtcdBackup) *planner.Backup {
	out := describe(b)
	switch {
	case out.Verified:
	case !b.Spec.Verify:
		out.Drill = planner.DrillNone
	default:
		out.Drill = planner.DrillNotDone
	}
	if v := backup.NewestVerified(others); !out.Verified && v != nil && newer(b, v) {
		out.Alternative = describe(v)
	}
	return out
}

func describe(b *v1alpha1.EtcdBackup) *planner.Backup {
	a := b.Status.Artifact
	return &planner.Backup{Name: b.Name, Revision: a.Revision, TakenAt: a.TakenAt.UTC().Format(time.RFC3339), Verified: b.Verified()}
}

// restoring is the backup a mark names, as the planner describes it (as newestBackup did
// when the restore was planned, so the plan reads the same); only its name when the
// EtcdBackup is gone or has no artifact.
func restoring(backups []v1alpha1.EtcdBackup, name string) *planner.Backup {
	if name == "" {
		return nil
	}
	for i := range backups {
		if b := &backups[i]; b.Name == name && b.Status.Artifact != nil {
			return backupOf(b, restorable(backups, b.Status.Artifact.ClusterID))
		}
	}
	return &planner.Backup{Name: name}
}

// MemberPods reads a cluster's member Pods: those labelled as its members by the operator.
func MemberPods(ctx context.Context, r client.Reader, c *v1alpha1.EtcdCluster) ([]corev1.Pod, error) {
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(c.Namespace), memberLabels(c)); err != nil {
		return nil, fmt.Errorf("listing member Pods: %w", err)
	}
	return pods.Items, nil
}

// CheckLabels select a cluster's check Pods (resources.CheckPod).
func CheckLabels(c *v1alpha1.EtcdCluster) client.MatchingLabels {
	return client.MatchingLabels{vocab.LabelDataCheck: c.Name, vocab.LabelManagedBy: vocab.ManagerName}
}

func memberLabels(c *v1alpha1.EtcdCluster) client.MatchingLabels {
	return client.MatchingLabels{v1alpha1.LabelCluster: c.Name, vocab.LabelManagedBy: vocab.ManagerName}
}

// expandable reads the storage classes of the claims. One that cannot be read (gone, or
// not readable with the caller's rights) is left out: nothing is planned on a guess.
func expandable(ctx context.Context, r client.Reader, pvcs []corev1.PersistentVolumeClaim) map[string]bool {
	out := map[string]bool{}
	for _, pvc := range pvcs {
		name := ptr.Deref(pvc.Spec.StorageClassName, "")
		if _, ok := out[name]; ok || name == "" {
			continue
		}
		sc := &storagev1.StorageClass{}
		if r.Get(ctx, client.ObjectKey{Name: name}, sc) == nil {
			out[name] = ptr.Deref(sc.AllowVolumeExpansion, false)
		}
	}
	return out
}

// Observed is what Kubernetes alone shows of the cluster: everything but etcd's view,
// which the caller adds (from etcd itself, or from status with FromStatus).
func (o Objects) Observed(c *v1alpha1.EtcdCluster) planner.Observed {
	ids := []string{c.Status.ClusterID, c.Status.PreviousClusterID}
	return planner.Observed{
		FormatVersion:   planner.ObservedFormatVersion,
		ClusterID:       c.Status.ClusterID,
		RestoredFrom:    c.Status.RestoredFrom,
		NextOrdinal:     int(c.Status.NextOrdinal),
		StalledLearners: c.Status.StalledLearners,
		DefragDue:       defragDue(c),
		Recorded:        Recorded(c),
		Members:         Members(o, c),
		Backup:          newestBackup(o.Backups, ids...),
		SnapshotTo:      snapshotTo(o.SnapshotDestination(ids...)),
		Snapshots:       snapshots(o.Backups, ids...),
		Trust:           trust(c),
		CA:              caRotation(c),
		AuthFromCreation: c.Status.Auth != nil && c.Status.Auth.FromCreation ||
			c.Spec.AuthOn() && c.Status.ClusterID == "" && c.Status.PreviousClusterID == "",
		Users: usersMade(c),
		Join:  Join(c),
	}
}

// Join is the adoption status records; nil when none was asked.
func Join(c *v1alpha1.EtcdCluster) *planner.Join {
	j := c.Status.Join
	if j == nil {
		return nil
	}
	out := &planner.Join{SourceLeft: j.SourceLeft, UsersMade: j.UsersMade, AllLeft: j.Phase == v1alpha1.JoinSourceRemoved}
	for _, m := range j.Source {
		out.Source = append(out.Source, planner.RecordedMember{Name: m.Name, ID: m.ID})
	}
	return out
}

// usersMade identifies the users of spec.auth.users made in the cluster's etcd, as status
// recorded them: "" for none, or when they were made in another etcd cluster (one the
// cluster was recovered from).
func usersMade(c *v1alpha1.EtcdCluster) string {
	if c.Status.Auth == nil {
		return ""
	}
	hash, id, _ := strings.Cut(c.Status.Auth.UsersApplied, "@")
	if id != c.Status.ClusterID {
		return ""
	}
	return hash
}

// trust is the trust bundles a member Pod started now mounts, as status last recorded them.
func trust(c *v1alpha1.EtcdCluster) string {
	if c.Status.TLS == nil {
		return ""
	}
	return c.Status.TLS.Trust
}

// caRotation is where a rotation of the cluster's CA stands, as status last recorded it
// (the operator reads the CA Secret itself).
func caRotation(c *v1alpha1.EtcdCluster) *planner.CARotation {
	if c.Status.TLS == nil || c.Status.TLS.CARotation == nil {
		return nil
	}
	if src := c.Status.TLS.CARotation.Source; src != "" { // a change of spec.tls's source
		return &planner.CARotation{Stage: planner.CAStage(c.Status.TLS.CARotation.Stage), Secret: vocab.TrustSecret(c.Name), Source: src}
	}
	r := RotationAsked(c)
	r.Stage = planner.CAStage(c.Status.TLS.CARotation.Stage)
	return r
}

// RotationAsked is a rotation of the cluster's CA just asked for, with the certificates it
// issues again: those status lists as renewed by the operator.
func RotationAsked(c *v1alpha1.EtcdCluster) *planner.CARotation {
	r := &planner.CARotation{Stage: planner.CAAsked, Secret: vocab.CASecret(c.Name), PeerLeaves: c.Spec.TLS.PeerMode() == v1alpha1.TLSAuto}
	if c.Status.TLS == nil {
		return r
	}
	for _, cs := range c.Status.TLS.Certificates {
		if cs.RenewAt != nil {
			mounted := cs.SecretName == vocab.ServerSecret(c.Name) || strings.HasSuffix(cs.SecretName, "-peer-tls")
			r.Leaves = append(r.Leaves, planner.Renewal{Secret: cs.SecretName, Mounted: mounted})
		}
	}
	return r
}

// snapshotTo renders a destination for the planner; "" for none.
func snapshotTo(d *v1alpha1.BackupDestination) string {
	if d == nil {
		return ""
	}
	return d.URI("")
}

// defragDue are the members scheduled defragmentation has still to do, from status.
func defragDue(c *v1alpha1.EtcdCluster) []string {
	if c.Status.Defrag == nil {
		return nil
	}
	return c.Status.Defrag.Pending
}
