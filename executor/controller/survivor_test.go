package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/backupctl"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/status"
	"github.com/etcdplan/etcdplan/executor/store"
	"github.com/etcdplan/etcdplan/executor/store/storefake"
	"github.com/etcdplan/etcdplan/planner"
)

// backupFixture is the cluster fixture with a backup reconciler whose destinations all
// open one in-memory store, as the cluster reconciler's do.
type backupFixture struct {
	*fixture
	br *backupctl.BackupReconciler
}

func newBackupFixture(t *testing.T) *backupFixture {
	f := &backupFixture{fixture: newFixture(t, 3, nil)}
	f.etcd.Database, f.etcd.Revision = []byte(strings.Repeat("kv", 1000)), 4711
	f.etcd.Held = etcd.Contents{Keys: 1000, HashKV: 0xfeedbeef, CompactRevision: 4000}
	st := storefake.New()
	f.br = &backupctl.BackupReconciler{Client: f.kube, APIReader: f.kube, Dial: f.etcd.Dial, Now: func() time.Time { return f.now },
		Open: func(_ context.Context, d v1alpha1.BackupDestination, _ store.Credentials) (store.Store, error) {
			return st.Open(d), nil
		}}
	f.r.Open = f.br.Open // the restore reads the store the backups wrote
	return f
}

// memorySurvivor is a cluster in memory whose demo-1 and demo-2 Pods are gone while demo-0
// runs alone and answers, with a nightly backup at revision 42.
func memorySurvivor(t *testing.T) *backupFixture {
	f := newBackupFixture(t)
	ctx := context.Background()
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.Medium = v1alpha1.StorageMediumMemory })
	for _, name := range []string{"demo-0", "demo-1", "demo-2"} {
		require.NoError(t, f.kube.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}))
	}
	for _, name := range []string{"demo-1", "demo-2"} {
		require.NoError(t, f.kube.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}))
	}
	f.setView(firstAloneAnswers)
	b := &v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly"}}
	b.Spec.ClusterRef.Name = "demo"
	b.Spec.Destination.S3 = &v1alpha1.S3Destination{Bucket: "backups", Prefix: "etcd"}
	require.NoError(t, f.kube.Create(ctx, b))
	b.Status.Phase = v1alpha1.BackupSucceeded
	b.Status.Artifact = &v1alpha1.Artifact{URI: "s3://backups/etcd/nightly.db", Revision: 42, ClusterID: "c1", TakenAt: metav1.NewTime(f.now.Add(-time.Hour))}
	require.NoError(t, f.kube.Status().Update(ctx, b))
	return f
}

