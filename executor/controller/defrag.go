package controller

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/executor/schedule"
	"github.com/etcdplan/etcdplan/planner"
)

// scheduleDefrag starts a round of scheduled defragmentation when the schedule came: the
// members fragmented then are due, and stay due in status until they are done (whatever
// defragmented them) or gone. It returns when the schedule comes next; zero without one.
// A schedule seen for the first time starts no round: it waits for its next time.
func (r *Reconciler) scheduleDefrag(c *v1alpha1.EtcdCluster, o *observation) time.Time {
	d := c.Spec.Maintenance
	if d == nil || d.Defrag == nil || d.Defrag.Schedule == "" {
		c.Status.Defrag, o.DefragDue = nil, nil
		return time.Time{}
	}
	sched, err := schedule.Parse(d.Defrag.Schedule)
	if err != nil {
		return time.Time{} // Reconcile stalls on it
	}
	now := r.now()
	st := c.Status.Defrag
	if st == nil || st.LastScheduleTime == nil {
		st = &v1alpha1.DefragStatus{LastScheduleTime: &metav1.Time{Time: now}}
		c.Status.Defrag = st
	}
	if last := schedule.Last(sched, st.LastScheduleTime.Time, now); !last.IsZero() {
		st.LastScheduleTime, st.Pending = &metav1.Time{Time: last}, memberIDs(c, o)
	}
	st.Pending = planner.DefragStillDue(o.Observed, st.Pending, observe.ScheduledDefragPercent(d.Defrag))
	o.DefragDue = st.Pending
	return sched.Next(now)
}

// memberIDs are the IDs of the cluster's members: etcd's when a member answered, else
// those recorded in status.
func memberIDs(c *v1alpha1.EtcdCluster, o *observation) []string {
	var ids []string
	if o.Etcd != nil {
		for _, m := range o.Etcd.Members {
			ids = append(ids, m.ID)
		}
		return ids
	}
	for _, m := range c.Status.Members {
		if m.ID != "" {
			ids = append(ids, m.ID)
		}
	}
	return ids
}
