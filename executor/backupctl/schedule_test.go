package backupctl

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/executor/store"
)

type scheduleFixture struct {
	*backupFixture
	sr *ScheduleReconciler
}

func newScheduleFixture(t *testing.T, expr string, keepLast int32) *scheduleFixture {
	f := &scheduleFixture{backupFixture: newBackupFixture(t)}
	f.sr = &ScheduleReconciler{Client: f.kube, APIReader: f.kube, Open: f.br.Open, Now: func() time.Time { return f.now }}
	s := &v1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "hourly", UID: "uid-hourly",
		CreationTimestamp: metav1.NewTime(f.now)}}
	s.Spec.ClusterRef.Name, s.Spec.Schedule = "demo", expr
	s.Spec.Destination.S3 = &v1alpha1.S3Destination{Bucket: "backups"}
	s.Spec.Retention.KeepLast = ptr.To(keepLast)
	require.NoError(t, f.kube.Create(context.Background(), s))
	return f
}

// reconcileSchedule reconciles the schedule and returns it.
func (f *scheduleFixture) reconcileSchedule() (*v1alpha1.EtcdBackupSchedule, reconcile.Result) {
	f.t.Helper()
	key := client.ObjectKey{Namespace: "ns", Name: "hourly"}
	res, err := f.sr.Reconcile(context.Background(), reconcile.Request{NamespacedName: key})
	require.NoError(f.t, err)
	s := &v1alpha1.EtcdBackupSchedule{}
	require.NoError(f.t, f.kube.Get(context.Background(), key, s))
	return s, res
}

// backups lists the schedule's EtcdBackups by name, with their phase.
func (f *scheduleFixture) backups() map[string]v1alpha1.BackupPhase {
	f.t.Helper()
	var l v1alpha1.EtcdBackupList
	require.NoError(f.t, f.kube.List(context.Background(), &l, client.MatchingLabels{v1alpha1.LabelSchedule: "hourly"}))
	out := map[string]v1alpha1.BackupPhase{}
	for _, b := range l.Items {
		out[b.Name] = b.Status.Phase
	}
	return out
}

func (f *scheduleFixture) runBackup(name string) {
	f.t.Helper()
	_, err := f.br.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: name}})
	require.NoError(f.t, err)
}

// An hourly schedule with keepLast 2: nothing at first sight, a backup each hour, never two
// at once (a time that comes while one runs is taken when it ends), the third-oldest goes
// with its stored object, a failed backup costs no good one, suspend stops new backups.
func TestBackupScheduleTakesOneAtATimeAndKeepsTheLastTwo(t *testing.T) {
	f := newScheduleFixture(t, "0 * * * *", 2)
	s, res := f.reconcileSchedule()
	require.Empty(t, f.backups(), "created on the hour: the next hour is the first time")
	require.Equal(t, time.Hour+10*time.Millisecond, res.RequeueAfter)
	require.True(t, conditions.IsReady(s))
	require.Contains(t, conditions.GetMessage(s, meta.ReadyCondition), "next backup at 2027-01-15T09:00:00Z")

	f.now = f.now.Add(time.Hour)
	s, _ = f.reconcileSchedule()
	require.Equal(t, map[string]v1alpha1.BackupPhase{"hourly-20270115-090000": ""}, f.backups())
	require.Equal(t, f.now, s.Status.LastScheduleTime.Time)
	f.runBackup("hourly-20270115-090000")

	f.now = f.now.Add(time.Hour)
	f.reconcileSchedule() // 10:00, left running
	f.now = f.now.Add(time.Hour)
	s, _ = f.reconcileSchedule()
	require.Len(t, f.backups(), 2, "11:00 came while 10:00 runs: no second backup at once")
	require.True(t, conditions.IsReconciling(s))
	require.Contains(t, conditions.GetMessage(s, meta.ReconcilingCondition), "waiting for hourly-20270115-100000 to end before the backup due at 2027-01-15T11:00:00Z")
	f.runBackup("hourly-20270115-100000")
	f.now = f.now.Add(time.Minute) // the fake API server gives no UIDs, which keys carry
	f.reconcileSchedule()
	f.runBackup("hourly-20270115-110000")
	require.Len(t, f.store.Keys(), 3)

	s, _ = f.reconcileSchedule()
	require.Equal(t, map[string]v1alpha1.BackupPhase{"hourly-20270115-100000": v1alpha1.BackupSucceeded,
		"hourly-20270115-110000": v1alpha1.BackupSucceeded}, f.backups(), "the third-oldest went")
	require.Len(t, f.store.Keys(), 2, "its stored snapshot went first")
	require.NotContains(t, fmt.Sprint(f.store.Keys()), "T090000Z")
	require.Equal(t, "hourly-20270115-110000", s.Status.LastSuccessfulBackup)
	require.Equal(t, f.now, s.Status.LastSuccessfulTime.Time)
	require.False(t, conditions.IsReconciling(s))

	f.now = f.now.Add(time.Hour - time.Minute)
	f.reconcileSchedule()
	f.store.Err = fmt.Errorf("%w: bucket backups: AccessDenied: Access Denied", store.ErrRefused)
	f.runBackup("hourly-20270115-120000")
	f.store.Err = nil
	s, _ = f.reconcileSchedule()
	require.Len(t, f.store.Keys(), 2, "a failed backup deletes no older good one")
	require.Len(t, f.backups(), 3)
	require.False(t, conditions.IsReady(s))
	require.Equal(t, "LastBackupFailed", conditions.GetReason(s, meta.ReadyCondition))
	require.Contains(t, conditions.GetMessage(s, meta.ReadyCondition), "AccessDenied")

	s.Spec.Suspend = true
	require.NoError(t, f.kube.Update(context.Background(), s))
	f.now = f.now.Add(time.Hour)
	s, res = f.reconcileSchedule()
	require.Len(t, f.backups(), 3, "suspended: no backup")
	require.Equal(t, "Suspended", conditions.GetReason(s, meta.ReadyCondition))
	require.Zero(t, res.RequeueAfter)
}