// In memory, a member that still runs alone after a majority's Pods went is snapshotted
// first, once approved: the step creates one EtcdBackup naming the member by ID, at the
// newest backup's destination, and finds it again on later looks; the backup reconciler
// reads that member alone, without a quorum. The next plan restores the snapshot, whose
// revision is higher than the nightly backup's, and says so.
func TestSurvivorInMemoryIsSnapshottedBeforeTheRestore(t *testing.T) {
	f := memorySurvivor(t)
	ctx := context.Background()
	c, _ := f.fixture.reconcile()
	require.Nil(t, c.Status.Plan.Blocked)
	s := c.Status.Plan.Steps[0]
	require.Equal(t, plan.SnapshotSurvivor, s.Action)
	require.Equal(t, "1", s.MemberID)
	require.Equal(t, "demo-0-survivor-1", s.Backup)
	require.Contains(t, s.Reason, "as EtcdBackup demo-0-survivor-1 at s3://backups/etcd (a snapshot")
	require.Equal(t, v1alpha1.PlanAwaitingApproval, c.Status.Plan.Phase)
	require.Contains(t, conditions.GetMessage(c, meta.StalledCondition), "stores its snapshot as EtcdBackup demo-0-survivor-1 (this loses nothing)")
	snap := &v1alpha1.EtcdBackup{}
	key := client.ObjectKey{Namespace: "ns", Name: "demo-0-survivor-1"}
	require.True(t, apierrors.IsNotFound(f.kube.Get(ctx, key, snap)), "nothing happens before approval")

	id := c.Status.Plan.ID
	f.approve(id)
	f.fixture.reconcile()
	require.NoError(t, f.kube.Get(ctx, key, snap))
	require.Equal(t, "1", snap.Spec.Member)
	require.Equal(t, "demo", snap.Spec.ClusterRef.Name)
	require.Equal(t, "backups", snap.Spec.Destination.S3.Bucket)
	require.Equal(t, "etcd", snap.Spec.Destination.S3.Prefix, "the newest backup's destination")
	c, _ = f.fixture.reconcile() // the step finds the backup it created, and waits for it
	require.Equal(t, id, c.Status.Plan.ID)
	require.Contains(t, c.Status.Plan.Progress[0].Message, "waiting for EtcdBackup demo-0-survivor-1 to store the snapshot of demo-0")
	var list v1alpha1.EtcdBackupList
	require.NoError(t, f.kube.List(ctx, &list))
	require.Len(t, list.Items, 2, "one snapshot, whatever the looks")

	_, err := f.br.Reconcile(ctx, reconcile.Request{NamespacedName: key})
	require.NoError(t, err)
	require.NoError(t, f.kube.Get(ctx, key, snap))
	require.Equal(t, v1alpha1.BackupSucceeded, snap.Status.Phase, "read without a quorum: %v", snap.Status.Conditions)
	require.Equal(t, "demo-0", snap.Status.Artifact.Member)
	require.Equal(t, int64(4711), snap.Status.Artifact.Revision)
	require.Equal(t, "c1", snap.Status.Artifact.ClusterID)

	c, _ = f.fixture.reconcile()
	require.Equal(t, v1alpha1.PlanSucceeded, c.Status.History[0].Phase, "the snapshot's plan is done")
	steps := c.Status.Plan.Steps
	require.Equal(t, []plan.Action{plan.StopMember, plan.RestoreFromBackup}, []plan.Action{steps[0].Action, steps[1].Action})
	require.Equal(t, "demo-0-survivor-1", steps[1].Backup)
	require.Contains(t, steps[1].Reason, "demo-0-survivor-1, the snapshot of demo-0 taken while no quorum answered, "+
		"holds a higher revision than the newest backup, EtcdBackup nightly (revision 42")
	require.Equal(t, v1alpha1.PlanAwaitingApproval, c.Status.Plan.Phase, "the restore is approved on its own")
	require.Contains(t, conditions.GetMessage(c, meta.StalledCondition), "starts the cluster anew from EtcdBackup demo-0-survivor-1 (revision 4711")
}

