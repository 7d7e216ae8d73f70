package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/internal/kubetest"
	"github.com/etcdplan/etcdplan/planner"
)

func TestManualApprovalHoldsThePlan(t *testing.T) {
	f := newFixture(t, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.UpdateStrategy.Approval = v1alpha1.ApprovalManual })
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 2 })
	c, _ := f.reconcile()
	require.Equal(t, v1alpha1.PlanAwaitingApproval, c.Status.Plan.Phase)
	require.Empty(t, f.etcd.Calls())

	id := c.Status.Plan.ID
	f.approve(id)
	f.reconcile()
	require.Equal(t, []string{"Remove 3"}, f.etcd.Calls())
}

// A step that keeps failing backs off, stalls past its deadline, and warns once.
func TestFailingStepBacksOffAndStallsOnce(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.etcd.Err = errFake
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 2 })
	var waits []time.Duration
	for i := 0; i < 4; i++ {
		_, res := f.reconcile()
		waits = append(waits, res.RequeueAfter)
		f.now = f.now.Add(time.Second)
	}
	require.Equal(t, []time.Duration{pollWaiting, 2 * pollWaiting, 4 * pollWaiting, 8 * pollWaiting}, waits)
	require.Empty(t, f.warnings(), "no warning before the deadline")

	f.now = f.now.Add(time.Minute)
	c, _ := f.reconcile()
	require.True(t, conditions.IsStalled(c))
	require.Equal(t, "ProgressDeadlineExceeded", conditions.GetReason(c, meta.StalledCondition))
	require.Contains(t, conditions.GetMessage(c, meta.StalledCondition), "fake failure")
	f.now = f.now.Add(time.Second)
	f.reconcile()
	require.Len(t, f.warnings(), 1, "one warning on the transition to Stalled")
}

// etcd refusing a change for now by its own rules (here its strict reconfiguration check)
// is waited on at the polling period: no backoff, no error count.
func TestEtcdRefusalForNowIsPolled(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.etcd.Err = fmt.Errorf("%w: etcdserver: unhealthy cluster", etcd.ErrNotYet)
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 2 })
	for i := 0; i < 4; i++ {
		c, res := f.reconcile()
		require.Equal(t, pollWaiting, res.RequeueAfter)
		require.Zero(t, c.Status.Plan.Progress[0].Errors)
		require.Contains(t, c.Status.Plan.Progress[0].Message, "unhealthy cluster")
		f.now = f.now.Add(time.Second)
	}
	require.Len(t, f.etcd.Calls(), 4, "asked again at every poll")
}

// A step whose effect never shows still reaches its deadline.
func TestAppliedStepThatNeverShowsStalls(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 2 })
	f.etcd.Lag = true // etcd drops the member but the view still lists it
	_, res := f.reconcile()
	require.Equal(t, pollApplied, res.RequeueAfter)
	require.Equal(t, []string{"Remove 3"}, f.etcd.Calls(), "not applied again in the same reconcile")
	f.now = f.now.Add(2 * time.Minute)
	c, _ := f.reconcile()
	require.True(t, conditions.IsStalled(c), "%+v", c.Status.Conditions)
}

// Steps whose effect shows at once follow each other in one reconcile, each on record
// before the next starts: the leader moves, the member goes, its Pod and claim are deleted.
func TestStepsThatShowAtOnceRunInOneReconcile(t *testing.T) {
	f := newFixture(t, 3, nil)
	writes := &statusWrites{Client: f.kube}
	f.r.Client = writes
	f.setView(func(v *planner.EtcdView) { v.LeaderID = "3" })
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 2 })
	c, _ := f.reconcile()
	require.Equal(t, []string{"MoveLeader 3 1", "Remove 3"}, f.etcd.Calls())
	require.Nil(t, c.Status.Plan)
	require.Equal(t, v1alpha1.PlanSucceeded, c.Status.History[0].Phase)
	require.Equal(t, "3/3", c.Status.History[0].Steps)
	require.Equal(t, []string{"0 applied", "1 applied", "2 applied", "none"}, writes.plans, "each step on record before the next")
	require.True(t, apierrors.IsNotFound(f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "demo-2"}, &corev1.Pod{})))
}

