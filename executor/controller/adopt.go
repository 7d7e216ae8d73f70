package controller

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/adoption"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/planner"
)

// The controller's side of an adoption (spec.bootstrap.join); package adoption reaches and
// records the source.

// observeSource records the source's members at its first answer (reading the view again
// with each reached under its name), notes when source members left, and runs the
// preflight's checks of spec until the cluster's own first member exists.
func (r *Reconciler) observeSource(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, view *planner.EtcdView, own map[string]string, cfg *tls.Config) (*planner.EtcdView, error) {
	if !adoption.Running(c) {
		return view, nil
	}
	if c.Status.Join == nil {
		var err error
		if view, err = adoption.FirstLook(ctx, o.etcd, c, own, view, cfg); err != nil {
			return nil, err
		}
	}
	if left := adoption.Track(c, view); left != nil {
		r.event(c, corev1.EventTypeNormal, v1alpha1.ReasonSourceRemoved,
			"every source member left (%s): stop their processes and wipe their data directories, then approve the plan's Acknowledge step", strings.Join(left, ", "))
	}
	o.Join = observe.Join(c)
	if !c.Status.Join.SourceLeft && len(o.members) == 0 {
		o.Join.Problems = adoption.Problems(c)
	}
	if members := handOverDue(c, view); members != nil {
		o.Join.Peers = o.etcd.ActivePeers(ctx, members)
	}
	return view, nil
}

// handOverDue returns the voters (name -> member ID) whose active peers the planner
// checks before leadership moves from a source member to one of the cluster's own: while
// a source member leads and one of the cluster's own is a voter; nil otherwise.
func handOverDue(c *v1alpha1.EtcdCluster, view *planner.EtcdView) map[string]string {
	j := c.Status.Join
	if j == nil || j.Phase != v1alpha1.JoinAdopting || !view.Linearizable ||
		!slices.ContainsFunc(j.Source, func(m v1alpha1.SourceMember) bool { return m.ID == view.LeaderID }) {
		return nil
	}
	voters, own := map[string]string{}, false
	for _, em := range view.Members {
		if !em.Learner && em.Name != "" {
			voters[em.Name] = em.ID
			own = own || !slices.ContainsFunc(j.Source, func(m v1alpha1.SourceMember) bool { return m.ID == em.ID })
		}
	}
	if !own {
		return nil
	}
	return voters
}

// adoptUsers makes the operator's users (its client certificates' common names, its own
// and the one it reaches the source with) in a source whose auth is on, as the source user
// spec.bootstrap.join's credentials name.
func (r *Reconciler) adoptUsers(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation) error {
	if o.etcd == nil {
		return errors.New("no member answers")
	}
	user, password, err := adoption.Credentials(ctx, r.APIReader, c)
	if err != nil {
		return err
	}
	cfg, _, err := adoption.TLS(ctx, r.APIReader, c, o.tls.Operator)
	if err != nil {
		return err
	}
	if cfg == nil || len(adoption.Users(cfg)) == 0 {
		return errors.New("the operator reaches the source without a client certificate, whose common name would be its etcd user")
	}
	if err := o.etcd.AdoptUsers(ctx, adoption.Users(cfg), user, password); err != nil {
		return err
	}
	c.Status.Join.UsersMade = true
	switched(c, true)
	return nil
}

// joinFailed adds why the source could not be read to what the preflight found.
func joinFailed(j *planner.Join, err error) *planner.Join {
	if j == nil {
		j = &planner.Join{}
	}
	if err != nil {
		j.Problems = append(j.Problems, err.Error())
	}
	return j
}

// sourceLastHeld: the plan's current step removes the last source member; it waits for
// approval.
func sourceLastHeld(rec *v1alpha1.PlanStatus) bool {
	s := currentStep(rec)
	return s != nil && s.Why == plan.WhySourceLast
}

