package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/resources"
)

// errWaiting means the step's effect is under way and the step must be applied again.
var errWaiting = errors.New("waiting")

// apply carries out one step. Every action is idempotent: applying it again after it took
// effect, or after the operator stopped midway, changes nothing more.
func (r *Reconciler) apply(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, s plan.Step) error {
	switch s.Action {
	case plan.CreateSeed:
		return r.startMember(ctx, c, o, s, true)
	case plan.StartMember:
		return r.startMember(ctx, c, o, s, false)
	case plan.AddLearner:
		if o.etcd == nil {
			return errors.New("no member answers")
		}
		_, err := o.etcd.AddLearner(ctx, resources.PeerURL(c, s.Member))
		return err
	case plan.PromoteLearner:
		return r.withID(o, s.Member, func(id uint64) error { return o.etcd.Promote(ctx, id) })
	case plan.TransferLeadership:
		return r.withID(o, s.Target, func(id uint64) error { return o.etcd.MoveLeader(ctx, s.Member, id) })
	case plan.RemoveMember:
		return r.withID(o, s.Member, func(id uint64) error { return o.etcd.Remove(ctx, id) })
	case plan.DeleteMember:
		if err := r.deletePod(ctx, o, s.Member); err != nil {
			return err
		}
		return r.deletePVC(ctx, o, s.Member)
	case plan.StopMember:
		return r.deletePod(ctx, o, s.Member)
	case plan.UpgradeMember, plan.RestartMember:
		return r.recreatePod(ctx, c, o, s)
	}
	return fmt.Errorf("unknown action %q", s.Action)
}

func (r *Reconciler) withID(o *observation, member string, f func(uint64) error) error {
	if o.etcd == nil {
		return errors.New("no member answers")
	}
	id, ok := o.memberID(member)
	if !ok {
		return fmt.Errorf("member %s is not in etcd's member list", member)
	}
	return f(id)
}

// startMember creates a member's volume claim and Pod. A Pod that failed for good is
// deleted first, so the member starts again on its volume.
func (r *Reconciler) startMember(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, s plan.Step, seed bool) error {
	if p := o.pods[s.Member]; p != nil {
		if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
			if err := r.deletePod(ctx, o, s.Member); err != nil {
				return err
			}
			return errWaiting
		}
		return nil
	}
	if c.Spec.Storage.Medium != v1alpha1.StorageMediumMemory {
		if err := r.ensurePVC(ctx, c, o, s.Member); err != nil {
			return err
		}
	}
	pod := resources.MemberPod(c, r.Images, r.memberSpec(c, o, s, seed))
	if err := controllerutil.SetControllerReference(c, pod, r.Scheme()); err != nil {
		return err
	}
	if err := r.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Pod %s: %w", s.Member, err)
	}
	return nil
}

// memberSpec says how a member starts: a seed alone; a joining member with the members
// etcd lists (itself included); a returning member expects to find its data.
func (r *Reconciler) memberSpec(c *v1alpha1.EtcdCluster, o *observation, s plan.Step, seed bool) resources.MemberSpec {
	ms := resources.MemberSpec{Name: s.Member, Version: s.Version, Seed: seed}
	if pvc := o.pvcs[s.Member]; pvc != nil && pvc.Annotations[resources.AnnotationMemberID] != "" {
		ms.ExpectData = true
	}
	if seed || o.Etcd == nil {
		ms.InitialCluster = []string{s.Member + "=" + resources.PeerURL(c, s.Member)}
		for _, rm := range o.Recorded {
			if rm.Name != s.Member && !seed {
				ms.InitialCluster = append(ms.InitialCluster, rm.Name+"="+resources.PeerURL(c, rm.Name))
			}
		}
		return ms
	}
	for _, m := range o.Etcd.Members {
		name := m.MemberName()
		ms.InitialCluster = append(ms.InitialCluster, name+"="+resources.PeerURL(c, name))
		if name == s.Member && m.Started() {
			ms.ExpectData = true
		}
	}
	return ms
}

func (r *Reconciler) ensurePVC(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, member string) error {
	if _, ok := o.pvcs[member]; ok {
		return nil
	}
	pvc := resources.MemberPVC(c, member)
	if c.Spec.Storage.RetainPolicy == v1alpha1.RetainPolicyDelete {
		if err := controllerutil.SetOwnerReference(c, pvc, r.Scheme()); err != nil {
			return err
		}
	}
	if err := r.Create(ctx, pvc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating volume claim %s: %w", member, err)
	}
	return nil
}

func (r *Reconciler) deletePod(ctx context.Context, o *observation, member string) error {
	p := o.pods[member]
	if p == nil || p.DeletionTimestamp != nil {
		return nil
	}
	err := r.Delete(ctx, p, client.Preconditions{UID: &p.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

func (r *Reconciler) deletePVC(ctx context.Context, o *observation, member string) error {
	pvc := o.pvcs[member]
	if pvc == nil || pvc.DeletionTimestamp != nil {
		return nil
	}
	err := r.Delete(ctx, pvc, client.Preconditions{UID: &pvc.UID})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// recreatePod replaces a member's Pod with one rendered from the current spec at the
// step's version, on the same volume. It waits for the old Pod to be gone within the step,
// so the planner never sees the member without a Pod halfway through.
func (r *Reconciler) recreatePod(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, s plan.Step) error {
	if p := o.pods[s.Member]; p != nil {
		if err := r.deletePod(ctx, o, s.Member); err != nil {
			return err
		}
		grace := time.Duration(30+10) * time.Second
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, grace, true, func(ctx context.Context) (bool, error) {
			err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: s.Member}, &corev1.Pod{})
			return apierrors.IsNotFound(err), nil
		})
		if err != nil {
			return fmt.Errorf("waiting for the old Pod of %s to go: %w", s.Member, err)
		}
		delete(o.pods, s.Member)
	}
	return r.startMember(ctx, c, o, s, false)
}
