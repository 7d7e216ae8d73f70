package controller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/status"
)

// snapshotMember has the snapshot of a member stored: one that still runs alone with its
// data in memory (SnapshotSurvivor), a survivor on its volume whose snapshot every member
// is restored from (SnapshotSurvivor, its claim marked first), the most recent voter that
// answers while no quorum does (SnapshotSurvivor, early: done once asked for), or a voter
// of an adopted cluster before the first source member leaves (SnapshotSource). It creates
// the step's EtcdBackup, naming the member by ID (spec.member) and recording its raft term
// and index, at the destination of the newest backup or the backup schedule, and the
// backup reconciler takes it. A later look finds the backup it created and waits for it;
// the plan goes on once it succeeded (a survivor's failure blocks the next plan,
// SurvivorSnapshotFailed; a source's stalls the step until the backup is deleted). No
// owner: the snapshot outlives the cluster, as any backup taken by hand.
func (r *Reconciler) snapshotMember(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, s plan.Step) error {
	if s.Why == plan.WhySurvivorSnapshot {
		// The claim is marked first: only a snapshot asked for in this loss of quorum counts.
		if err := r.markChosen(ctx, c, o, s, vocab.AnnotationSurvivorSnapshot); err != nil {
			return err
		}
	}
	b := &v1alpha1.EtcdBackup{}
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: s.Backup}, b)
	switch {
	case apierrors.IsNotFound(err):
		return r.createSnapshot(ctx, c, o, s)
	case err != nil:
		return err
	case b.Spec.ClusterRef.Name != c.Name || b.Spec.Member != s.MemberID || b.Labels[vocab.LabelManagedBy] != vocab.ManagerName:
		return nameTaken("EtcdBackup", s.Backup)
	}
	switch {
	case s.Why == plan.WhySurvivorSnapshotEarly:
		return nil // asked for: a recovery that restores from the member waits for it
	case b.Status.Phase == v1alpha1.BackupSucceeded:
		return nil // stored (an early snapshot, the recovery's now): the next look shows it
	case b.Status.Phase == v1alpha1.BackupFailed:
		return status.Waiting("EtcdBackup %s failed to store the snapshot of %s: %s; delete it to take the snapshot again", b.Name, s.Member, readyMessage(b))
	}
	return status.Waiting("waiting for EtcdBackup %s to store the snapshot of %s (phase %q): %s", b.Name, s.Member, b.Status.Phase, readyMessage(b))
}

func (r *Reconciler) createSnapshot(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, s plan.Step) error {
	if o.snapshotTo == nil {
		return stuck(v1alpha1.ReasonNoBackupDestination, "the cluster has no successful backup and no EtcdBackupSchedule: "+
			"no destination is known to store the snapshot of %s in", s.Member)
	}
	b := &v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: s.Backup,
		Labels: map[string]string{v1alpha1.LabelCluster: c.Name, vocab.LabelManagedBy: vocab.ManagerName}}}
	if at := raftAt(o, s.MemberID); at != "" {
		b.Annotations = map[string]string{vocab.AnnotationRaftAt: at}
	}
	b.Spec.ClusterRef, b.Spec.Destination, b.Spec.Member = v1alpha1.ClusterReference{Name: c.Name}, *o.snapshotTo.DeepCopy(), s.MemberID
	if err := r.Create(ctx, b); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating EtcdBackup %s: %w", s.Backup, err)
	}
	return nil
}

// raftAt is the raft term and index the member of that ID reports on this look,
// "<term>/<index>"; "" when it does not answer.
func raftAt(o *observation, id string) string {
	if o.Etcd == nil {
		return ""
	}
	for _, m := range o.Etcd.Members {
		if m.ID == id && m.Answering && m.RaftIndex > 0 {
			return fmt.Sprintf("%d/%d", m.RaftTerm, m.RaftIndex)
		}
	}
	return ""
}

// readyMessage is what a backup's Ready condition says.
func readyMessage(b *v1alpha1.EtcdBackup) string {
	for _, cond := range b.Status.Conditions {
		if cond.Type == "Ready" {
			return cond.Message
		}
	}
	return "not started yet"
}
