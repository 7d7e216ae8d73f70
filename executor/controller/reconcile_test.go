package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/conditions/check"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/etcd/etcdfake"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/planner"
)

// fixture is one cluster "demo" of running members, a fake etcd behind them, a fake
// Kubernetes API and a clock the test moves.
type fixture struct {
	t      *testing.T
	r      *Reconciler
	kube   client.Client
	etcd   *etcdfake.Cluster
	events *record.FakeRecorder
	now    time.Time
	// listErr, when set, fails every List, as an API server that does not answer.
	listErr error
}

func newFixture(t *testing.T, members int, edit func(c *v1alpha1.EtcdCluster)) *fixture {
	t.Helper()
	c := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns", UID: "uid-demo", Generation: 1}}
	c.Spec.Replicas, c.Spec.Version = int32(members), "3.6.16"
	c.Spec.Storage.Size, c.Spec.Storage.RetainPolicy = resource.MustParse("1Gi"), v1alpha1.RetainPolicyRetain
	c.Spec.UpdateStrategy = v1alpha1.UpdateStrategy{Approval: v1alpha1.ApprovalAutomatic, ProgressDeadlineSeconds: 60}
	c.Status.ClusterID, c.Status.NextOrdinal = "c1", int32(members)
	if edit != nil {
		edit(c)
	}
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	objs := []client.Object{c}
	view := &planner.EtcdView{ClusterID: "c1", Linearizable: true, LeaderID: "1"}
	for i := 0; i < members; i++ {
		name, id := vocab.MemberName("demo", i), strconv.Itoa(i+1)
		objs = append(objs, memberPod(c, name), memberPVC(c, name, id))
		view.Members = append(view.Members, planner.EtcdMember{ID: id, Name: name, PeerURLs: []string{vocab.PeerURL(c.Name, c.Namespace, name)},
			Answering: true, Leader: "1", Version: "3.6.16", RaftIndex: 100})
	}
	f := &fixture{t: t, etcd: etcdfake.New(view), events: record.NewFakeRecorder(100), now: time.Unix(1_800_000_000, 0)}
	list := func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
		if f.listErr != nil {
			return f.listErr
		}
		return c.List(ctx, l, opts...)
	}
	f.kube = fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&v1alpha1.EtcdCluster{}, &v1alpha1.EtcdBackup{}, &v1alpha1.EtcdBackupSchedule{}).
		WithInterceptorFuncs(interceptor.Funcs{Create: createAtGeneration1, SubResourcePatch: checkedStatusPatch(t), List: list}).Build()
	f.r = &Reconciler{Client: f.kube, APIReader: f.kube, Recorder: f.events, Dial: f.etcd.Dial, Now: func() time.Time { return f.now }}
	return f
}

// createAtGeneration1 creates objects as the API server does: at generation 1.
func createAtGeneration1(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
	if obj.GetGeneration() == 0 {
		obj.SetGeneration(1)
	}
	return c.Create(ctx, obj, opts...)
}

// checkedStatusPatch runs Flux's conditions check (fluxcd/pkg/runtime conditions/check, the
// rules Flux's own controllers are tested with) on every status the operator writes: Ready is
// always there, False while Reconciling or Stalled, never both of those, and observedGeneration
// never ahead of the generation.
func checkedStatusPatch(t *testing.T) func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	return func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
		if err := c.SubResource(sub).Patch(ctx, obj, p, opts...); err != nil || sub != "status" {
			return err
		}
		// Writes may run on another goroutine: report with Errorf, and fail the write.
		getter, ok := obj.(conditions.Getter)
		if !ok {
			t.Errorf("%T has no conditions", obj)
			return fmt.Errorf("%T has no conditions", obj)
		}
		chk := check.NewChecker(c, &check.Conditions{NegativePolarity: []string{meta.StalledCondition, meta.ReconcilingCondition}})
		chk.DisableFetch = true
		if err := errors.Join(chk.Check(ctx, getter)); err != nil {
			t.Errorf("status of %T %s fails Flux's conditions check: %v\nconditions: %v", obj, obj.GetName(), err, getter.GetConditions())
			return err
		}
		return nil
	}
}

