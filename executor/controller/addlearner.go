package controller

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/planner"
)

// unconnectedFor is how long etcd's leader may refuse a learner for want of connected
// voters, while every voter answers and knows it as leader, before leadership moves to
// another voter. An etcd leader marks a peer inactive when one send to it fails (a DNS
// lookup that timed out on a busy node) and active again only when a stream to it
// connects anew, which a working stream never does: until then it refuses every member add,
// though raft runs on. Another leader counts its own connections.
const unconnectedFor = 20 * time.Second

// addLearner adds the step's member as a learner. etcd refusing it for want of connected
// voters is a wait; past unconnectedFor with every voter answering, leadership moves once
// per unconnectedFor (an Event says so), and the add is asked of the new leader.
func (r *Reconciler) addLearner(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, s plan.Step) error {
	if o.etcd == nil {
		return errors.New("no member answers")
	}
	_, err := o.etcd.AddLearner(ctx, resources.NewPeerURL(c, s.Member, s.Listen))
	if err == nil {
		r.leaderMoved.Delete(c.UID) // kept only while an add is refused
	}
	if !errors.Is(err, rpctypes.ErrUnhealthy) {
		return err
	}
	now := r.now()
	started := stepStarted(c)
	last, _ := r.leaderMoved.Load(c.UID)
	if started.IsZero() || now.Sub(started) < unconnectedFor || last != nil && now.Sub(last.(time.Time)) < unconnectedFor {
		return err
	}
	leader, target := otherVoter(o.Observed.Etcd)
	if target == "" {
		return err
	}
	r.leaderMoved.Store(c.UID, now)
	r.event(c, corev1.EventTypeWarning, v1alpha1.ReasonLeaderUnconnected,
		"etcd's leader %s refused to add %s for %s though every voter answers (it holds a peer as unconnected after a failed send): leadership moves to %s",
		leader, s.Member, now.Sub(started).Round(time.Second), target)
	if merr := withIDs(o, func(ids ...uint64) error { return o.etcd.MoveLeader(ctx, ids[0], ids[1]) }, leader, target); merr != nil {
		return errors.Join(err, merr)
	}
	return err
}

// stepStarted is when the plan's current step started; zero when unknown.
func stepStarted(c *v1alpha1.EtcdCluster) time.Time {
	p := c.Status.Plan
	if p == nil || int(p.Current) >= len(p.Progress) || p.Progress[p.Current].StartedAt == nil {
		return time.Time{}
	}
	return p.Progress[p.Current].StartedAt.Time
}

// otherVoter returns the leader's ID and another voter's, when every voter answers and
// knows that leader; "" when not.
func otherVoter(v *planner.EtcdView) (leader, target string) {
	if v == nil || v.LeaderID == "" {
		return "", ""
	}
	for _, m := range v.Members {
		switch {
		case m.Learner:
		case !m.Answering || m.Leader != v.LeaderID:
			return "", ""
		case m.ID != v.LeaderID && target == "":
			target = m.ID
		}
	}
	return v.LeaderID, target
}