func TestBackupScheduleStallsOnAnInvalidSchedule(t *testing.T) {
	f := newScheduleFixture(t, "0 3 * *", 2)
	s, res := f.reconcileSchedule()
	require.Zero(t, res.RequeueAfter)
	require.True(t, conditions.IsStalled(s))
	require.Equal(t, "InvalidSchedule", conditions.GetReason(s, meta.StalledCondition))
	require.Empty(t, f.backups())
}

// spec.verify.every 2 drills the first backup and every second one after; the newest
// verified backup shows in status, and a failed drill makes the schedule not Ready.
func TestBackupScheduleDrillsEveryOtherBackup(t *testing.T) {
	f := newScheduleFixture(t, "0 * * * *", 5)
	s := &v1alpha1.EtcdBackupSchedule{}
	require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "hourly"}, s))
	s.Spec.Verify = &v1alpha1.VerifyPolicy{Every: 2}
	require.NoError(t, f.kube.Update(context.Background(), s))
	f.reconcileSchedule()
	drilled := map[string]bool{}
	for range 3 {
		f.now = f.now.Add(time.Hour)
		s, _ = f.reconcileSchedule()
		name := backupName("hourly", f.now)
		b := &v1alpha1.EtcdBackup{}
		require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, b))
		drilled[name] = b.Spec.Verify
		b.Status.Phase, b.Status.Artifact = v1alpha1.BackupSucceeded, &v1alpha1.Artifact{URI: "s3://backups/" + name, TakenAt: metav1.NewTime(f.now)}
		if b.Spec.Verify {
			conditions.MarkTrue(b, v1alpha1.VerifiedCondition, "Restored", "restored")
		}
		require.NoError(t, f.kube.Status().Update(context.Background(), b))
	}
	require.Equal(t, map[string]bool{"hourly-20270115-090000": true, "hourly-20270115-100000": false, "hourly-20270115-110000": true}, drilled)
	s, _ = f.reconcileSchedule()
	require.Equal(t, int64(3), s.Status.BackupsTaken)
	require.Equal(t, "hourly-20270115-110000", s.Status.LastVerifiedBackup)
	require.Equal(t, f.now, s.Status.LastVerifiedTime.Time)
	require.True(t, conditions.IsReady(s))

	b := &v1alpha1.EtcdBackup{}
	require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "hourly-20270115-110000"}, b))
	conditions.MarkFalse(b, v1alpha1.VerifiedCondition, "ContentsDiffer", "holds 999 keys at revision 7 where the cluster held 1000")
	require.NoError(t, f.kube.Status().Update(context.Background(), b))
	s, _ = f.reconcileSchedule()
	require.Equal(t, "LastDrillFailed", conditions.GetReason(s, meta.ReadyCondition))
	require.Contains(t, conditions.GetMessage(s, meta.ReadyCondition), "the last restore drill, of hourly-20270115-110000, failed: holds 999 keys")
	require.Equal(t, "hourly-20270115-090000", s.Status.LastVerifiedBackup, "a failed drill is no verified backup")
}

