package controller

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/executor/agent"
	"github.com/etcdplan/etcdplan/planner"
)

// A member whose preflight check could not read its data directory is down, not lost: its
// Pod is kept for a person, nothing of it is removed or deleted, and the step stalls with
// the check's words and what to do. For a majority, no recovery is planned.
func TestUnreadableDataStallsAndDeletesNothing(t *testing.T) {
	const msg = "data directory /var/lib/etcd/data cannot be read: open /var/lib/etcd/data/member: permission denied"
	f := newFixture(t, 3, nil)
	ctx := context.Background()
	for _, name := range []string{"demo-1", "demo-2"} {
		p := &corev1.Pod{}
		require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, p))
		p.Status = corev1.PodStatus{Phase: corev1.PodFailed, InitContainerStatuses: []corev1.ContainerStatus{{Name: "preflight",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: agent.ExitDataUnreadable, Message: msg + "\n"}}}}}
		require.NoError(t, f.kube.Status().Update(ctx, p))
	}
	f.setView(func(v *planner.EtcdView) {
		v.Linearizable = false
		for i := range v.Members {
			v.Members[i].Answering = i == 0
		}
	})

	c, _ := f.reconcile()
	require.Nil(t, c.Status.Plan.Blocked)
	for _, s := range c.Status.Plan.Steps {
		require.Equal(t, plan.StartMember, s.Action, "no removal, deletion, forced or restored cluster")
	}
	require.Contains(t, c.Status.Plan.Steps[0].Reason, "exit code 5: "+msg)
	f.now = f.now.Add(2 * time.Minute)
	c, _ = f.reconcile()
	require.Equal(t, "PreflightFailed", conditions.GetReason(c, meta.StalledCondition))
	stalled := conditions.GetMessage(c, meta.StalledCondition)
	require.Contains(t, stalled, msg)
	require.Contains(t, stalled, "then delete Pod demo-1 and a new one starts")
	require.Contains(t, stalled, "docs/operations.md, PreflightFailed")
	for _, name := range []string{"demo-1", "demo-2"} {
		require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, &corev1.Pod{}), "the Pod is kept for its logs")
		require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, &corev1.PersistentVolumeClaim{}), "the volume is kept")
	}
	require.Equal(t, "c1", c.Status.ClusterID)
}
