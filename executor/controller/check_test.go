package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/agent"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/executor/resources"
)

// While no member answers and every voter's Pod goes, one reconcile starts a check Pod
// beside each, on the old Pod's node, mounting its claim read-only. Once the checks found
// the data gone and the old Pods are gone, the restore comes at once: no member Pod was
// started on the wiped claims to learn it.
func TestCheckDataBesideGoingPods(t *testing.T) {
	f := newFixture(t, 3, func(c *v1alpha1.EtcdCluster) {
		c.Spec.Recovery = &v1alpha1.RecoverySpec{QuorumLoss: v1alpha1.QuorumLossAutomatic, AutoApproveDataLoss: true}
	})
	ctx := context.Background()
	backup := f.backups()
	old := &corev1.Pod{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, old))
	old.Spec.NodeName = "node-1"
	require.NoError(t, f.kube.Update(ctx, old))
	f.holdGoing("demo-0", "demo-1", "demo-2")
	f.etcd.SetView(nil)

	c, _ := f.reconcile()
	for i, m := range []string{"demo-0", "demo-1", "demo-2"} {
		require.Equal(t, plan.CheckData, c.Status.Plan.Steps[i].Action)
		require.Equal(t, m, c.Status.Plan.Steps[i].Member)
	}
	var checks corev1.PodList
	require.NoError(t, f.kube.List(ctx, &checks, observe.CheckLabels(c)))
	require.Len(t, checks.Items, 3, "every check in one reconcile: each shows once its Pod is made")
	p := &corev1.Pod{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: resources.CheckPodName("demo-0")}, p))
	require.Equal(t, "node-1", p.Spec.NodeName, "beside the old Pod")
	require.True(t, p.Spec.Volumes[0].PersistentVolumeClaim.ReadOnly)
	require.Equal(t, "demo-0", p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName)
	require.True(t, metav1.IsControlledBy(p, c))
	require.Empty(t, p.Labels[v1alpha1.LabelCluster], "no Service nor member list selects it")

	for i := range checks.Items {
		p := &checks.Items[i]
		p.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "preflight",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: agent.ExitDataLost}}}}}
		require.NoError(t, f.kube.Status().Update(ctx, p))
	}
	backup("nightly", "c1", f.now.Add(-time.Hour))
	c, _ = f.reconcile()
	require.NotEqual(t, plan.RestoreFromBackup, c.Status.Plan.Steps[c.Status.Plan.Current].Action, "the old Pods still go: their etcd may still serve")

	for _, m := range []string{"demo-0", "demo-1", "demo-2"} {
		gone := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: m}}
		require.NoError(t, f.kube.Patch(ctx, gone, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))))
	}
	c, _ = f.reconcile()
	require.Equal(t, "RestoreFromBackup demo-3", string(c.Status.Plan.Steps[0].Action)+" "+c.Status.Plan.Steps[0].Member)
	for _, m := range []string{"demo-0", "demo-1", "demo-2"} {
		require.Error(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: m}, &corev1.Pod{}), "no Pod started on %s's wiped claim", m)
	}
}

// A check Pod goes once its member runs a Pod again (its own preflight reads the data
// now), or its claim goes: a claim a Pod mounts is kept until the Pod is gone.
func TestCheckPodsGoOnceNotNeeded(t *testing.T) {
	f := newFixture(t, 3, nil)
	ctx := context.Background()
	f.checking("demo-0", "demo-1", "demo-2")
	f.holdGoing("demo-1", "demo-2") // their own Pods read nothing
	require.NoError(t, f.kube.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-1"}}))
	held := &corev1.PersistentVolumeClaim{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-2"}, held))
	held.Finalizers = []string{"kubernetes.io/pvc-protection"}
	require.NoError(t, f.kube.Update(ctx, held))
	require.NoError(t, f.kube.Delete(ctx, held))
	f.reconcile()
	var checks corev1.PodList
	require.NoError(t, f.kube.List(ctx, &checks, observe.CheckLabels(f.cluster())))
	require.Empty(t, checks.Items)
}

// A start that waited for the old Pod to go does not start a member on a claim its check
// Pod found empty meanwhile: the next look plans the recovery on that.
func TestNoStartOnAClaimCheckedEmpty(t *testing.T) {
	f := newFixture(t, 3, nil)
	ctx := context.Background()
	f.dataLost("demo-1", "demo-2")
	f.holdGoing("demo-0")
	f.checking("demo-0")
	f.setView(firstAloneAnswers)
	go func() { // the check ends, and then the kubelet ends the old Pod
		time.Sleep(100 * time.Millisecond)
		p := &corev1.Pod{}
		if f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: resources.CheckPodName("demo-0")}, p) == nil {
			p.Status = corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{Name: "preflight",
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: agent.ExitDataLost}}}}}
			_ = f.kube.Status().Update(ctx, p)
		}
		old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-0"}}
		_ = f.kube.Patch(ctx, old, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	}()
	c, _ := f.reconcile()
	require.Equal(t, "StartMember demo-0", string(c.Status.Plan.Steps[0].Action)+" "+c.Status.Plan.Steps[0].Member)
	require.Contains(t, c.Status.Plan.Progress[0].Message, "the check of demo-0 found its data gone")
	require.Error(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, &corev1.Pod{}), "no Pod started on the empty claim")
}