// Retention on a volume claim deletes through a Pod that mounts it: the EtcdBackup goes
// once the Pod succeeded; a failed Pod says why and is replaced on the next try.
func TestRetentionOnAClaimDeletesThroughAPod(t *testing.T) {
	f := newScheduleFixture(t, "0 * * * *", 1)
	f.sr.Images = resources.Images{Operator: "op"}
	s := &v1alpha1.EtcdBackupSchedule{}
	require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "hourly"}, s))
	s.Spec.Destination = v1alpha1.BackupDestination{PVC: &v1alpha1.PVCDestination{ClaimName: "backups"}}
	require.NoError(t, f.kube.Update(context.Background(), s))
	for i, name := range []string{"old", "new"} {
		b := &v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{v1alpha1.LabelSchedule: "hourly"}}}
		b.Spec.Destination = s.Spec.Destination
		require.NoError(t, controllerutil.SetControllerReference(s, b, f.kube.Scheme()))
		require.NoError(t, f.kube.Create(context.Background(), b))
		b.Status.Phase = v1alpha1.BackupSucceeded
		b.Status.Artifact = &v1alpha1.Artifact{URI: "pvc://backups/ns/demo/" + name + ".db", TakenAt: metav1.NewTime(f.now.Add(time.Duration(i) * time.Minute))}
		require.NoError(t, f.kube.Status().Update(context.Background(), b))
	}
	_, res := f.reconcileSchedule()
	require.Equal(t, drillPoll, res.RequeueAfter, "a Pod deletes the snapshot: look again soon")
	p := &corev1.Pod{}
	key := client.ObjectKey{Namespace: "ns", Name: "old-prune"}
	require.NoError(t, f.kube.Get(context.Background(), key, p))
	require.Equal(t, []string{"/manager", "delete-object", `--destination={"pvc":{"claimName":"backups"}}`, "--key=ns/demo/old.db"}, p.Spec.Containers[0].Command)
	require.Equal(t, "backups", p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName)
	require.Len(t, f.backups(), 2, "the EtcdBackup stays until its snapshot is gone")

	p.Status.Phase = corev1.PodFailed
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "prune", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 1, Message: "deleting pvc://backups/ns/demo/old.db: read-only file system"}}}}
	require.NoError(t, f.kube.Status().Update(context.Background(), p))
	s, _ = f.reconcileSchedule()
	require.Equal(t, "RetentionFailed", conditions.GetReason(s, meta.ReadyCondition))
	require.Contains(t, conditions.GetMessage(s, meta.ReadyCondition), "read-only file system")
	require.True(t, apierrors.IsNotFound(f.kube.Get(context.Background(), key, &corev1.Pod{})), "the failed Pod goes")

	f.reconcileSchedule()
	require.NoError(t, f.kube.Get(context.Background(), key, p), "a new Pod on the next try")
	p.Status.Phase = corev1.PodSucceeded
	require.NoError(t, f.kube.Status().Update(context.Background(), p))
	s, _ = f.reconcileSchedule()
	require.Equal(t, map[string]v1alpha1.BackupPhase{"new": v1alpha1.BackupSucceeded}, f.backups(), "the old backup went with its snapshot")
	require.True(t, conditions.IsReady(s))
}

// own gives the schedule a backup that succeeded at, stored as s3://backups/<name>.db,
// with the Verified condition given (none when status is empty).
func (f *scheduleFixture) own(name string, at time.Time, status metav1.ConditionStatus, reason string) {
	f.t.Helper()
	ctx := context.Background()
	s := &v1alpha1.EtcdBackupSchedule{}
	require.NoError(f.t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "hourly"}, s))
	b := &v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{v1alpha1.LabelSchedule: "hourly"}}}
	b.Spec.ClusterRef, b.Spec.Destination, b.Spec.Verify = s.Spec.ClusterRef, s.Spec.Destination, status != ""
	require.NoError(f.t, controllerutil.SetControllerReference(s, b, f.kube.Scheme()))
	require.NoError(f.t, f.kube.Create(ctx, b))
	b.Status.Phase = v1alpha1.BackupSucceeded
	b.Status.Artifact = &v1alpha1.Artifact{URI: "s3://backups/" + name + ".db", ClusterID: "c1", TakenAt: metav1.NewTime(at)}
	if status != "" {
		b.Status.Conditions = []metav1.Condition{{Type: v1alpha1.VerifiedCondition, Status: status, Reason: reason, Message: reason}}
	}
	require.NoError(f.t, f.kube.Status().Update(ctx, b))
	require.NoError(f.t, f.store.Put(ctx, name+".db", strings.NewReader("snapshot")))
}