// A spec edited while a step runs ends the chain: the next step is planned for the spec as
// it is now, in the reconcile the edit brings, never taken on the spec this one read.
func TestAnEditEndsTheChain(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.setView(func(v *planner.EtcdView) { v.LeaderID = "3" })
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 2 })
	f.r.AfterEffect = func(_ string, step int) {
		if step == 0 {
			f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 3 }) // undone while the leader moves
		}
	}
	f.reconcile()
	require.Equal(t, []string{"MoveLeader 3 1"}, f.etcd.Calls(), "the member is not removed on the spec the reconcile began with")
	f.r.AfterEffect = nil
	c, _ := f.reconcile()
	require.Equal(t, []string{"MoveLeader 3 1"}, f.etcd.Calls(), "nor after: spec.replicas is 3 again")
	require.Nil(t, c.Status.Plan)
}

// statusWrites records the plan's current step as the server holds it after each status
// write, leaving out repeats.
type statusWrites struct {
	client.Client
	plans []string
}

func (s *statusWrites) Status() client.SubResourceWriter {
	return &recordingWriter{s.Client.Status(), s}
}

type recordingWriter struct {
	client.SubResourceWriter
	s *statusWrites
}

func (w *recordingWriter) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := w.SubResourceWriter.Patch(ctx, obj, p, opts...); err != nil {
		return err
	}
	c := &v1alpha1.EtcdCluster{}
	if err := w.s.Get(ctx, client.ObjectKeyFromObject(obj), c); err != nil {
		return err
	}
	state := "none"
	if rec := c.Status.Plan; rec != nil {
		state = fmt.Sprintf("%d", rec.Current)
		if progress(rec, int(rec.Current)).AppliedAt != nil {
			state += " applied"
		}
	}
	if n := len(w.s.plans); n == 0 || w.s.plans[n-1] != state {
		w.s.plans = append(w.s.plans, state)
	}
	return nil
}

// etcd lists a member the operator does not manage: nothing is planned or done.
func TestForeignMemberBlocks(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.setView(func(v *planner.EtcdView) {
		v.Members = append(v.Members, planner.EtcdMember{ID: "99", Name: "intruder", PeerURLs: []string{"http://10.88.9.9:2380"}, Answering: true})
	})
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 2 })
	c, _ := f.reconcile()
	require.True(t, conditions.IsStalled(c))
	require.Equal(t, string(plan.BlockForeignMember), conditions.GetReason(c, meta.StalledCondition))
	require.Contains(t, conditions.GetMessage(c, meta.StalledCondition), "etcdctl member remove 99")
	require.Empty(t, f.etcd.Calls())
}

// A recorded step whose precondition the fresh plan would not give is superseded.
func TestRecordedStepThatDiffersIsSuperseded(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 2 })
	c := f.cluster()
	p := planner.Plan(planner.Desired{Name: "demo", Namespace: "ns", Generation: c.Generation, Replicas: 2, Version: "3.6.16", ConfigHash: c.Spec.ConfigHash()},
		planner.Observed{FormatVersion: planner.ObservedFormatVersion})
	p.Steps = []plan.Step{{Action: plan.RemoveMember, Member: "demo-2", MemberID: "3", Precondition: plan.Precondition{Kind: plan.PreNone},
		Reason: "member demo-2 leaves (spec.replicas 2, 3 voters)"}}
	c.Status.Plan = newRecord(p, f.now)
	require.NoError(t, f.kube.Status().Update(context.Background(), c))

	f.etcd.Lag = true // the new plan stays to be read
	c, _ = f.reconcile()
	require.Equal(t, v1alpha1.PlanSuperseded, c.Status.History[0].Phase)
	require.Equal(t, plan.PreQuorumWithout, c.Status.Plan.Steps[0].Precondition.Kind)
}

var errFake = fakeError("fake failure")

type fakeError string

func (e fakeError) Error() string { return string(e) }

// A view not read through a quorum shows no plan done: a learner is still promoted once a
// quorum answers, and the cluster is not called Ready meanwhile.
func TestStaleViewFinishesNothing(t *testing.T) {
	f := newFixture(t, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 4 })
	c := f.cluster()
	require.NoError(t, f.kube.Create(context.Background(), kubetest.MemberPod(c, "demo-3")))
	f.setView(func(v *planner.EtcdView) {
		v.Members = append(v.Members, planner.EtcdMember{ID: "4", Name: "demo-3", PeerURLs: []string{vocab.PeerURL(c.Name, c.Namespace, "demo-3", false)},
			Learner: true, Answering: true, Leader: "1", Version: "3.6.16", RaftIndex: 10})
	})
	c, _ = f.reconcile()
	require.NotNil(t, c.Status.Plan, "a plan is made and waits for the learner to catch up")
	require.Equal(t, plan.PromoteLearner, c.Status.Plan.Steps[0].Action)
	require.Contains(t, c.Status.Plan.Progress[0].Message, "in sync with leader", "etcd refused the promotion")

	f.setView(func(v *planner.EtcdView) { v.Linearizable, v.Members[3].RaftIndex = false, 100 })
	f.now = f.now.Add(time.Second)
	c, _ = f.reconcile()
	require.NotNil(t, c.Status.Plan, "the stale view does not finish the plan")
	require.Empty(t, c.Status.History)
	require.False(t, conditions.IsReady(c))

	f.setView(func(v *planner.EtcdView) { v.Linearizable = true })
	f.reconcile()
	require.Equal(t, []string{"Promote 4", "Promote 4"}, f.etcd.Calls(), "refused, then promoted on a linearizable view only")
	v, err := f.etcd.View(context.Background())
	require.NoError(t, err)
	require.False(t, v.Members[3].Learner)
}

