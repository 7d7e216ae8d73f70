package controller

import (
	"context"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
)

// A recovery restores the newest backup no drill found wrong: drills blocked or past their
// deadline hold none back. The approval message says the backup's drill is not done and
// names the newest verified backup as the alternative, and reads the same while the seed
// starts.
func TestRecoveryRestoresTheNewestBackupNoDrillFoundWrong(t *testing.T) {
	f, backup := totalLoss(t)
	ctx := context.Background()
	drilled := func(name string, at time.Time, status metav1.ConditionStatus, reason string) {
		backup(name, "c1", at)
		b := &v1alpha1.EtcdBackup{}
		require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, b))
		b.Spec.Verify = true
		require.NoError(t, f.kube.Update(ctx, b))
		b.Status.Conditions = []metav1.Condition{{Type: v1alpha1.VerifiedCondition, Status: status, Reason: reason, Message: reason}}
		require.NoError(t, f.kube.Status().Update(ctx, b))
	}
	drilled("verified", f.now.Add(-4*time.Hour), metav1.ConditionTrue, "Restored")
	drilled("unschedulable", f.now.Add(-3*time.Hour), metav1.ConditionUnknown, v1alpha1.ReasonDrillDeadlineExceeded)
	drilled("blocked", f.now.Add(-2*time.Hour), metav1.ConditionUnknown, v1alpha1.ReasonDrillBlocked)
	drilled("wrong", f.now.Add(-time.Hour), metav1.ConditionFalse, "ContentsDiffer")

	c, _ := f.reconcile()
	s := c.Status.Plan.Steps[0]
	require.Equal(t, plan.RestoreFromBackup, s.Action)
	require.Equal(t, "blocked", s.Backup, "the newest no drill found wrong")
	require.Equal(t, v1alpha1.PlanAwaitingApproval, c.Status.Plan.Phase)
	taken := func(d time.Duration) string { return f.now.Add(-d).UTC().Format(time.RFC3339) }
	want := "EtcdBackup blocked (revision 42, taken " + taken(2*time.Hour) + ", its restore drill not done; the newest verified backup, " +
		"EtcdBackup verified of revision 42 taken " + taken(4*time.Hour) + ", is the alternative: delete the EtcdBackups newer than it to restore it instead)"
	require.Contains(t, s.Reason, "from "+want+" as 3 new members restored at once (demo-3, demo-4, demo-5)")
	require.Contains(t, conditions.GetMessage(c, meta.StalledCondition), want, "what approval is asked for")

	id := c.Status.Plan.ID
	f.approve(id)
	f.reconcile()
	pvc := &corev1.PersistentVolumeClaim{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-3"}, pvc))
	require.Equal(t, "blocked", pvc.Annotations[vocab.AnnotationRestoreSeed])
	c, _ = f.reconcile()
	require.Equal(t, id, c.Status.Plan.ID, "the seed starts: the same plan, its reason unchanged")
}
