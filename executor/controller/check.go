package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/executor/status"
)

// checkData starts the check Pod of a member whose Pod is going (plan.CheckData), on that
// Pod's node: a volume attached there can be mounted there at once. A check Pod of the
// name left from a claim since replaced goes first (deleteChecks).
func (r *Reconciler) checkData(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, s plan.Step) error {
	claim, going := o.pvcs[s.Member], o.pods[s.Member]
	if claim == nil || !owned(c, claim, true) {
		return fmt.Errorf("member %s has no volume claim of this cluster to check", s.Member)
	}
	if going == nil || going.DeletionTimestamp == nil {
		return status.Waiting("the Pod of %s is not going: a new look plans anew", s.Member)
	}
	pod := resources.CheckPod(c, r.Images, claim, going)
	if err := controllerutil.SetControllerReference(c, pod, r.Scheme()); err != nil {
		return err
	}
	err := r.Create(ctx, pod)
	if apierrors.IsAlreadyExists(err) {
		return status.Waiting("waiting for the check Pod %s of an earlier volume claim of %s to go", pod.Name, s.Member)
	}
	if err != nil {
		return fmt.Errorf("creating check Pod %s: %w", pod.Name, err)
	}
	return nil
}

// deleteChecks deletes the check Pods whose reading no longer counts: their member runs
// etcd in a Pod that is not going (its own preflight check found the data), or has no
// volume claim, or one going or since replaced. A check Pod holds nothing; it goes by UID.
func (r *Reconciler) deleteChecks(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation) error {
	for i := range o.checks {
		p := &o.checks[i]
		member := p.Annotations[vocab.AnnotationMember]
		mp := o.pods[member]
		runs := mp != nil && mp.DeletionTimestamp == nil && observe.EtcdRunning(mp)
		if p.DeletionTimestamp != nil || !metav1.IsControlledBy(p, c) || observe.CheckOf(o.pvcs[member], p) && !runs {
			continue
		}
		err := r.Delete(ctx, p, client.Preconditions{UID: &p.UID})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return err
		}
	}
	return nil
}

// checkedLost: the member's check Pod, read around the cache, found the data of its claim
// as it is gone. A member whose old Pod went while its step waited is then not started
// again on the claim: the plan that follows restores the cluster instead.
func (r *Reconciler) checkedLost(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, member string) bool {
	claim, p := o.pvcs[member], &corev1.Pod{}
	if claim == nil || r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: resources.CheckPodName(member)}, p) != nil {
		return false
	}
	return metav1.IsControlledBy(p, c) && observe.CheckOf(claim, p) && observe.CheckFoundLost(p)
}
