package observe

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/planner"
)

// Objects are a cluster's member Pods and volume claims, whether the claims' storage
// classes allow volume expansion (a class that could not be read is missing), and the
// cluster's EtcdBackups.
type Objects struct {
	Pods       []corev1.Pod
	PVCs       []corev1.PersistentVolumeClaim
	Expandable map[string]bool
	Backups    []v1alpha1.EtcdBackup
}

// List reads a cluster's member Pods, volume claims and backups. Pods and claims are found
// by label, so the volumes a deleted cluster retained are found too.
func List(ctx context.Context, r client.Reader, c *v1alpha1.EtcdCluster) (Objects, error) {
	var o Objects
	pods, err := MemberPods(ctx, r, c)
	if err != nil {
		return o, err
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
	return Objects{Pods: pods, PVCs: pvcs.Items, Expandable: expandable(ctx, r, pvcs.Items), Backups: backups.Items}, nil
}

// newestBackup is the backup a cluster that lost every voter's data starts anew from: one
// taken of an etcd cluster with one of the IDs (the cluster's, and the one before a
// recovery started it anew), succeeded, its restore drill not failed; the newest verified
// one when a drill passed on any, else the newest. A backup that does not record the ID
// it was taken from never counts: it may be of another cluster of the same name.
func newestBackup(backups []v1alpha1.EtcdBackup, clusterIDs ...string) *planner.Backup {
	var best *v1alpha1.EtcdBackup
	for i := range backups {
		b := &backups[i]
		a := b.Status.Artifact
		if b.Status.Phase != v1alpha1.BackupSucceeded || a == nil || a.ClusterID == "" || !slices.Contains(clusterIDs, a.ClusterID) || b.DrillFailed() {
			continue
		}
		if best == nil || better(b, best) {
			best = b
		}
	}
	if best == nil {
		return nil
	}
	return backupOf(best)
}

// better: a is verified and b not, or as verified as b and newer.
func better(a, b *v1alpha1.EtcdBackup) bool {
	if a.Verified() != b.Verified() {
		return a.Verified()
	}
	x, y := a.Status.Artifact, b.Status.Artifact
	return x.TakenAt.After(y.TakenAt.Time) || (x.TakenAt.Equal(&y.TakenAt) && x.Revision > y.Revision)
}

func backupOf(b *v1alpha1.EtcdBackup) *planner.Backup {
	a := b.Status.Artifact
	return &planner.Backup{Name: b.Name, Revision: a.Revision, TakenAt: a.TakenAt.UTC().Format(time.RFC3339), Verified: b.Verified()}
}

// restoring is the backup a mark names, as the planner describes it; only its name when
// the EtcdBackup is gone or has no artifact.
func restoring(backups []v1alpha1.EtcdBackup, name string) *planner.Backup {
	if name == "" {
		return nil
	}
	for i := range backups {
		if backups[i].Name == name && backups[i].Status.Artifact != nil {
			return backupOf(&backups[i])
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

func memberLabels(c *v1alpha1.EtcdCluster) client.MatchingLabels {
	return client.MatchingLabels{resources.LabelCluster: c.Name, resources.LabelManagedBy: resources.ManagerName}
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
	return planner.Observed{
		FormatVersion:   planner.ObservedFormatVersion,
		ClusterID:       c.Status.ClusterID,
		RestoredFrom:    c.Status.RestoredFrom,
		NextOrdinal:     int(c.Status.NextOrdinal),
		StalledLearners: c.Status.StalledLearners,
		DefragDue:       defragDue(c),
		Recorded:        Recorded(c),
		Members:         Members(o),
		Backup:          newestBackup(o.Backups, c.Status.ClusterID, c.Status.PreviousClusterID),
	}
}

// defragDue are the members scheduled defragmentation has still to do, from status.
func defragDue(c *v1alpha1.EtcdCluster) []string {
	if c.Status.Defrag == nil {
		return nil
	}
	return c.Status.Defrag.Pending
}
