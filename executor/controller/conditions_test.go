package controller

import (
	"context"
	"errors"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/planner"
)

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

// A suspended cluster is neither planned nor changed.
func TestSuspendedClusterIsLeftAlone(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas, c.Spec.Suspend = 2, true })
	c, _ := f.reconcile()
	require.Nil(t, c.Status.Plan)
	require.Equal(t, "Suspended", conditions.GetReason(c, meta.ReadyCondition))
	require.Empty(t, f.etcd.Calls())
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
