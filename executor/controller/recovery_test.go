package controller

import (
	"context"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/planner"
)

// Two of three voters lost their data: the recovery restarts the survivor alone with
// --force-new-cluster, only once approved, marking its claim first; the mark goes once a
// quorum answers again.
func TestQuorumLossRecoveryWaitsForApproval(t *testing.T) {
	f := newFixture(t, 3, nil)
	ctx := context.Background()
	for _, name := range []string{"demo-1", "demo-2"} {
		p := &corev1.Pod{}
		require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, p))
		p.Status = corev1.PodStatus{Phase: corev1.PodFailed, InitContainerStatuses: []corev1.ContainerStatus{{Name: "preflight",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: resources.PreflightDataLost}}}}}
		require.NoError(t, f.kube.Status().Update(ctx, p))
	}
	f.setView(func(v *planner.EtcdView) {
		v.Linearizable, v.LeaderID = false, ""
		for i := range v.Members {
			v.Members[i].Leader, v.Members[i].Answering = "", i == 0
		}
	})
	c, _ := f.reconcile()
	require.Nil(t, c.Status.Plan.Blocked)
	s := c.Status.Plan.Steps[0]
	require.Equal(t, plan.ForceNewCluster, s.Action)
	require.Equal(t, "1", s.MemberID)
	require.Equal(t, v1alpha1.PlanAwaitingApproval, c.Status.Plan.Phase)
	require.Equal(t, "QuorumLost", conditions.GetReason(c, meta.StalledCondition))
	require.Contains(t, conditions.GetMessage(c, meta.StalledCondition), "restarts demo-0 (raft index 100, the highest of the voters that kept their data) alone with --force-new-cluster")
	pod := &corev1.Pod{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, pod))
	require.NotContains(t, pod.Annotations, resources.AnnotationForceNewCluster, "nothing happens before approval")

	id := c.Status.Plan.ID
	f.update(func(c *v1alpha1.EtcdCluster) { c.Annotations = map[string]string{resources.AnnotationApprove: id} })
	f.reconcile()
	pvc := &corev1.PersistentVolumeClaim{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, pvc))
	require.Equal(t, "1", pvc.Annotations[resources.AnnotationForceNewCluster])
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, pod))
	require.Equal(t, "1", pod.Annotations[resources.AnnotationForceNewCluster])
	require.Contains(t, pod.Spec.Containers[0].Command, "--force-new-cluster=true")
	require.Contains(t, pod.Spec.InitContainers[0].Command, "--expect-data=true")

	// etcd runs the survivor alone: its claim's mark goes, and the plan goes on.
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.0",
		ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	require.NoError(t, f.kube.Status().Update(ctx, pod))
	f.setView(func(v *planner.EtcdView) {
		v.Linearizable, v.LeaderID, v.Members = true, "1", v.Members[:1]
		v.Members[0].Leader, v.Members[0].Answering = "1", true
	})
	c, _ = f.reconcile()
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, pvc))
	require.NotContains(t, pvc.Annotations, resources.AnnotationForceNewCluster)
	require.Equal(t, v1alpha1.StepSucceeded, c.Status.Plan.Progress[0].State)
	require.Equal(t, "DeleteMember demo-1", string(c.Status.Plan.Steps[1].Action)+" "+c.Status.Plan.Steps[1].Member)
	require.Greater(t, c.Status.Plan.Current, int32(1), "the leftovers of the lost members go")
}