// Backups whose drill could not run (unschedulable, or a Pod in the way) are good ones:
// more of them than the failed backups kept costs none its stored snapshot, and the
// schedule stays Ready.
func TestRetentionKeepsBackupsWhoseDrillCouldNotRun(t *testing.T) {
	f := newScheduleFixture(t, "0 * * * *", 6)
	f.own("verified", f.now.Add(-5*time.Hour), metav1.ConditionTrue, "Restored")
	for i, reason := range []string{v1alpha1.ReasonDrillDeadlineExceeded, v1alpha1.ReasonDrillBlocked, v1alpha1.ReasonDrillDeadlineExceeded, v1alpha1.ReasonDrillBlocked} {
		f.own(fmt.Sprintf("notrun-%d", i), f.now.Add(-time.Duration(4-i)*time.Hour), metav1.ConditionUnknown, reason)
	}
	s, _ := f.reconcileSchedule()
	require.Len(t, f.backups(), 5)
	require.Len(t, f.store.Keys(), 5, "no stored snapshot deleted")
	require.True(t, conditions.IsReady(s))
	require.Equal(t, "verified", s.Status.LastVerifiedBackup)
}

// Retention never deletes the newest verified backup (a drill every 7 backups with
// keepLast 3 would have), nor one a restore names: spec.bootstrap.restore, a recovery's
// mark on a seed's claim or Pod, or the object of a restore whose cluster has not
// answered yet. status.lastVerifiedBackup names only a backup that exists.
func TestRetentionKeepsTheNewestVerifiedAndWhatARestoreNames(t *testing.T) {
	f := newScheduleFixture(t, "0 * * * *", 1)
	ctx := context.Background()
	names := []string{"verified", "old", "bootstrap", "claim-seed", "pod-seed", "restoring", "new"}
	for i, name := range names {
		status, reason := metav1.ConditionStatus(""), ""
		if name == "verified" {
			status, reason = metav1.ConditionTrue, "Restored"
		}
		f.own(name, f.now.Add(-time.Duration(len(names)-i)*time.Hour), status, reason)
	}
	c := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "copy"}}
	c.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Restore: &v1alpha1.RestoreSpec{BackupName: "bootstrap"}}
	require.NoError(t, f.kube.Create(ctx, c))
	c = &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other"}}
	require.NoError(t, f.kube.Create(ctx, c))
	c.Status.RestoredFrom = "s3://backups/restoring.db"
	require.NoError(t, f.kube.Status().Update(ctx, c))
	mark := map[string]string{vocab.AnnotationRestoreSeed: "claim-seed"}
	managed := map[string]string{vocab.LabelManagedBy: vocab.ManagerName}
	require.NoError(t, f.kube.Create(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-3", Labels: managed, Annotations: mark}}))
	mark = map[string]string{vocab.AnnotationRestoreSeed: "pod-seed"}
	require.NoError(t, f.kube.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mem-3", Labels: managed, Annotations: mark}}))

	s, _ := f.reconcileSchedule()
	require.Equal(t, []string{"bootstrap", "claim-seed", "new", "pod-seed", "restoring", "verified"}, slices.Sorted(maps.Keys(f.backups())), "only old went")
	require.Equal(t, []string{"bootstrap.db", "claim-seed.db", "new.db", "pod-seed.db", "restoring.db", "verified.db"}, f.store.Keys())
	require.Equal(t, "verified", s.Status.LastVerifiedBackup)

	require.NoError(t, f.kube.Delete(ctx, &v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "verified"}}))
	s, _ = f.reconcileSchedule()
	require.Empty(t, s.Status.LastVerifiedBackup, "deleted by hand: no longer named")
	require.Nil(t, s.Status.LastVerifiedTime)
}