func memberPod(c *v1alpha1.EtcdCluster, name string) *corev1.Pod {
	p := resources.MemberPod(c, resources.Images{EtcdRepository: "etcd", Operator: "op"}, resources.MemberSpec{Name: name, Version: c.Spec.Version})
	p.Labels[v1alpha1.LabelRole] = string(v1alpha1.RoleVoter)
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "EtcdCluster", Name: c.Name, UID: c.UID, Controller: ptr.To(true)}}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.88.0." + strings.TrimPrefix(name, "demo-"),
		ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	return p
}

func memberPVC(c *v1alpha1.EtcdCluster, name, id string) *corev1.PersistentVolumeClaim {
	pvc := resources.MemberPVC(c, name)
	pvc.Annotations = map[string]string{vocab.AnnotationMemberID: id}
	pvc.Status.Phase = corev1.ClaimBound
	return pvc
}

// reconcile runs one reconcile and returns the cluster as it was written.
func (f *fixture) reconcile() (*v1alpha1.EtcdCluster, reconcile.Result) {
	f.t.Helper()
	res, err := f.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "demo"}})
	require.NoError(f.t, err)
	return f.cluster(), res
}

func (f *fixture) cluster() *v1alpha1.EtcdCluster {
	c := &v1alpha1.EtcdCluster{}
	require.NoError(f.t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "demo"}, c))
	return c
}

func (f *fixture) update(edit func(c *v1alpha1.EtcdCluster)) {
	c := f.cluster()
	edit(c)
	c.Generation++
	require.NoError(f.t, f.kube.Update(context.Background(), c))
}

// approve sets the approval annotation to the plan ID, as kubectl etcd approve does.
func (f *fixture) approve(id string) {
	f.update(func(c *v1alpha1.EtcdCluster) { c.Annotations = map[string]string{v1alpha1.AnnotationApprove: id} })
}

func (f *fixture) setView(edit func(v *planner.EtcdView)) {
	v, err := f.etcd.View(context.Background())
	require.NoError(f.t, err)
	edit(v)
	f.etcd.SetView(v)
}

// learnerAdded adds to etcd's view member demo-3 (ID 4), added as a learner and not started.
func (f *fixture) learnerAdded(v *planner.EtcdView) {
	v.Members = append(v.Members, planner.EtcdMember{ID: "4", PeerURLs: []string{vocab.PeerURL(f.cluster().Name, f.cluster().Namespace, "demo-3")}, Learner: true})
}

func (f *fixture) warnings() []string {
	var out []string
	for _, e := range f.drain() {
		if strings.HasPrefix(e, corev1.EventTypeWarning) {
			out = append(out, e)
		}
	}
	return out
}

// drain returns the events recorded since the last drain, as "Type Reason message".
func (f *fixture) drain() []string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func TestConvergedClusterIsReady(t *testing.T) {
	f := newFixture(t, 3, nil)
	c, _ := f.reconcile()
	require.True(t, conditions.IsReady(c), "%+v", c.Status.Conditions)
	require.Nil(t, c.Status.Plan)
	require.Equal(t, int32(3), c.Status.ReadyReplicas)
	require.Empty(t, f.etcd.Calls())
}

// An alarm is not a member down: members with a NOSPACE alarm whose data does not fit
// under the quota still answer and count as ready, and the cluster stalls saying so.
func TestAlarmIsNotDown(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.setView(func(v *planner.EtcdView) {
		v.Alarms, v.HistoryCompacted = []planner.Alarm{{MemberID: "2", Type: planner.AlarmNoSpace}}, true
		for i := range v.Members {
			v.Members[i].DBSize, v.Members[i].DBInUse, v.Members[i].Quota = 16<<20, 16<<20, 16<<20
		}
	})
	c, _ := f.reconcile()
	require.Equal(t, []string{"NOSPACE on member 2"}, c.Status.Alarms)
	require.Equal(t, int32(3), c.Status.ReadyReplicas, "members with an alarm still answer")
	require.Equal(t, string(plan.BlockQuotaTooSmall), conditions.GetReason(c, meta.StalledCondition))
	require.Empty(t, f.etcd.Calls())
}

