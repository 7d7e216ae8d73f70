// Package controller is the EtcdCluster reconciler: each look observes the cluster (its
// Kubernetes objects and etcd), keeps its Services and labels in order, and plans; the
// recorded plan is settled against the fresh one, gated (blocked, approval), and its
// current step applied. Steps whose effect shows at once are chained in one reconcile, up
// to maxChained more, each on record before the next starts. Backups are reconciled in
// executor/backupctl.
package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/backupctl"
	"github.com/etcdplan/etcdplan/executor/certs"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/executor/schedule"
	"github.com/etcdplan/etcdplan/executor/status"
	"github.com/etcdplan/etcdplan/planner"
)

// Polling intervals, used only while a step waits on etcd: Kubernetes changes arrive as
// watch events.
const (
	pollWaiting = 200 * time.Millisecond
	pollApplied = 100 * time.Millisecond
	pollIdle    = 30 * time.Second
	// maxBackoff bounds the wait between attempts of a step that keeps failing.
	maxBackoff = 30 * time.Second
	// pollUnhealthy re-reads a cluster with no plan that is not ready yet: a member that
	// starts answering, or a voter that shows its data after a quorum loss, is no
	// Kubernetes event, and Ready should follow it within moments.
	pollUnhealthy = 500 * time.Millisecond
	// maxChained bounds the steps one reconcile takes after the first, settleGap is the
	// time between its looks for a step's effect (see settleLooks).
	maxChained = 8
	settleGap  = 20 * time.Millisecond
)

// Reconciler reconciles EtcdClusters.
type Reconciler struct {
	client.Client
	// APIReader reads around the cache, to see a Pod gone as soon as it is.
	APIReader client.Reader
	Recorder  record.EventRecorder
	Images    resources.Images
	// Dial connects to etcd members; etcd.Dial outside tests.
	Dial etcd.DialFunc
	// Open prepares the store a restore reads from; nil is store.Open.
	Open backupctl.OpenFunc
	// AfterEffect runs after a step's effect and before it is recorded (a failpoint in tests).
	AfterEffect func(planID string, step int)
	// Now is the clock.
	Now func() time.Time

	clients clients    // one etcd connection per cluster
	applied appliedSet // the Services and PDBs last applied, to apply only what changed
	// leaderMoved: cluster UID -> when leadership last moved for a member add etcd refused.
	leaderMoved sync.Map
}

// SetupWithManager registers the reconciler and its watches.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.EtcdCluster{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{},
			predicate.AnnotationChangedPredicate{}))).
		Owns(&corev1.Pod{}).
		Owns(&corev1.Service{}).
		Owns(&policyv1.PodDisruptionBudget{}).
		Watches(&corev1.PersistentVolumeClaim{}, enqueueByClusterLabel()).
		// A backup that succeeds may be what a cluster that lost every voter's data waits for.
		Watches(&v1alpha1.EtcdBackup{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: o.GetNamespace(), Name: o.(*v1alpha1.EtcdBackup).Spec.ClusterRef.Name}}}
		})).
		// StorageClasses are read from the cache (can a claim's class grow it?). Watching
		// them has that cache synced before the first reconcile instead of during it; a
		// change shows at each cluster's next look.
		Watches(&storagev1.StorageClass{}, handler.Funcs{}).
		// First come, first served: the priority queue puts the clusters listed at start
		// behind every requeued one, so a restarted operator with a few clusters mid-step
		// would leave the others unlooked-at for seconds, each of which may need a repair.
		WithOptions(controller.Options{MaxConcurrentReconciles: workers, UsePriorityQueue: ptr.To(false)}).
		Complete(r)
}

// Reconcile observes a cluster, plans, records the plan in status and applies its steps in
// order, chaining those whose effect shows at once.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (result reconcile.Result, retErr error) {
	c, err := r.read(ctx, req.NamespacedName)
	if c == nil {
		return reconcile.Result{}, err
	}
	if gone, err := r.holdForAdoption(ctx, c); gone || err != nil {
		return reconcile.Result{}, err
	}
	writer := status.NewWriter(r.Client, c)
	defer func() {
		if err := writer.Write(ctx, c); err != nil {
			retErr = err
		}
	}()
	// The status below describes this generation, except when the look fails before the
	// planner ran: then it keeps the generation it described.
	observed := c.Status.ObservedGeneration
	if !preflight(c) {
		return reconcile.Result{}, nil
	}
	o, fresh, err := r.look(ctx, c)
	var stuck *status.StepError
	if errors.As(err, &stuck) {
		// A Secret that cannot be used stalls the look; one on its way (cert-manager
		// issuing it) holds it.
		if stuck.Reason != "" {
			markStalled(c, v1alpha1.StalledReason(stuck.Reason), stuck.Msg)
			return reconcile.Result{RequeueAfter: pollIdle}, nil
		}
		markProgressing(c, v1alpha1.ReasonProgressing, stuck.Msg)
		return reconcile.Result{RequeueAfter: pollUnhealthy}, nil
	}
	if err != nil {
		c.Status.ObservedGeneration = observed
		return reconcile.Result{}, err
	}
	result, o, err = r.chain(ctx, c, writer, o, fresh)
	if err == nil {
		result = untilDefrag(result, o.defragNext, r.now())
	}
	return result, err
}