// A learner joins while a voter runs but does not answer clients yet (it publishes itself):
// the add goes to etcd, whose strict reconfiguration check refusing it for now is a wait,
// polled, that says what etcd waits for; once etcd allows it, the learner is added.
func TestLearnerJoinsWhileAVoterPublishes(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.setView(func(v *planner.EtcdView) {
		v.Members[2].Answering, v.Members[2].Leader, v.Members[2].Silent = false, "", true
	})
	f.etcd.Unconnected = true
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 4 })
	add := "AddLearner " + vocab.PeerURL("demo", "ns", "demo-3", false)
	for i := 0; i < 3; i++ {
		c, res := f.reconcile()
		require.Equal(t, plan.AddLearner, c.Status.Plan.Steps[0].Action)
		require.Equal(t, plan.PreQuorumHealthy, c.Status.Plan.Steps[0].Precondition.Kind)
		require.Equal(t, pollWaiting, res.RequeueAfter)
		require.Zero(t, c.Status.Plan.Progress[0].Errors, "a refusal for now is no failure")
		require.Contains(t, c.Status.Plan.Progress[0].Message, "not been connected to enough voters for the last 5 s")
		require.False(t, conditions.IsStalled(c))
		f.now = f.now.Add(time.Second)
	}
	require.Equal(t, []string{add, add, add}, f.etcd.Calls(), "asked again at every poll")

	f.etcd.Unconnected = false
	f.reconcile()
	require.Equal(t, add, f.etcd.Calls()[3])
	v, err := f.etcd.View(context.Background())
	require.NoError(t, err)
	require.Len(t, v.Members, 4)
	require.True(t, v.Members[3].Learner)
}

// An etcd leader that holds a peer as unconnected after one failed send refuses every add
// though every voter answers it: after unconnectedFor, leadership moves (once, with an
// Event) and the new leader adds the learner.
func TestLeaderThatRefusesAddsForLongHandsOver(t *testing.T) {
	f := newFixture(t, 3, nil)
	v, err := f.etcd.View(context.Background())
	require.NoError(t, err)
	stuck := v.LeaderID
	f.etcd.InactiveAt = stuck
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 4 })
	add := "AddLearner " + vocab.PeerURL("demo", "ns", "demo-3", false)
	for i := 0; i < 4; i++ { // 0, 6, 12, 18 s: a wait
		c, _ := f.reconcile()
		require.Contains(t, c.Status.Plan.Progress[0].Message, "not been connected to enough voters")
		f.now = f.now.Add(6 * time.Second)
	}
	require.Equal(t, []string{add, add, add, add}, f.etcd.Calls())
	f.reconcile() // 24 s
	calls := f.etcd.Calls()
	require.Len(t, calls, 6)
	require.True(t, strings.HasPrefix(calls[5], "MoveLeader "+stuck+" "), "leadership moves from the leader that refuses: %v", calls)
	f.reconcile()
	require.Equal(t, add, f.etcd.Calls()[6], "the new leader is asked")
	v, err = f.etcd.View(context.Background())
	require.NoError(t, err)
	require.NotEqual(t, stuck, v.LeaderID)
	require.Len(t, v.Members, 4)
	require.Equal(t, 1, strings.Count(strings.Join(f.etcd.Calls(), " "), "MoveLeader"), "once")
}

// A voter that is down holds the join up: its repair comes first, and no add reaches etcd.
func TestNoLearnerJoinsWhileAVoterIsDown(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.setView(func(v *planner.EtcdView) { v.Members[2].Answering, v.Members[2].Leader = false, "" })
	require.NoError(t, f.kube.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-2"}}))
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 4 })
	c, _ := f.reconcile()
	require.Equal(t, plan.StartMember, c.Status.Plan.Steps[0].Action)
	require.NotContains(t, strings.Join(f.etcd.Calls(), " "), "AddLearner")
}
