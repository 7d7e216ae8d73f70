package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/planner"
)

// housekeep keeps the objects around the members in line with the spec and etcd's view:
// Services, the PodDisruptionBudget, role labels, member IDs on volumes, check Pods no
// longer needed and the volumes' owner references (retainPolicy). None of it changes
// membership or restarts anything, so it is not part of a plan.
func (r *Reconciler) housekeep(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation) error {
	if err := r.stopGoingAtOnce(ctx, c, o); err != nil {
		return err
	}
	voters := 0
	for _, obj := range []client.Object{resources.Headless(c), resources.Client(c)} {
		if err := r.applyOwned(ctx, c, obj); err != nil {
			return err
		}
	}
	if o.Etcd != nil {
		for _, m := range o.Etcd.Members {
			name := m.MemberName()
			role := v1alpha1.RoleLearner
			if !m.Learner {
				role, voters = v1alpha1.RoleVoter, voters+1
			}
			if err := r.labelRole(ctx, o, name, role); err != nil {
				return err
			}
			if m.Started() {
				if err := r.recordMember(ctx, o, name, m); err != nil {
					return err
				}
			}
		}
	} else {
		voters = len(o.Recorded)
	}
	if voters == 0 {
		voters = int(c.Spec.Replicas)
	}
	if err := r.applyOwned(ctx, c, resources.PDB(c, voters)); err != nil {
		return err
	}
	if err := r.forgetSnapshots(ctx, c, o); err != nil {
		return err
	}
	if err := r.deleteChecks(ctx, c, o); err != nil {
		return err
	}
	return r.retainVolumes(ctx, c, o)
}

// stopGoingAtOnce cuts to a second the grace period of member Pods already going whose
// etcd's graceful stop could achieve nothing (planner.StopAtOnce): after a quorum loss the
// recovery waits for them to end, and each would wait out etcd's request timeout. Whoever
// deleted them, they go; only sooner. A Pod a step deletes gets its grace from
// deleteMemberPod.
func (r *Reconciler) stopGoingAtOnce(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation) error {
	for _, name := range slices.Sorted(maps.Keys(o.pods)) {
		p := o.pods[name]
		if !cutsGrace(c, o, p) {
			continue
		}
		err := r.Delete(ctx, p, client.Preconditions{UID: &p.UID}, client.GracePeriodSeconds(stopAtOnceGrace))
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return err
		}
		p.DeletionGracePeriodSeconds = ptr.To[int64](stopAtOnceGrace)
		r.event(c, corev1.EventTypeNormal, v1alpha1.ReasonStoppedAtOnce, "Pod %s, going, stops within %ds: no quorum answers, so etcd's graceful stop "+
			"would only wait out its request timeout", p.Name, stopAtOnceGrace)
	}
	return nil
}

// forgetSnapshots deletes the EtcdBackups of survivors' snapshots (SnapshotName) no recovery
// restored: their member is a voter again in a view read through a quorum, under the same
// member ID, so the cluster holds all they hold. Their name is free then, and a later loss
// takes a fresh snapshot (an early one, or the recovery's) rather than find this one stale.
// The stored object stays, as for any EtcdBackup deleted. One still being taken waits.
func (r *Reconciler) forgetSnapshots(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation) error {
	if o.Etcd == nil || !o.Etcd.Linearizable {
		return nil
	}
	for _, s := range o.Snapshots {
		if s.Phase != planner.SnapshotSucceeded && s.Phase != string(v1alpha1.BackupFailed) || !survivorVoter(o.Etcd, s) {
			continue
		}
		b := &v1alpha1.EtcdBackup{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: s.Name}, b); apierrors.IsNotFound(err) {
			continue // gone already; the others are still looked at
		} else if err != nil {
			return err
		}
		if b.Labels[vocab.LabelManagedBy] != vocab.ManagerName || b.Spec.ClusterRef.Name != c.Name || b.Spec.Member != s.MemberID {
			continue
		}
		if err := r.Delete(ctx, b, client.Preconditions{UID: &b.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting EtcdBackup %s, the snapshot of voter %s: %w", b.Name, s.MemberID, err)
		}
		r.event(c, corev1.EventTypeNormal, v1alpha1.ReasonSnapshotForgotten, "EtcdBackup %s, the snapshot of %s taken while no quorum answered, is deleted: "+
			"the member serves in a quorum again, and the cluster holds all it holds (its stored object stays)", b.Name, s.Member)
	}
	return nil
}

// survivorVoter: the snapshot is a survivor's (named by SnapshotName) whose member is a
// voter of the view, under the ID it records.
func survivorVoter(v *planner.EtcdView, s planner.MemberSnapshot) bool {
	return slices.ContainsFunc(v.Members, func(m planner.EtcdMember) bool {
		return !m.Learner && m.ID == s.MemberID && m.Name != "" && s.Name == planner.SnapshotName(m.Name, m.ID)
	})
}

// appliedSet remembers what was last applied of each object, so a reconcile applies only
// what changed (or went missing) instead of writing every Service on every pass.
type appliedSet struct{ m sync.Map }

func (a *appliedSet) same(key string, hash string) bool {
	v, ok := a.m.Load(key)
	return ok && v.(string) == hash
}