// read gets the cluster around the cache: the recorded plan must be the one the last
// reconcile wrote, and the status patch is computed against what this read returns. nil
// when the cluster is gone or going (owner references take its Pods and Services along).
func (r *Reconciler) read(ctx context.Context, key client.ObjectKey) (*v1alpha1.EtcdCluster, error) {
	c := &v1alpha1.EtcdCluster{}
	if err := r.APIReader.Get(ctx, key, c); err != nil {
		if apierrors.IsNotFound(err) {
			r.clients.forget(key)
		}
		return nil, client.IgnoreNotFound(err)
	}
	if c.DeletionTimestamp != nil && !controllerutil.ContainsFinalizer(c, v1alpha1.FinalizerAdoption) {
		r.clients.forget(key)
		return nil, nil
	}
	if c.DeletionTimestamp != nil && c.Spec.Bootstrap != nil {
		c.Spec.Bootstrap.Join = nil // deleting it rolls its adoption back, as removing spec.bootstrap.join does
	}
	return c, nil
}

// preflight records what status says of every generation, and whether the cluster may be
// looked at: not while suspended, nor with a spec this version cannot carry out.
func preflight(c *v1alpha1.EtcdCluster) bool {
	if v, ok := meta.ReconcileAnnotationValue(c.GetAnnotations()); ok {
		c.Status.LastHandledReconcileAt = v
	}
	c.Status.Selector = resources.Selector(c)
	c.Status.ObservedGeneration = c.Generation
	if c.Spec.Suspend {
		markSuspended(c)
		return false
	}
	if why := schedule.DefragInvalid(&c.Spec); why != "" {
		markStalled(c, v1alpha1.ReasonInvalidSchedule, why)
		return false
	}
	return true
}

// chain advances the plan, then goes on in this reconcile while the step it applied shows
// within moments (etcd's answer to a membership call, a deletion once the cache has its
// event) and the spec is as this reconcile read it: a fresh look takes the next step
// instead of a requeue. Status is written while the look goes on, and the next step waits
// for the write, so each step is on record before the next one starts. It returns the
// last look.
func (r *Reconciler) chain(ctx context.Context, c *v1alpha1.EtcdCluster, writer *status.Writer, o *observation, fresh plan.Plan) (reconcile.Result, *observation, error) {
	result, err := r.advance(ctx, c, o, fresh)
	for n := 0; err == nil && n < maxChained && settleLooks(o.applied) > 0; n++ {
		written := writer.Send(ctx, c)
		next, fresh, done := r.lookUntilDone(ctx, c, settleLooks(o.applied))
		if err := written(); err != nil {
			return reconcile.Result{}, o, err
		}
		if !done || r.specChanged(ctx, c) {
			break // the requeue looks again; an edit brings its own reconcile
		}
		o = next
		result, err = r.advance(ctx, c, o, fresh)
	}
	return result, o, err
}

// specChanged: the spec was edited since this reconcile read it. A chain stops there, so
// the next step is planned for the spec as it is now: an edit made while a step ran (a
// rollback asked, a change undone) is never outrun by the steps chained after it.
func (r *Reconciler) specChanged(ctx context.Context, c *v1alpha1.EtcdCluster) bool {
	now := &v1alpha1.EtcdCluster{}
	return r.Get(ctx, client.ObjectKeyFromObject(c), now) == nil && now.Generation != c.Generation
}

// untilDefrag has the reconcile back when the defrag schedule next comes, if sooner.
func untilDefrag(result reconcile.Result, next, now time.Time) reconcile.Result {
	if next.IsZero() {
		return result
	}
	if until := next.Sub(now) + 10*time.Millisecond; result.RequeueAfter == 0 || until < result.RequeueAfter {
		result.RequeueAfter = until
	}
	return result
}