// A snapshot that failed blocks the recovery, saying why and what to do.
func TestSurvivorSnapshotFailedBlocks(t *testing.T) {
	f := memorySurvivor(t)
	ctx := context.Background()
	c, _ := f.fixture.reconcile()
	f.approve(c.Status.Plan.ID)
	f.fixture.reconcile()
	snap := &v1alpha1.EtcdBackup{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0-survivor-1"}, snap))
	snap.Status.Phase = v1alpha1.BackupFailed
	status.Stall(snap, "DeadlineExceeded", "no snapshot stored within 10m0s; last: store unavailable")
	require.NoError(t, f.kube.Status().Update(ctx, snap))
	c, _ = f.fixture.reconcile()
	require.Equal(t, plan.BlockSurvivorSnapshotFailed, c.Status.Plan.Blocked.Reason)
	require.Contains(t, conditions.GetMessage(c, meta.StalledCondition), "no snapshot stored within 10m0s; last: store unavailable")
	require.Contains(t, conditions.GetMessage(c, meta.StalledCondition), "`kubectl delete etcdbackup demo-0-survivor-1`")
}

// On volumes, with a destination known, the most recent survivor is snapshotted instead of
// restarted alone: the step names it by ID, the backup reconciler reads it without a
// quorum, and the next plan stops its Pod and restores the snapshot on three new members
// at once, keeping its claim.
func TestSurvivorOnAVolumeIsSnapshottedAndEveryMemberRestored(t *testing.T) {
	f := newBackupFixture(t)
	ctx := context.Background()
	f.dataLost("demo-1", "demo-2")
	f.setView(firstAloneAnswers)
	sched := &v1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly"}}
	sched.Spec.ClusterRef.Name, sched.Spec.Schedule = "demo", "0 3 * * *"
	sched.Spec.Destination.S3 = &v1alpha1.S3Destination{Bucket: "backups", Prefix: "etcd"}
	require.NoError(t, f.kube.Create(ctx, sched))

	c, _ := f.fixture.reconcile()
	require.Nil(t, c.Status.Plan.Blocked)
	s := c.Status.Plan.Steps[0]
	require.Equal(t, "SnapshotSurvivor demo-0 1 demo-0-survivor-1 SurvivorSnapshot", string(s.Action)+" "+s.Member+" "+s.MemberID+" "+s.Backup+" "+string(s.Why))
	require.Equal(t, v1alpha1.PlanAwaitingApproval, c.Status.Plan.Phase)
	require.Contains(t, conditions.GetMessage(c, meta.StalledCondition), "plan "+c.Status.Plan.ID+" stores the snapshot of demo-0, "+
		"the most recent of the voters that kept their data, as EtcdBackup demo-0-survivor-1 (this loses nothing)")
	f.approve(c.Status.Plan.ID)
	f.fixture.reconcile()
	pvc := &corev1.PersistentVolumeClaim{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, pvc))
	require.Equal(t, "1", pvc.Annotations[vocab.AnnotationSurvivorSnapshot], "the survivor's claim is marked before its snapshot is asked for")
	key := client.ObjectKey{Namespace: "ns", Name: "demo-0-survivor-1"}
	_, err := f.br.Reconcile(ctx, reconcile.Request{NamespacedName: key})
	require.NoError(t, err)
	snap := &v1alpha1.EtcdBackup{}
	require.NoError(t, f.kube.Get(ctx, key, snap))
	require.Equal(t, v1alpha1.BackupSucceeded, snap.Status.Phase, "read without a quorum: %v", snap.Status.Conditions)

	c, _ = f.fixture.reconcile()
	steps := c.Status.Plan.Steps
	require.Equal(t, "StopMember demo-0", string(steps[0].Action)+" "+steps[0].Member)
	require.Equal(t, "RestoreFromBackup demo-3 demo-0-survivor-1", string(steps[1].Action)+" "+steps[1].Member+" "+steps[1].Backup)
	require.Contains(t, steps[1].Reason, "as 3 new members restored at once (demo-3, demo-4, demo-5)")
	require.Contains(t, conditions.GetMessage(c, meta.StalledCondition), "stops the Pod of demo-0, starts the cluster anew from EtcdBackup demo-0-survivor-1")
	f.approve(c.Status.Plan.ID)
	f.fixture.reconcile() // the survivor's Pod goes
	f.fixture.reconcile() // then every seed restores the snapshot
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, pvc))
	require.Equal(t, "true", pvc.Labels[v1alpha1.LabelRetained], "the survivor's claim is kept")
	for _, seed := range []string{"demo-3", "demo-4", "demo-5"} {
		pod := &corev1.Pod{}
		require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: seed}, pod))
		require.Equal(t, "EtcdBackup demo-0-survivor-1", pod.Annotations[vocab.AnnotationRestore])
	}
	require.True(t, apierrors.IsNotFound(f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, &corev1.Pod{})))
}

