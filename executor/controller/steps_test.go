package controller

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/internal/kubetest"
	"github.com/etcdplan/etcdplan/planner"
)

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

// A claim that binds a moment after it is created (as a class that binds at once does) is
// waited for within the reconcile: the Pod follows without another look.
func TestPodFollowsAClaimThatBindsAtOnce(t *testing.T) {
	f := newFixture(t, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas, c.Spec.Storage.StorageClassName = 4, "fast" })
	ctx := context.Background()
	require.NoError(t, f.kube.Create(ctx, &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"},
		Provisioner: "example.com/fast", VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate)}))
	f.setView(f.learnerAdded)
	go func() { // the provisioner binds it a moment after it is created
		for range 100 {
			time.Sleep(20 * time.Millisecond)
			pvc := &corev1.PersistentVolumeClaim{}
			if f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-3"}, pvc) == nil {
				pvc.Status.Phase = corev1.ClaimBound
				if f.kube.Status().Update(ctx, pvc) == nil {
					return
				}
			}
		}
	}()
	c, _ := f.reconcile()
	require.Equal(t, plan.StartMember, c.Status.Plan.Steps[0].Action)
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-3"}, &corev1.Pod{}), "the Pod in the same reconcile")
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

// A learner that does not catch up within the deadline is recorded, then replaced.
func TestStalledLearnerIsRemovedByID(t *testing.T) {
	f := newFixture(t, 3, nil)
	c := f.cluster()
	require.NoError(t, f.kube.Create(context.Background(), kubetest.MemberPod(c, "demo-3")))
	f.setView(func(v *planner.EtcdView) {
		v.Members = append(v.Members, planner.EtcdMember{ID: "4", Name: "demo-3", PeerURLs: []string{vocab.PeerURL(c.Name, c.Namespace, "demo-3", false)},
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