// A member's claim records the version it answered with; a member that stops answering
// (a failed upgrade) keeps it, in status too, so its data's version is still known.
func TestClaimRecordsTheVersionAMemberAnswered(t *testing.T) {
	f := newFixture(t, 3, nil)
	c, _ := f.reconcile()
	for _, m := range c.Status.Members {
		var pvc corev1.PersistentVolumeClaim
		require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: m.Name}, &pvc))
		require.Equal(t, "3.6.16", pvc.Annotations[vocab.AnnotationRanVersion])
	}
	f.setView(func(v *planner.EtcdView) {
		v.Members[1].Answering, v.Members[1].Leader, v.Members[1].Version = false, "", ""
	})
	c, _ = f.reconcile()
	require.Equal(t, "3.6.16", c.Status.Members[1].Version, "the version it last answered with")
	require.False(t, c.Status.Members[1].Healthy)
}

// After the last member of an upgrade, the cluster is Ready only once etcd's cluster version
// moved to the new minor.
func TestReadyWaitsForTheClusterVersion(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.setView(func(v *planner.EtcdView) { v.ClusterVersion = "3.5.0" })
	c, res := f.reconcile()
	require.False(t, conditions.IsReady(c))
	require.Equal(t, "ClusterVersionPending", conditions.GetReason(c, meta.ReadyCondition))
	require.Equal(t, pollUnhealthy, res.RequeueAfter)
	f.setView(func(v *planner.EtcdView) { v.ClusterVersion = "3.6.0" })
	c, _ = f.reconcile()
	require.True(t, conditions.IsReady(c), "%+v", c.Status.Conditions)
}

// Scale-down removes by member ID, and only on a linearizable member list: one member's
// view plans no removal at all, and says the cluster cannot be read through a quorum.
func TestRemoveActsByIDOnALinearizableList(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.setView(func(v *planner.EtcdView) { v.Linearizable = false })
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 2 })
	c, _ := f.reconcile()
	if c.Status.Plan != nil {
		require.Empty(t, c.Status.Plan.Steps, "no removal planned on one member's view")
	}
	require.Empty(t, f.etcd.Calls(), "no removal on one member's view")
	require.False(t, conditions.IsReady(c))

	f.setView(func(v *planner.EtcdView) { v.Linearizable = true })
	f.etcd.Lag = true // the plan stays to be read
	c, _ = f.reconcile()
	require.Equal(t, []string{"Remove 3"}, f.etcd.Calls())
	require.Equal(t, "3", c.Status.Plan.Steps[0].MemberID)
}

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

// A voter whose Pod went gets a new Pod that carries the voter role from the start: the
// client Service selects it as soon as it is ready, with no patch after it runs. A learner's
// Pod starts as a learner.
func TestNewPodCarriesItsRole(t *testing.T) {
	f := newFixture(t, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 4 })
	require.NoError(t, f.kube.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-1"}}))
	f.setView(func(v *planner.EtcdView) {
		v.Members[1].Answering, v.Members[1].Leader = false, ""
		f.learnerAdded(v)
	})
	for _, want := range []struct {
		name string
		role v1alpha1.MemberRole
	}{{"demo-1", v1alpha1.RoleVoter}, {"demo-3", v1alpha1.RoleLearner}} {
		f.reconcile() // creates the Pod; a later reconcile's housekeeping would mend its label
		p := &corev1.Pod{}
		require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: want.name}, p), "the Pod of %s is created", want.name)
		require.Equal(t, string(want.role), p.Labels[v1alpha1.LabelRole], want.name)
		f.now = f.now.Add(time.Second)
	}
}

