package observe

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/planner"
)

// Objects are a cluster's member Pods and volume claims, and whether the claims' storage
// classes allow volume expansion (a class that could not be read is missing).
type Objects struct {
	Pods       []corev1.Pod
	PVCs       []corev1.PersistentVolumeClaim
	Expandable map[string]bool
}

// List reads a cluster's member Pods and volume claims. They are found by label, so the
// volumes a deleted cluster retained are found too.
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
	return Objects{Pods: pods, PVCs: pvcs.Items, Expandable: expandable(ctx, r, pvcs.Items)}, nil
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
	}
}

// defragDue are the members scheduled defragmentation has still to do, from status.
func defragDue(c *v1alpha1.EtcdCluster) []string {
	if c.Status.Defrag == nil {
		return nil
	}
	return c.Status.Defrag.Pending
}