// settleLooks is how many looks an applied step's effect gets to show in before the
// reconcile ends: one when etcd's answer says it is in place; a few, settleGap apart, for
// the cache to have the watch event; none for effects that take seconds.
func settleLooks(s plan.Step) int {
	switch s.Shows() {
	case plan.ShowsAtOnce:
		return 1
	case plan.ShowsInCache:
		return 4
	}
	return 0
}

// lookUntilDone looks up to n times, settleGap apart, until a look shows the recorded
// plan's current step done (the plan goes on as recorded, is finished, or is superseded
// after it). A step is never applied again in the reconcile that applied it.
func (r *Reconciler) lookUntilDone(ctx context.Context, c *v1alpha1.EtcdCluster, n int) (*observation, plan.Plan, bool) {
	rec := c.Status.Plan
	for i := 0; i < n && rec != nil && rec.Blocked == nil; i++ {
		if i > 0 && sleep(ctx, settleGap) != nil {
			break
		}
		o, fresh, err := r.look(ctx, c)
		if err != nil {
			break
		}
		if k, _ := shownUpTo(rec, o, fresh); k > int(rec.Current) && !staleMembership(o, rec.Steps[rec.Current:k]) {
			return o, fresh, true
		}
	}
	return nil, plan.Plan{}, false
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// look observes the cluster, keeps its objects in order, records what it saw and plans.
func (r *Reconciler) look(ctx context.Context, c *v1alpha1.EtcdCluster) (*observation, plan.Plan, error) {
	o, err := r.observe(ctx, c)
	if err != nil {
		return nil, plan.Plan{}, err
	}
	o.desired = observe.Desired(c) // from the spec alone
	if err := r.housekeep(ctx, c, o); err != nil {
		return nil, plan.Plan{}, err
	}
	recordObserved(c, o)
	markCertificates(c, r.now())
	r.recoveryFinished(c, o, r.now())
	o.defragNext = r.scheduleDefrag(c, o)
	fresh := planner.Plan(o.desired, o.Observed)
	c.Status.Warnings = fresh.Warnings
	return o, fresh, nil
}

func (r *Reconciler) now() time.Time { return status.Now(r.Now) }

func (r *Reconciler) certs() certs.Keeper { return certs.Keeper{Client: r.Client, Reader: r.APIReader} }

// advance brings the recorded plan in line with the fresh one, then applies the current
// step when the gate lets it run.
func (r *Reconciler) advance(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, fresh plan.Plan) (reconcile.Result, error) {
	now := r.now()
	if r.settle(c, o, fresh, now) {
		return r.awaitOutcome(c), nil
	}
	if st := &c.Status; st.Plan == nil && (len(fresh.Steps) > 0 || fresh.Blocked != nil) {
		st.Plan = newRecord(fresh, now)
		if fresh.Blocked == nil {
			r.event(c, corev1.EventTypeNormal, v1alpha1.ReasonPlanCreated, "plan %s: %d steps", fresh.ID, len(fresh.Steps))
		}
	}
	if result, held := r.gate(c, o, now); held {
		return result, nil
	}
	rec := c.Status.Plan
	rec.Phase = v1alpha1.PlanRunning
	return r.runStep(ctx, c, o, rec, now)
}

// settle finishes the recorded steps this look shows done, and the recorded plan when it
// is done, superseded by the fresh one, or a blocker the fresh plan no longer gives. It
// reports whether the plan is held: a fresh plan differs while the current step's recovery
// is under way, and nothing replaces it before its outcome is known (recoveryOutcome).
func (r *Reconciler) settle(c *v1alpha1.EtcdCluster, o *observation, fresh plan.Plan, now time.Time) bool {
	st := &c.Status
	rec := st.Plan
	switch {
	case rec == nil:
	case rec.Blocked != nil:
		if fresh.Blocked == nil || *fresh.Blocked != *rec.Blocked {
			finish(st, rec, v1alpha1.PlanBlocked, "", now)
		}
	default:
		k, ok := shownUpTo(rec, o, fresh)
		if ok && staleMembership(o, rec.Steps[rec.Current:k]) {
			// A member list not read through a quorum proves no membership change done: the
			// planner makes none on it, so a plan without them looks finished. The current
			// step waits; Check refuses membership changes on such a view.
			return false
		}
		if !ok && k == int(rec.Current) {
			switch recoveryOutcome(c, o, rec, now) {
			case recoveryUnderWay:
				return true
			case recoveryTookEffect:
				k++ // the rest of the plan is what the fresh one supersedes
			}
		}
		for i := int(rec.Current); i < k; i++ {
			r.stepFinished(c, rec, i, now)
		}
		rec.Current = int32(max(k, int(rec.Current)))
		switch {
		case !ok:
			why := supersededWhy(c, rec)
			r.event(c, corev1.EventTypeNormal, v1alpha1.ReasonPlanSuperseded, "plan %s superseded: %s", rec.ID, why)
			finish(st, rec, v1alpha1.PlanSuperseded, why, now)
		case k == len(rec.Steps):
			finish(st, rec, v1alpha1.PlanSucceeded, "", now)
		}
	}
	return false
}

// gate says whether the recorded plan's current step is held: no plan (converged), a
// blocked one, a recovery from quorum loss or a plan awaiting approval. It sets the
// conditions of each, and the result to requeue with.
func (r *Reconciler) gate(c *v1alpha1.EtcdCluster, o *observation, now time.Time) (reconcile.Result, bool) {
	rec := c.Status.Plan
	approved := rec != nil && c.Annotations[v1alpha1.AnnotationApprove] == rec.ID
	switch {
	case rec == nil:
		markConverged(c, o, now)
		if conditions.IsReady(c) {
			return reconcile.Result{RequeueAfter: pollIdle}, true
		}
		return reconcile.Result{RequeueAfter: pollUnhealthy}, true
	case rec.Blocked != nil:
		markBlocked(c, rec.Blocked)
		return reconcile.Result{RequeueAfter: pollIdle}, true
	case !approved && recoveryHeld(c, rec):
		rec.Phase = v1alpha1.PlanAwaitingApproval
		rec.Summary = summary(rec)
		msg := recoveryMessage(c, o, rec)
		r.stalled(c, conditions.IsStalled(c), v1alpha1.StalledReason(plan.BlockQuorumLost), msg)
		return reconcile.Result{RequeueAfter: pollIdle}, true
	case !approved && heldMessage(c, rec) != "":
		rec.Phase = v1alpha1.PlanAwaitingApproval
		rec.Summary = summary(rec)
		markProgressing(c, v1alpha1.ReasonAwaitingApproval, heldMessage(c, rec))
		return reconcile.Result{}, true
	case !approved && c.Spec.UpdateStrategy.Approval == v1alpha1.ApprovalManual:
		rec.Phase = v1alpha1.PlanAwaitingApproval
		rec.Summary = summary(rec)
		msg := fmt.Sprintf("plan %s (%d steps) awaits approval: kubectl etcd approve %s --plan %s", rec.ID, len(rec.Steps), c.Name, rec.ID)
		markProgressing(c, v1alpha1.ReasonAwaitingApproval, msg)
		return reconcile.Result{}, true
	}
	return reconcile.Result{}, false
}

// heldMessage says why the plan's current step waits for approval whatever
// spec.updateStrategy says, and how to give it; "" when it does not wait.
func heldMessage(c *v1alpha1.EtcdCluster, rec *v1alpha1.PlanStatus) string {
	switch {
	case authHeld(rec):
		return authMessage(c, rec)
	case plainTextHeld(rec):
		return plainTextMessage(c, rec)
	case sourceLastHeld(rec):
		return sourceLastMessage(c, rec)
	case stoppedHeld(rec):
		return stoppedMessage(c, rec)
	}
	return ""
}

// approveHow says how to approve the recorded plan.
func approveHow(c *v1alpha1.EtcdCluster, rec *v1alpha1.PlanStatus) string {
	return fmt.Sprintf("approve: kubectl etcd approve %s --plan %s (or set the annotation %s: %s)", c.Name, rec.ID, v1alpha1.AnnotationApprove, rec.ID)
}

// staleMembership: steps show in etcd's membership or leader, and this look at the cluster
// has no member list read through a quorum to show them done.
func staleMembership(o *observation, steps []plan.Step) bool {
	if o.Etcd != nil && o.Etcd.Linearizable {
		return false
	}
	return slices.ContainsFunc(steps, func(s plan.Step) bool { return s.Action.ShowsInMembership() })
}

// backoff is how long to wait after the n-th failed attempt of a step in a row.
func backoff(n int32) time.Duration {
	d := pollWaiting
	for i := int32(1); i < n && d < maxBackoff; i++ {
		d *= 2
	}
	return min(d, maxBackoff)
}

// runStep applies the current step once its precondition holds, within its deadline.
// The deadline holds on every path: a step that waits, fails, or whose effect does not
// show, stalls the cluster once it passes.
func (r *Reconciler) runStep(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, rec *v1alpha1.PlanStatus, now time.Time) (reconcile.Result, error) {
	i := int(rec.Current)
	s := rec.Steps[i]
	pr := progress(rec, i)
	if pr.StartedAt == nil {
		deadline := now.Add(time.Duration(c.Spec.UpdateStrategy.ProgressDeadlineSeconds) * time.Second)
		pr.State, pr.StartedAt, pr.Deadline = v1alpha1.StepRunning, v1alpha1.At(now), &metav1.Time{Time: deadline}
		r.event(c, corev1.EventTypeNormal, v1alpha1.ReasonStepStarted, "step %d/%d %s %s: %s", i+1, len(rec.Steps), s.Action, s.Subject(), s.Reason)
	}
	rec.Summary = summary(rec)
	wasStalled := conditions.IsStalled(c)
	msg := fmt.Sprintf("plan %s step %d/%d: %s %s", rec.ID, i+1, len(rec.Steps), s.Action, s.Subject())
	markProgressing(c, v1alpha1.ReasonProgressing, msg)

	result := reconcile.Result{RequeueAfter: pollWaiting}
	reason := v1alpha1.ReasonProgressDeadlineExceeded
	// The planner is entered again: Check judges the recorded step, made on an earlier look
	// or by an earlier operator version, by the safety rules of the present on this look,
	// whatever the plan it came from.
	ok, why := planner.Check(o.desired, s, o.Observed)
	if ok {
		from := c.Status.ClusterID // a restore forgets it
		err := r.apply(ctx, c, o, s)
		if r.AfterEffect != nil {
			r.AfterEffect(rec.ID, i)
		}
		var se *status.StepError
		switch {
		case err == nil:
			r.recoveryStarted(c, rec.ID, s, from, now)
			o.applied = s
			why, pr.Errors = "applied; waiting for the cluster to show it", 0
			if pr.AppliedAt == nil {
				pr.AppliedAt = v1alpha1.At(now)
				stepWait.WithLabelValues(string(s.Action), "precondition").Observe(now.Sub(pr.StartedAt.Time).Seconds())
			}
			result.RequeueAfter = pollApplied
			stepsTotal.WithLabelValues(string(s.Action), "applied").Inc()
		case errors.As(err, &se):
			why = se.Msg
			if se.Reason != "" {
				reason = v1alpha1.StalledReason(se.Reason) // a step's effect stops only for a StalledReason
			}
		default:
			why = err.Error()
			pr.Errors++
			result.RequeueAfter = backoff(pr.Errors)
			stepsTotal.WithLabelValues(string(s.Action), "error").Inc()
		}
	}
	pr.Message = why
	if now.After(pr.Deadline.Time) {
		pr.State = v1alpha1.StepFailed
		if s.Action == plan.PromoteLearner && s.MemberID != "" && !slices.Contains(c.Status.StalledLearners, s.MemberID) {
			c.Status.StalledLearners = append(c.Status.StalledLearners, s.MemberID) // the next plan replaces it
		}
		r.stalled(c, wasStalled, reason, fmt.Sprintf("step %d/%d %s %s did not finish within %ds: %s. %s", i+1, len(rec.Steps), s.Action, s.Subject(),
			c.Spec.UpdateStrategy.ProgressDeadlineSeconds, why, hint(s, reason)))
	} else if left := pr.Deadline.Sub(now); result.RequeueAfter > left {
		result.RequeueAfter = left + 10*time.Millisecond // be there when the deadline passes
	}
	return result, nil
}

// stepFinished records a step whose effect the cluster now shows.
func (r *Reconciler) stepFinished(c *v1alpha1.EtcdCluster, rec *v1alpha1.PlanStatus, i int, now time.Time) {
	pr := progress(rec, i)
	s := rec.Steps[i]
	pr.State, pr.FinishedAt, pr.Message = v1alpha1.StepSucceeded, v1alpha1.At(now), ""
	if pr.StartedAt != nil {
		stepDuration.WithLabelValues(string(s.Action)).Observe(now.Sub(pr.StartedAt.Time).Seconds())
	}
	if pr.AppliedAt != nil {
		stepWait.WithLabelValues(string(s.Action), "effect").Observe(now.Sub(pr.AppliedAt.Time).Seconds())
	}
	stepsTotal.WithLabelValues(string(s.Action), "succeeded").Inc()
	r.event(c, corev1.EventTypeNormal, v1alpha1.ReasonStepSucceeded, "step %d/%d %s %s succeeded", i+1, len(rec.Steps), s.Action, s.Subject())
}

func (r *Reconciler) event(c *v1alpha1.EtcdCluster, kind, reason, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(c, kind, reason, format, args...)
	}
	log.Log.WithValues("etcdcluster", c.Namespace+"/"+c.Name).Info(fmt.Sprintf(format, args...), "reason", reason)
}