// A restarted operator does not apply again the Services and the PodDisruptionBudget that
// are as it would render them: the hash of the last rendering applied is on each.
func TestRestartedOperatorSkipsWhatIsApplied(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.reconcile()
	c := f.cluster()
	objs := []client.Object{resources.Headless(c), resources.Client(c), resources.PDB(c, 3)}
	versions := map[string]string{}
	for _, o := range objs {
		require.NoError(t, f.kube.Get(context.Background(), client.ObjectKeyFromObject(o), o))
		require.NotEmpty(t, o.GetAnnotations()[vocab.AnnotationApplied])
		versions[o.GetName()] = o.GetResourceVersion()
	}
	counted := &applyCounter{Client: f.kube}
	f.r = &Reconciler{Client: counted, APIReader: f.kube, Recorder: f.events, Dial: f.etcd.Dial, Now: f.r.Now} // nothing applied in memory
	f.reconcile()
	require.Zero(t, counted.applies, "nothing is applied again")
	for _, o := range objs {
		require.NoError(t, f.kube.Get(context.Background(), client.ObjectKeyFromObject(o), o))
		require.Equal(t, versions[o.GetName()], o.GetResourceVersion(), "%s is not written again", o.GetName())
	}
}

// applyCounter counts server-side applies.
type applyCounter struct {
	client.Client
	applies int
}

func (a *applyCounter) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	if p.Type() == types.ApplyPatchType {
		a.applies++
	}
	return a.Client.Patch(ctx, obj, p, opts...)
}

// A new member's claim of a storage class that binds at once is bound before its Pod is
// created: a Pod created first would be unschedulable until the scheduler retries it.
func TestPodWaitsForItsClaimToBind(t *testing.T) {
	f := newFixture(t, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas, c.Spec.Storage.StorageClassName = 4, "fast" })
	require.NoError(t, f.kube.Create(context.Background(), &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"},
		Provisioner: "example.com/fast", VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate)}))
	f.setView(f.learnerAdded)
	c, _ := f.reconcile()
	require.Equal(t, plan.StartMember, c.Status.Plan.Steps[0].Action)
	require.Contains(t, c.Status.Plan.Progress[0].Message, "to be bound")
	pod := &corev1.Pod{}
	require.True(t, apierrors.IsNotFound(f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "demo-3"}, pod)), "no Pod before the claim binds")

	pvc := &corev1.PersistentVolumeClaim{}
	require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "demo-3"}, pvc))
	pvc.Status.Phase = corev1.ClaimBound
	require.NoError(t, f.kube.Status().Update(context.Background(), pvc))
	f.now = f.now.Add(time.Second)
	f.reconcile()
	require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "demo-3"}, pod), "the Pod once the claim is bound")
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

