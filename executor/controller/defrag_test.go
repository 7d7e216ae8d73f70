package controller

import (
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/planner"
)

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
