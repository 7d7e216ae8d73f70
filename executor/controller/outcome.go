package controller

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// recoveryStarted records a recovery whose step took effect in status.lastRecovery, where
// it stays whatever becomes of its plan: a plan superseded after the effect leaves the
// recovery on record, and its outcome is found out from the cluster (recoveryFinished). A
// step applied again (its effect not shown yet) is the same recovery.
func (r *Reconciler) recoveryStarted(c *v1alpha1.EtcdCluster, planID string, s plan.Step, from string, now time.Time) {
	if s.Action != plan.ForceNewCluster && s.Action != plan.RestoreFromBackup {
		return
	}
	if l := c.Status.LastRecovery; l != nil && l.FinishedAt == nil && l.Action == string(s.Action) && l.Member == s.Member && l.Backup == s.Backup {
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