// A NOSPACE alarm: the first plan compacts, and is done once the history shows compacted
// though the plan that follows (what to defragment) is one it could not foresee; the next
// defragments the followers, moves leadership, defragments the old leader and disarms.
func TestNospaceCompactsDefragmentsAndDisarms(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.setView(func(v *planner.EtcdView) {
		v.Alarms = []planner.Alarm{{MemberID: "2", Type: planner.AlarmNoSpace}}
		for i := range v.Members {
			v.Members[i].DBSize, v.Members[i].DBInUse, v.Members[i].Quota = 120<<20, 120<<20, 128<<20
		}
	})
	f.etcd.Compacted = func(v *planner.EtcdView) {
		for i := range v.Members {
			v.Members[i].DBInUse = 10 << 20 // the earlier revisions went
		}
	}
	c, _ := f.reconcile()
	require.Equal(t, []string{"Compact", "Defragment 2", "Defragment 3", "MoveLeader 1 2", "Defragment 1", "DisarmNoSpace 2"}, f.etcd.Calls())
	require.Nil(t, c.Status.Plan)
	require.Len(t, c.Status.History, 2)
	for _, h := range c.Status.History {
		require.Equal(t, v1alpha1.PlanSucceeded, h.Phase, "%+v", h)
	}
	require.Equal(t, "Compact", c.Status.History[1].Actions)
	require.Equal(t, "Defragment demo-1, Defragment demo-2, TransferLeadership demo-0, Defragment demo-0, DisarmAlarm demo-1", c.Status.History[0].Actions)
	require.Empty(t, c.Status.Alarms)
	require.True(t, conditions.IsReady(c), "%+v", c.Status.Conditions)
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

// A Pod the cluster does not own holds a member's name: the step stalls with NameTaken.
func TestForeignPodNameIsNotAdopted(t *testing.T) {
	f := newFixture(t, 3, nil)
	ctx := context.Background()
	require.NoError(t, f.kube.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-1"}}))
	require.NoError(t, f.kube.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-1", Labels: map[string]string{"app": "other"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}}}))
	f.setView(func(v *planner.EtcdView) { v.Members[1].Answering, v.Members[1].Leader = false, "" })
	c, _ := f.reconcile()
	require.Equal(t, plan.StartMember, c.Status.Plan.Steps[0].Action)
	require.Contains(t, c.Status.Plan.Progress[0].Message, "not this cluster's")
	f.now = f.now.Add(2 * time.Minute)
	c, _ = f.reconcile()
	require.Equal(t, "NameTaken", conditions.GetReason(c, meta.StalledCondition))
	var p corev1.Pod
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-1"}, &p))
	require.Equal(t, "other", p.Labels["app"], "the foreign Pod is left alone")
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

// Delete -> Retain takes the cluster's ownership off the volume claims, and back.
func TestRetainPolicyFollowsTheSpec(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.RetainPolicy = v1alpha1.RetainPolicyDelete })
	f.reconcile()
	owners := func() int {
		var pvc corev1.PersistentVolumeClaim
		require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "demo-0"}, &pvc))
		return len(pvc.OwnerReferences)
	}
	require.Equal(t, 1, owners())
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.RetainPolicy = v1alpha1.RetainPolicyRetain })
	f.reconcile()
	require.Equal(t, 0, owners())
}

var errFake = fakeError("fake failure")

type fakeError string

func (e fakeError) Error() string { return string(e) }

// A learner that does not catch up within the deadline is recorded, then replaced.
func TestStalledLearnerIsRemovedByID(t *testing.T) {
	f := newFixture(t, 3, nil)
	c := f.cluster()
	require.NoError(t, f.kube.Create(context.Background(), memberPod(c, "demo-3")))
	f.setView(func(v *planner.EtcdView) {
		v.Members = append(v.Members, planner.EtcdMember{ID: "4", Name: "demo-3", PeerURLs: []string{vocab.PeerURL(c.Name, c.Namespace, "demo-3")},
			Learner: true, Answering: true, Leader: "1", Version: "3.6.16", RaftIndex: 1})
	})
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 4 })
	c, _ = f.reconcile()
	require.Equal(t, plan.PromoteLearner, c.Status.Plan.Steps[0].Action)
	require.Contains(t, c.Status.Plan.Progress[0].Message, "in sync with leader")
	f.now = f.now.Add(2 * time.Minute)
	c, _ = f.reconcile()
	require.Equal(t, []string{"4"}, c.Status.StalledLearners)
	c, _ = f.reconcile()
	require.Equal(t, plan.RemoveMember, c.Status.Plan.Steps[0].Action)
	require.Equal(t, []string{"Promote 4", "Promote 4", "Remove 4"}, f.etcd.Calls()[:3], "etcd refused the promotions")
	c, _ = f.reconcile()
	require.Empty(t, c.Status.StalledLearners, "forgotten once it left")
}

// A suspended cluster is neither planned nor changed.
func TestSuspendedClusterIsLeftAlone(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas, c.Spec.Suspend = 2, true })
	c, _ := f.reconcile()
	require.Nil(t, c.Status.Plan)
	require.Equal(t, "Suspended", conditions.GetReason(c, meta.ReadyCondition))
	require.Empty(t, f.etcd.Calls())
}