// applyOwned server-side applies an object the cluster owns, when its rendering changed
// since it was last applied or the object is not there. The rendering's hash is kept in
// memory and on the object, so a restarted operator does not apply again what is so.
func (r *Reconciler) applyOwned(ctx context.Context, c *v1alpha1.EtcdCluster, obj client.Object) error {
	if err := controllerutil.SetControllerReference(c, obj, r.Scheme()); err != nil {
		return err
	}
	gvk, err := r.GroupVersionKindFor(obj)
	if err != nil {
		return err
	}
	obj.GetObjectKind().SetGroupVersionKind(gvk)
	rendered, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(rendered)
	key, hash := gvk.Kind+"/"+obj.GetNamespace()+"/"+obj.GetName(), hex.EncodeToString(sum[:])
	live := obj.DeepCopyObject().(client.Object)
	if err := r.Get(ctx, client.ObjectKeyFromObject(obj), live); err == nil && live.GetDeletionTimestamp() == nil &&
		(r.applied.same(key, hash) || live.GetAnnotations()[vocab.AnnotationApplied] == hash) {
		r.applied.m.Store(key, hash)
		return nil
	}
	annotations := maps.Clone(obj.GetAnnotations()) // the rendering may share the spec's map
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[vocab.AnnotationApplied] = hash
	obj.SetAnnotations(annotations)
	//nolint:staticcheck // server-side apply of typed objects
	if err := r.Patch(ctx, obj, client.Apply, client.FieldOwner(vocab.ManagerName), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	r.applied.m.Store(key, hash)
	return nil
}

// retainVolumes makes the volume claims follow spec.storage.retainPolicy: with Delete they
// are owned by the cluster (and go with it), with Retain they are not. A retained claim (a
// forced recovery kept it) is never owned: it outlives the cluster.
func (r *Reconciler) retainVolumes(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation) error {
	for _, pvc := range o.pvcs {
		if !owned(c, pvc, true) || pvc.DeletionTimestamp != nil {
			continue
		}
		del := c.Spec.Storage.RetainPolicy == v1alpha1.RetainPolicyDelete && pvc.Labels[v1alpha1.LabelRetained] == ""
		has, err := controllerutil.HasOwnerReference(pvc.OwnerReferences, c, r.Scheme())
		if err != nil || has == del {
			continue
		}
		patch := client.MergeFrom(pvc.DeepCopy())
		if del {
			err = controllerutil.SetOwnerReference(c, pvc, r.Scheme())
		} else {
			err = controllerutil.RemoveOwnerReference(c, pvc, r.Scheme())
		}
		if err != nil {
			return err
		}
		if err := r.Patch(ctx, pvc, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("updating the owner of volume claim %s: %w", pvc.Name, err)
		}
	}
	return nil
}

// recoveryMarks are the annotations a recovery from quorum loss marks a member with. They go
// once a quorum answers: a later loss must choose afresh.
var recoveryMarks = []string{vocab.AnnotationForceNewCluster, vocab.AnnotationRestoreSeed, vocab.AnnotationSurvivorSnapshot}

// marked: the object carries a recovery's mark, and a quorum answers.
func marked(o *observation, annotations map[string]string) bool {
	return o.Etcd.Linearizable && slices.ContainsFunc(recoveryMarks, func(k string) bool { return annotations[k] != "" })
}

// labelRole keeps the role label of a member Pod, which the PodDisruptionBudget selects on,
// and removes a recovery's mark from it.
func (r *Reconciler) labelRole(ctx context.Context, o *observation, member string, role v1alpha1.MemberRole) error {
	p := o.pods[member]
	if p == nil || p.DeletionTimestamp != nil || (p.Labels[v1alpha1.LabelRole] == string(role) && !marked(o, p.Annotations)) {
		return nil
	}
	patch := client.MergeFrom(p.DeepCopy())
	p.Labels[v1alpha1.LabelRole] = string(role)
	if marked(o, p.Annotations) {
		for _, k := range recoveryMarks {
			delete(p.Annotations, k)
		}
	}
	if err := r.Patch(ctx, p, patch); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// recordMember notes on a member's volume that the member joined, with its ID, its peer
// URL, and the version it last answered with.
func (r *Reconciler) recordMember(ctx context.Context, o *observation, member string, m planner.EtcdMember) error {
	pvc := o.pvcs[member]
	want := map[string]string{vocab.AnnotationMemberID: m.ID}
	if m.Answering && m.Leader != "" && m.Version != "" { // it served at that version
		want[vocab.AnnotationRanVersion] = m.Version
	}
	if len(m.PeerURLs) == 1 {
		want[vocab.AnnotationPeerURL] = m.PeerURLs[0]
	}
	unmark := pvc != nil && marked(o, pvc.Annotations)
	if pvc == nil || pvc.DeletionTimestamp != nil || (subset(want, pvc.Annotations) && !unmark) {
		return nil
	}
	patch := client.MergeFrom(pvc.DeepCopy())
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	maps.Copy(pvc.Annotations, want)
	if unmark {
		for _, k := range recoveryMarks {
			delete(pvc.Annotations, k)
		}
	}
	if err := r.Patch(ctx, pvc, patch); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}

// subset: every key of a has the same value in b.
func subset(a, b map[string]string) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
