package controller

import (
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/status"
	"github.com/etcdplan/etcdplan/planner"
)

// The conditions of an EtcdCluster (Ready, Reconciling, Stalled) are written here alone.
// Flux's MarkStalled deletes Reconciling and MarkReconciling deletes Stalled: never both.

// markSuspended: spec.suspend, nothing is looked at or changed.
func markSuspended(c *v1alpha1.EtcdCluster) {
	conditions.Delete(c, meta.ReconcilingCondition)
	conditions.Delete(c, meta.StalledCondition)
	conditions.MarkFalse(c, meta.ReadyCondition, v1alpha1.ReasonSuspended, "reconciliation is suspended (spec.suspend)")
}

// markStalled marks the cluster Stalled and not Ready: the one way it becomes so, for a
// reason with a runbook in docs/operations.md.
func markStalled(c *v1alpha1.EtcdCluster, reason v1alpha1.StalledReason, msg string) {
	status.Stall(c, string(reason), msg)
}

// markBlocked: the recorded plan is blocked, its plan.BlockReason the Stalled reason.
func markBlocked(c *v1alpha1.EtcdCluster, b *plan.Blocker) {
	markStalled(c, v1alpha1.StalledReason(b.Reason), b.Message)
}

// stalled marks the cluster Stalled by a step, or a recovery held for approval; the Warning
// event goes out only when it becomes so.
func (r *Reconciler) stalled(c *v1alpha1.EtcdCluster, was bool, reason v1alpha1.StalledReason, msg string) {
	if !was {
		r.event(c, corev1.EventTypeWarning, v1alpha1.ReasonStepStalled, "%s", msg)
	}
	markStalled(c, reason, msg)
}

// stuck is the error of a step that cannot go on until a person acts: once the step passes
// its deadline, reason is the cluster's Stalled reason.
func stuck(reason v1alpha1.StalledReason, format string, args ...any) error {
	return status.Stuck(string(reason), format, args...)
}

// markProgressing: a plan runs or awaits approval.
func markProgressing(c *v1alpha1.EtcdCluster, reason, msg string) {
	status.Progressing(c, reason, msg)
}

// markConverged sets the conditions of a cluster with nothing left to do: Ready when
// every wanted voter is healthy. Members that stay unhealthy past the progress deadline
// with no plan to mend them stall the cluster, so `kubectl wait` and Flux stop waiting.
func markConverged(c *v1alpha1.EtcdCluster, o *observation, now time.Time) {
	conditions.Delete(c, meta.ReconcilingCondition)
	st := &c.Status
	var reason v1alpha1.StalledReason
	msg := ""
	switch {
	case c.Spec.Replicas == 0:
		conditions.Delete(c, meta.StalledCondition)
		conditions.MarkTrue(c, meta.ReadyCondition, v1alpha1.ReasonParked, "the cluster is parked at 0 replicas; its volumes are kept")
		return
	case o.Etcd == nil:
		reason, msg = v1alpha1.ReasonEtcdUnreachable, "no member answers"
	case !o.Etcd.Linearizable:
		reason, msg = v1alpha1.ReasonEtcdUnreachable, "etcd's member list cannot be read through a quorum"
	case st.ReadyReplicas < c.Spec.Replicas:
		reason, msg = v1alpha1.ReasonMembersUnhealthy, fmt.Sprintf("%d of %d members are healthy", st.ReadyReplicas, c.Spec.Replicas)
	case clusterVersionBehind(c):
		reason, msg = v1alpha1.ReasonClusterVersionPending, fmt.Sprintf("every member runs %s and etcd's cluster version is still %s", c.Spec.Version, st.ClusterVersion)
	default:
		conditions.Delete(c, meta.StalledCondition)
		conditions.MarkTrue(c, meta.ReadyCondition, v1alpha1.ReasonSucceeded, "%d members healthy on %s", st.ReadyReplicas, st.Version)
		return
	}
	since := c.CreationTimestamp.Time
	if r := conditions.Get(c, meta.ReadyCondition); r != nil && r.Status != metav1.ConditionTrue && r.LastTransitionTime.After(since) {
		since = r.LastTransitionTime.Time
	}
	if len(st.History) > 0 && st.History[0].FinishedAt != nil && st.History[0].FinishedAt.After(since) {
		since = st.History[0].FinishedAt.Time
	}
	deadline := time.Duration(c.Spec.UpdateStrategy.ProgressDeadlineSeconds) * time.Second
	if now.Sub(since) > deadline {
		markStalled(c, reason, msg+fmt.Sprintf(" for more than %s; check the member Pods' events and logs", deadline))
		return
	}
	conditions.Delete(c, meta.StalledCondition)
	if reason == v1alpha1.ReasonClusterVersionPending {
		msg += "; etcd raises it within seconds once every member answers on the new minor"
	} else {
		msg += "; waiting for members to become healthy"
	}
	conditions.MarkFalse(c, meta.ReadyCondition, string(reason), "%s", msg)
}

// clusterVersionBehind: etcd's cluster version is known and of another minor than
// spec.version. After an upgrade's last member, etcd's leader raises it on its own clock
// (every few seconds); until then the cluster runs the old minor's protocol.
func clusterVersionBehind(c *v1alpha1.EtcdCluster) bool {
	cv, err := planner.ParseVersion(c.Status.ClusterVersion)
	want, err2 := planner.ParseVersion(c.Spec.Version)
	return err == nil && err2 == nil && !cv.SameMinor(want)
}

// markCertificates sets CertificateExpiring from the certificates the look read; a cluster
// without TLS has no such condition.
func markCertificates(c *v1alpha1.EtcdCluster, now time.Time) {
	if c.Status.TLS == nil {
		conditions.Delete(c, v1alpha1.ConditionCertificateExpiring)
		return
	}
	for _, cs := range c.Status.TLS.Certificates {
		if expiring(cs, now) {
			conditions.MarkTrue(c, v1alpha1.ConditionCertificateExpiring, v1alpha1.ReasonExpiresSoon,
				"the certificate in Secret %s expires at %s: a member or client using it is then cut off (docs/security.md)",
				cs.SecretName, cs.NotAfter.UTC().Format(time.RFC3339))
			return
		}
	}
	conditions.MarkFalse(c, v1alpha1.ConditionCertificateExpiring, v1alpha1.ReasonCertificatesValid, "no certificate is close to its end")
}

// expiring: a tenth of the certificate's life is left (0.3 of the time from its renewal to
// its end) when the operator renews it, else a week.
func expiring(cs v1alpha1.CertificateStatus, now time.Time) bool {
	left := cs.NotAfter.Sub(now)
	if cs.RenewAt != nil {
		return left < cs.NotAfter.Sub(cs.RenewAt.Time)*3/10
	}
	return left < 7*24*time.Hour
}