// A member's Pod stuck terminating on a node that stopped reporting stalls with its own reason.
func TestPodStuckTerminatingOnALostNode(t *testing.T) {
	f := newFixture(t, 3, nil)
	ctx := context.Background()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionUnknown}}}}
	require.NoError(t, f.kube.Create(ctx, node))
	p := &corev1.Pod{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-1"}, p))
	p.Spec.NodeName, p.Finalizers = "n1", []string{"test/hold"}
	require.NoError(t, f.kube.Update(ctx, p))
	require.NoError(t, f.kube.Delete(ctx, p)) // stays, terminating, while the finalizer holds it
	f.setView(func(v *planner.EtcdView) { v.Members[1].Answering, v.Members[1].Leader = false, "" })

	c, _ := f.reconcile()
	require.Equal(t, plan.StartMember, c.Status.Plan.Steps[0].Action)
	f.now = f.now.Add(2 * time.Minute)
	c, _ = f.reconcile()
	require.Equal(t, "PodStuckTerminating", conditions.GetReason(c, meta.StalledCondition))
	require.Contains(t, conditions.GetMessage(c, meta.StalledCondition), "--force --grace-period=0")
}

// Another cluster answering at a member's Pod IP is not this cluster: nothing is planned on
// what it says.
func TestAnotherClusterAtAPodIPIsIgnored(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.setView(func(v *planner.EtcdView) { v.ClusterID = "other" })
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 2 })
	c, _ := f.reconcile()
	require.Equal(t, "c1", c.Status.ClusterID)
	require.Contains(t, c.Status.Plan.Progress[0].Message, "linearizable", "the step waits for this cluster to answer")
	require.Empty(t, f.etcd.Calls())
}

// A view not read through a quorum shows no plan done: a learner is still promoted once a
// quorum answers, and the cluster is not called Ready meanwhile.
func TestStaleViewFinishesNothing(t *testing.T) {
	f := newFixture(t, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 4 })
	c := f.cluster()
	require.NoError(t, f.kube.Create(context.Background(), memberPod(c, "demo-3")))
	f.setView(func(v *planner.EtcdView) {
		v.Members = append(v.Members, planner.EtcdMember{ID: "4", Name: "demo-3", PeerURLs: []string{vocab.PeerURL(c.Name, c.Namespace, "demo-3")},
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

// A larger spec.storage.size grows the claims whose class allows expansion, in one reconcile
// (each grown claim shows at once), acting only on the claim that records the step's member
// ID; nothing restarts and etcd is not called.
func TestClaimsGrowInPlace(t *testing.T) {
	f := newFixture(t, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.StorageClassName = "grows" })
	ctx := context.Background()
	require.NoError(t, f.kube.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "grows"},
		Provisioner: "example.com/grows", AllowVolumeExpansion: ptr.To(true)}))
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.Size = resource.MustParse("2Gi") })
	c, _ := f.reconcile()
	require.Nil(t, c.Status.Plan, "done in one reconcile")
	require.Equal(t, "ExpandVolume demo-0, ExpandVolume demo-1, ExpandVolume demo-2", c.Status.History[0].Actions)
	for _, name := range []string{"demo-0", "demo-1", "demo-2"} {
		pvc := &corev1.PersistentVolumeClaim{}
		require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, pvc))
		require.Equal(t, "2Gi", pvc.Spec.Resources.Requests.Storage().String(), name)
	}
	require.Empty(t, f.etcd.Calls())

	s := plan.Step{Action: plan.ExpandVolume, Member: "demo-1", MemberID: "7"}
	o, err := f.r.observe(ctx, c)
	require.NoError(t, err)
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.Size = resource.MustParse("3Gi") })
	require.ErrorContains(t, f.r.apply(ctx, f.cluster(), o, s), "records member 2, not 7")
}

// A new member's claim is not created of a storage class that does not exist: the step waits
// saying so, and stalls with its own reason past the deadline.
func TestMissingStorageClassHoldsTheNewMember(t *testing.T) {
	f := newFixture(t, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas, c.Spec.Storage.StorageClassName = 4, "missing" })
	f.setView(f.learnerAdded)
	c, _ := f.reconcile()
	require.Equal(t, plan.StartMember, c.Status.Plan.Steps[0].Action)
	require.Contains(t, c.Status.Plan.Progress[0].Message, "storage class missing (spec.storage.storageClassName) does not exist")
	err := f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "demo-3"}, &corev1.PersistentVolumeClaim{})
	require.True(t, apierrors.IsNotFound(err), "no claim of a class that does not exist")
	f.now = f.now.Add(2 * time.Minute)
	c, _ = f.reconcile()
	require.Equal(t, "StorageClassNotFound", conditions.GetReason(c, meta.StalledCondition))
}

