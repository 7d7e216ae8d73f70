package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/resources"
)

// classExists refuses to create a member's claim of a storage class that does not exist:
// it would never bind.
func (r *Reconciler) classExists(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, member string) error {
	name := c.Spec.Storage.StorageClassName
	if _, ok := o.pvcs[member]; ok || name == "" {
		return nil
	}
	err := r.Get(ctx, client.ObjectKey{Name: name}, &storagev1.StorageClass{})
	if apierrors.IsNotFound(err) {
		return stuck(v1alpha1.ReasonStorageClassNotFound,
			"storage class %s (spec.storage.storageClassName) does not exist, so the volume claim of %s cannot be created: "+
				"create the class, or set spec.storage.storageClassName to one that exists", name, member)
	}
	return nil
}

// binding reports whether a member's claim is still being bound by a storage class that
// binds at once: a Pod created before that would be found unschedulable, and the scheduler
// retries it only after a backoff of up to 10 s. The claim's binding wakes the next
// reconcile. When the class cannot be read, nothing waits.
func (r *Reconciler) binding(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, member string) bool {
	if p := o.pvcs[member]; p != nil && p.Status.Phase == corev1.ClaimBound {
		return false
	}
	pvc := &corev1.PersistentVolumeClaim{}
	if r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: member}, pvc) != nil ||
		(pvc.Status.Phase != corev1.ClaimPending && pvc.Status.Phase != "") || ptr.Deref(pvc.Spec.StorageClassName, "") == "" {
		return false
	}
	sc := &storagev1.StorageClass{} // from the cache: StorageClasses are watched
	if r.Get(ctx, client.ObjectKey{Name: *pvc.Spec.StorageClassName}, sc) != nil {
		return false
	}
	return ptr.Deref(sc.VolumeBindingMode, storagev1.VolumeBindingImmediate) == storagev1.VolumeBindingImmediate
}

func (r *Reconciler) ensurePVC(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, member string) error {
	if pvc, ok := o.pvcs[member]; ok {
		if !owned(c, pvc, true) {
			return nameTaken("PersistentVolumeClaim", member)
		}
		return nil
	}
	pvc := resources.MemberPVC(c, member)
	if c.Spec.Storage.RetainPolicy == v1alpha1.RetainPolicyDelete {
		if err := controllerutil.SetOwnerReference(c, pvc, r.Scheme()); err != nil {
			return err
		}
	}
	return r.create(ctx, c, pvc, "PersistentVolumeClaim", true)
}

// expandPVC asks a member's claim for spec.storage.size; the claim's class grows the
// volume. A claim that records another member ID than the step's is not touched.
func (r *Reconciler) expandPVC(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, s plan.Step) error {
	pvc, err := stepClaim(c, o, s)
	if err != nil {
		return err
	}
	if pvc == nil {
		return fmt.Errorf("member %s has no volume claim to expand", s.Member)
	}
	want := c.Spec.Storage.Size
	if have := pvc.Spec.Resources.Requests[corev1.ResourceStorage]; have.Cmp(want) >= 0 {
		return nil
	}
	grown := pvc.DeepCopy()
	grown.Spec.Resources.Requests[corev1.ResourceStorage] = want
	return r.Patch(ctx, grown, client.MergeFromWithOptions(pvc, client.MergeFromWithOptimisticLock{}))
}

// deletePVC deletes the volume claim of a member that left. A claim that records a member
// ID is deleted only as that member's: the step carries the ID the planner saw gone. A
// retained claim is never deleted.
func (r *Reconciler) deletePVC(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, s plan.Step) error {
	pvc, err := stepClaim(c, o, s)
	if pvc == nil || err != nil || pvc.Labels[v1alpha1.LabelRetained] != "" {
		return err
	}
	err = r.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// stepClaim is the member's volume claim a step may act on: this cluster's, and recording
// the step's member ID (or none, as the step). nil when there is none or it is going.
func stepClaim(c *v1alpha1.EtcdCluster, o *observation, s plan.Step) (*corev1.PersistentVolumeClaim, error) {
	pvc := o.pvcs[s.Member]
	switch {
	case pvc == nil || pvc.DeletionTimestamp != nil:
		return nil, nil
	case !owned(c, pvc, true):
		return nil, nameTaken("PersistentVolumeClaim", s.Member)
	case pvc.Annotations[vocab.AnnotationMemberID] != s.MemberID:
		return nil, fmt.Errorf("volume claim %s records member %s, not %s: it is kept as it is", s.Member, pvc.Annotations[vocab.AnnotationMemberID], s.MemberID)
	}
	return pvc, nil
}