// sourceLastMessage says what the held step does and how to let it run.
func sourceLastMessage(c *v1alpha1.EtcdCluster, rec *v1alpha1.PlanStatus) string {
	var eps []string
	if j := adoption.Spec(c); j != nil {
		eps = j.Endpoints
	}
	return fmt.Sprintf("plan %s removes the last source member %s: clients of the source's endpoints (%s) must use the cluster's Service %s.%s.svc from then on; %s",
		rec.ID, currentStep(rec).Member, strings.Join(eps, ", "), vocab.ClientService(c.Name), c.Namespace, approveHow(c, rec))
}

// stoppedHeld: the plan's current step waits for the user's word that the removed source
// members are stopped.
func stoppedHeld(rec *v1alpha1.PlanStatus) bool {
	s := currentStep(rec)
	return s != nil && s.Action == plan.Acknowledge
}

// stoppedMessage names the removed source members and what to do with them.
func stoppedMessage(c *v1alpha1.EtcdCluster, rec *v1alpha1.PlanStatus) string {
	var left []string
	if j := c.Status.Join; j != nil {
		for _, m := range j.Source {
			left = append(left, fmt.Sprintf("%s (peer URLs %s)", m.Name, strings.Join(m.PeerURLs, ", ")))
		}
	}
	return fmt.Sprintf("every source member left the cluster: %s; stop their processes and wipe their data directories "+
		"(a removed member that restarts keeps dialling its old peers), then %s", strings.Join(left, ", "), approveHow(c, rec))
}

// acknowledge records the user's approval of an Acknowledge step: the adoption is done.
func (r *Reconciler) acknowledge(c *v1alpha1.EtcdCluster, s plan.Step) error {
	j := c.Status.Join
	if s.Why != plan.WhySourceStopped || j == nil || j.Phase != v1alpha1.JoinSourceRemoved {
		return fmt.Errorf("nothing to acknowledge for %s", s.Why)
	}
	j.Phase = v1alpha1.JoinAdopted
	r.event(c, corev1.EventTypeNormal, v1alpha1.ReasonAdopted, "the adoption is done: the source members are acknowledged stopped, and the cluster is the operator's alone")
	return nil
}

// holdForAdoption keeps the finalizer that holds the EtcdCluster's deletion while its
// adoption can still be rolled back (no source member left), and drops it once it cannot,
// or the rollback is done. gone: the finalizer was the last thing keeping a deleted
// EtcdCluster, which goes now.
func (r *Reconciler) holdForAdoption(ctx context.Context, c *v1alpha1.EtcdCluster) (gone bool, err error) {
	want := rollbackPossible(c)
	if want == controllerutil.ContainsFinalizer(c, v1alpha1.FinalizerAdoption) {
		return false, nil
	}
	base := c.DeepCopy()
	if want {
		controllerutil.AddFinalizer(c, v1alpha1.FinalizerAdoption)
	} else {
		controllerutil.RemoveFinalizer(c, v1alpha1.FinalizerAdoption)
	}
	patch := client.MergeFromWithOptions(&v1alpha1.EtcdCluster{ObjectMeta: base.ObjectMeta}, client.MergeFromWithOptimisticLock{})
	obj := &v1alpha1.EtcdCluster{ObjectMeta: *c.ObjectMeta.DeepCopy()}
	if err := r.Patch(ctx, obj, patch); err != nil {
		return false, err
	}
	c.ResourceVersion = obj.ResourceVersion
	return c.DeletionTimestamp != nil && !want, nil
}

// rollbackPossible: an adoption is asked for or under way, no source member left, and no
// rollback finished.
func rollbackPossible(c *v1alpha1.EtcdCluster) bool {
	j := c.Status.Join
	switch {
	case j != nil && (j.Phase != v1alpha1.JoinAdopting || j.SourceLeft):
		return false
	case c.Status.Plan != nil && c.Status.Plan.Blocked != nil && c.Status.Plan.Blocked.Reason == plan.BlockAdoptionRolledBack:
		return false
	}
	return j != nil || adoption.Spec(c) != nil
}