// As soon as no quorum answers, a cluster whose spec.recovery lets a recovery run on its
// own has the snapshot of the voter that answers asked for, recording its raft term and
// index, and the other voters' Pods start meanwhile. Once their preflight checks found no
// data, the recovery takes that snapshot as its own: it marks the claim, and takes none
// again.
func TestQuorumDownSnapshotIsAskedForEarly(t *testing.T) {
	f := newBackupFixture(t)
	ctx := context.Background()
	f.update(func(c *v1alpha1.EtcdCluster) {
		c.Spec.Recovery = &v1alpha1.RecoverySpec{QuorumLoss: v1alpha1.QuorumLossAutomatic, AutoApproveDataLoss: true}
	})
	for _, name := range []string{"demo-1", "demo-2"} {
		require.NoError(t, f.kube.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}))
	}
	f.setView(func(v *planner.EtcdView) {
		firstAloneAnswers(v)
		v.Members[0].RaftTerm, v.Members[0].RaftIndex = 3, 120
	})
	sched := &v1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly"}}
	sched.Spec.ClusterRef.Name, sched.Spec.Schedule = "demo", "0 3 * * *"
	sched.Spec.Destination.S3 = &v1alpha1.S3Destination{Bucket: "backups", Prefix: "etcd"}
	require.NoError(t, f.kube.Create(ctx, sched))

	f.drain()
	c, _ := f.fixture.reconcile()
	// The EtcdBackup and the Pods show in the cache at once: the plan is done within the
	// reconcile, the members started after the snapshot was asked for.
	require.Nil(t, c.Status.Plan)
	require.Equal(t, "SnapshotSurvivor demo-0, StartMember demo-1, StartMember demo-2", c.Status.History[0].Actions)
	require.Contains(t, strings.Join(f.drain(), "\n"), "SnapshotSurvivor demo-0: no quorum of voters answers")
	snap := &v1alpha1.EtcdBackup{}
	key := client.ObjectKey{Namespace: "ns", Name: "demo-0-survivor-1"}
	require.NoError(t, f.kube.Get(ctx, key, snap))
	require.Equal(t, "3/120", snap.Annotations[vocab.AnnotationRaftAt])
	require.Equal(t, "1", snap.Spec.Member)
	pvc := &corev1.PersistentVolumeClaim{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, pvc))
	require.Empty(t, pvc.Annotations[vocab.AnnotationSurvivorSnapshot], "an early snapshot chooses nothing")
	for range 3 {
		f.fixture.reconcile()
	}
	for _, name := range []string{"demo-1", "demo-2"} {
		require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, &corev1.Pod{}), "%s starts meanwhile", name)
	}
	_, err := f.br.Reconcile(ctx, reconcile.Request{NamespacedName: key})
	require.NoError(t, err)
	require.NoError(t, f.kube.Get(ctx, key, snap))
	require.Equal(t, v1alpha1.BackupSucceeded, snap.Status.Phase, "read without a quorum: %v", snap.Status.Conditions)

	f.dataLost("demo-1", "demo-2")
	c, _ = f.fixture.reconcile()
	s := c.Status.Plan.Steps[0]
	require.Equal(t, "SnapshotSurvivor demo-0 SurvivorSnapshot", string(s.Action)+" "+s.Member+" "+string(s.Why))
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, pvc))
	require.Equal(t, "1", pvc.Annotations[vocab.AnnotationSurvivorSnapshot], "the recovery chose demo-0, on the evidence")
	c, _ = f.fixture.reconcile()
	steps := c.Status.Plan.Steps
	require.Equal(t, "StopMember demo-0", string(steps[0].Action)+" "+steps[0].Member)
	require.Equal(t, "RestoreFromBackup demo-3 demo-0-survivor-1", string(steps[1].Action)+" "+steps[1].Member+" "+steps[1].Backup)
	backups := &v1alpha1.EtcdBackupList{}
	require.NoError(t, f.kube.List(ctx, backups))
	require.Len(t, backups.Items, 1, "one snapshot, taken once")
}

// A survivor's snapshot no recovery restored is deleted once its member is a voter again in
// a view read through a quorum, under the ID it records: the cluster holds all it holds, and
// a later loss takes a fresh one under that name. One still being taken, and one of a
// member that is not a voter of the cluster, stay.
func TestSnapshotOfAVoterServingAgainIsForgotten(t *testing.T) {
	f := newBackupFixture(t)
	ctx := context.Background()
	snapshot := func(name, member string, phase v1alpha1.BackupPhase) {
		b := &v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name,
			Labels: map[string]string{v1alpha1.LabelCluster: "demo", vocab.LabelManagedBy: vocab.ManagerName}}}
		b.Spec.ClusterRef.Name, b.Spec.Member = "demo", member
		b.Spec.Destination.S3 = &v1alpha1.S3Destination{Bucket: "backups", Prefix: "etcd"}
		require.NoError(t, f.kube.Create(ctx, b))
		b.Status.Phase = phase
		if phase == v1alpha1.BackupSucceeded {
			b.Status.Artifact = &v1alpha1.Artifact{URI: "s3://backups/etcd/" + name + ".db", Revision: 42, ClusterID: "c1", Member: "demo-0",
				TakenAt: metav1.NewTime(f.now.Add(-time.Minute))}
		}
		require.NoError(t, f.kube.Status().Update(ctx, b))
	}
	snapshot("demo-0-survivor-1", "1", v1alpha1.BackupSucceeded)
	snapshot("demo-1-survivor-2", "2", v1alpha1.BackupRunning)
	snapshot("demo-7-survivor-9", "9", v1alpha1.BackupSucceeded)
	f.fixture.reconcile()
	gone := func(name string) bool {
		return apierrors.IsNotFound(f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, &v1alpha1.EtcdBackup{}))
	}
	require.True(t, gone("demo-0-survivor-1"), "demo-0 serves in a quorum again")
	require.False(t, gone("demo-1-survivor-2"), "still being taken")
	require.False(t, gone("demo-7-survivor-9"), "not of a voter")
	require.Contains(t, strings.Join(f.drain(), "\n"), "Normal SnapshotForgotten EtcdBackup demo-0-survivor-1")
}
