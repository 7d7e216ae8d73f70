package controller

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/observe"
)

// recoveryStarted records a recovery whose step took effect in status.lastRecovery, where
// it stays whatever becomes of its plan: a plan superseded after the effect leaves the
// recovery on record, and its outcome is found out from the cluster (recoveryFinished). A
// step applied again (its effect not shown yet) is the same recovery.
func (r *Reconciler) recoveryStarted(c *v1alpha1.EtcdCluster, planID string, s plan.Step, from string, now time.Time) {
	if s.Action != plan.ForceNewCluster && s.Action != plan.RestoreFromBackup {
		return
	}
	if l := c.Status.LastRecovery; l != nil && l.FinishedAt == nil && isRecovery(s, l) {
		return
	}
	c.Status.LastRecovery = &v1alpha1.RecoveryStatus{Plan: planID, Action: string(s.Action), Member: s.Member, Backup: s.Backup,
		FromClusterID: from, StartedAt: v1alpha1.At(now)}
	r.event(c, corev1.EventTypeWarning, v1alpha1.ReasonRecoveryStarted, "%s", describeRecovery(c.Status.LastRecovery))
}

// recoveryFinished completes status.lastRecovery once the cluster it started answers
// through a quorum: a restore's seed under its new cluster ID, a survivor restarted alone
// under the old one.
func (r *Reconciler) recoveryFinished(c *v1alpha1.EtcdCluster, o *observation, now time.Time) {
	l := c.Status.LastRecovery
	if l == nil || l.FinishedAt != nil || o.Etcd == nil || !o.Etcd.Linearizable || o.Etcd.ClusterID == "" {
		return
	}
	if l.Action == string(plan.RestoreFromBackup) && o.Etcd.ClusterID == l.FromClusterID {
		return
	}
	l.FinishedAt, l.ClusterID = v1alpha1.At(now), o.Etcd.ClusterID
	r.event(c, corev1.EventTypeNormal, v1alpha1.ReasonRecovered, "%s: it answers through a quorum as cluster %s, %s after it started",
		describeRecovery(l), l.ClusterID, now.Sub(l.StartedAt.Time).Round(time.Millisecond))
}

// describeRecovery says what a recovery did.
func describeRecovery(l *v1alpha1.RecoveryStatus) string {
	if l.Action == string(plan.RestoreFromBackup) {
		return fmt.Sprintf("recovery from quorum loss (plan %s): a new cluster restored from EtcdBackup %s on seed %s", l.Plan, l.Backup, l.Member)
	}
	return fmt.Sprintf("recovery from quorum loss (plan %s): %s restarted alone with --force-new-cluster", l.Plan, l.Member)
}

// outcome is what a look shows of a recovery step whose effect was applied.
type outcome int

const (
	// recoveryUnknown: the step is no recovery applied, or nothing of it is under way.
	recoveryUnknown outcome = iota
	// recoveryUnderWay: its member's Pod runs or starts, and its cluster has not answered
	// through a quorum yet: the effect may yet happen.
	recoveryUnderWay
	// recoveryTookEffect: the cluster it started answers through a quorum.
	recoveryTookEffect
)

// recoveryOutcome says what became of the recorded plan's current step when it is a
// recovery whose effect was applied (status.lastRecovery names it). A plan is not
// superseded while it is under way, up to the step's deadline: a restore or a forced
// restart that took effect off the record would leave the next plan to guess which
// cluster it acts on.
func recoveryOutcome(c *v1alpha1.EtcdCluster, o *observation, rec *v1alpha1.PlanStatus, now time.Time) outcome {
	i := int(rec.Current)
	l := c.Status.LastRecovery
	if i >= len(rec.Steps) || i >= len(rec.Progress) || rec.Progress[i].AppliedAt == nil || l == nil || !isRecovery(rec.Steps[i], l) {
		return recoveryUnknown
	}
	s, pr := rec.Steps[i], rec.Progress[i]
	p := o.pods[s.Member]
	switch {
	case l.FinishedAt != nil:
		return recoveryTookEffect
	case p != nil && p.DeletionTimestamp == nil && !observe.PodEnded(p) && pr.Deadline != nil && now.Before(pr.Deadline.Time):
		return recoveryUnderWay
	}
	return recoveryUnknown
}

// isRecovery: the step is the recovery status.lastRecovery records.
func isRecovery(s plan.Step, l *v1alpha1.RecoveryStatus) bool {
	return l.Action == string(s.Action) && l.Member == s.Member && l.Backup == s.Backup
}

// awaitOutcome holds the plan at its recovery step, which is not applied again: the fresh
// plan differs, and replaces it once the look shows how the recovery went.
func (r *Reconciler) awaitOutcome(c *v1alpha1.EtcdCluster) reconcile.Result {
	rec := c.Status.Plan
	i := int(rec.Current)
	s := rec.Steps[i]
	progress(rec, i).Message = "applied; the cluster changed meanwhile, and the plan waits for this step's outcome before another replaces it"
	markProgressing(c, v1alpha1.ReasonProgressing, fmt.Sprintf("plan %s step %d/%d: %s %s (waiting for its outcome)", rec.ID, i+1, len(rec.Steps), s.Action, s.Subject()))
	return reconcile.Result{RequeueAfter: pollApplied}
}