// A defragmentation schedule seen for the first time waits for its next time; then the
// members at the threshold at that time are defragmented, the leader last, and nothing more
// until the time after, though they reach the threshold again.
func TestScheduledDefragmentation(t *testing.T) {
	f := newFixture(t, 3, func(c *v1alpha1.EtcdCluster) {
		c.Spec.Maintenance = &v1alpha1.MaintenanceSpec{Defrag: &v1alpha1.DefragSpec{Schedule: "0 3 * * *", ThresholdPercent: 50}}
	})
	fragment := func() {
		f.setView(func(v *planner.EtcdView) {
			for i := range v.Members {
				v.Members[i].DBSize, v.Members[i].DBInUse = 30<<20, 10<<20
			}
		})
	}
	fragment()
	c, _ := f.reconcile()
	require.Empty(t, f.etcd.Calls())
	require.True(t, c.Status.Defrag.LastScheduleTime.Time.Equal(f.now), "%v %v", c.Status.Defrag.LastScheduleTime, f.now)

	tick := time.Date(2027, 1, 16, 3, 0, 0, 0, time.UTC)
	f.now = tick.Add(-10 * time.Second)
	_, res := f.reconcile()
	require.Empty(t, f.etcd.Calls())
	require.Equal(t, 10*time.Second+10*time.Millisecond, res.RequeueAfter, "back when the schedule comes")

	f.now = tick.Add(time.Second)
	c, _ = f.reconcile()
	require.Equal(t, []string{"Defragment 2", "Defragment 3", "MoveLeader 1 2", "Defragment 1"}, f.etcd.Calls())
	require.True(t, c.Status.Defrag.LastScheduleTime.Time.Equal(tick), "%v", c.Status.Defrag.LastScheduleTime)
	require.Empty(t, c.Status.Defrag.Pending)
	require.Equal(t, v1alpha1.PlanSucceeded, c.Status.History[0].Phase)

	fragment()
	f.now = tick.Add(time.Hour)
	c, _ = f.reconcile()
	require.Len(t, f.etcd.Calls(), 4, "not the schedule's time")
	require.Nil(t, c.Status.Plan)

	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Maintenance.Defrag.Schedule = "0 3 * *" })
	c, _ = f.reconcile()
	require.True(t, conditions.IsStalled(c))
	require.Equal(t, "InvalidSchedule", conditions.GetReason(c, meta.StalledCondition))
}

// observedGeneration says which spec status describes: it moves only once the operator
// planned that generation (or judged it: suspended, unsupported). A reconcile that failed
// before planning leaves it, so a Ready=True of the older spec is not read as the new one's.
func TestObservedGenerationMovesOnlyWhenPlanned(t *testing.T) {
	f := newFixture(t, 3, nil)
	c, _ := f.reconcile()
	require.True(t, conditions.IsReady(c))
	require.Equal(t, int64(1), c.Status.ObservedGeneration)

	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 5 })
	f.listErr = errors.New("the API server does not answer")
	_, err := f.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "demo"}})
	require.ErrorContains(t, err, "does not answer")
	f.listErr = nil
	c = f.cluster()
	require.Equal(t, int64(1), c.Status.ObservedGeneration, "generation 2 was not planned")

	c, _ = f.reconcile()
	require.Equal(t, int64(2), c.Status.ObservedGeneration)
	require.NotNil(t, c.Status.Plan)
	require.Equal(t, int64(2), c.Status.Plan.Generation)

	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Suspend = true })
	c, _ = f.reconcile()
	require.Equal(t, int64(3), c.Status.ObservedGeneration, "a suspension is the spec judged")
}
