package backupctl

import (
	"context"
	"fmt"
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

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/agent"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/etcd/etcdfake"
	"github.com/etcdplan/etcdplan/executor/internal/kubetest"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/executor/store"
	"github.com/etcdplan/etcdplan/executor/store/storefake"
)

// backupFixture is the cluster "demo" of three members with a fake etcd behind them, a
// backup reconciler whose destinations all open one in-memory store, and a clock the test
// moves.
type backupFixture struct {
	t     *testing.T
	kube  client.Client
	etcd  *etcdfake.Cluster
	now   time.Time
	br    *BackupReconciler
	store *storefake.Store
	creds store.Credentials // what the last Open was given
}

func newBackupFixture(t *testing.T) *backupFixture {
	objs, view := kubetest.Demo(3, nil)
	f := &backupFixture{t: t, etcd: etcdfake.New(view), now: time.Unix(1_800_000_000, 0), store: storefake.New()}
	f.kube = kubetest.Client(t, func() error { return nil }, objs...)
	f.etcd.Database, f.etcd.Revision = []byte(strings.Repeat("kv", 1000)), 4711
	f.etcd.Held = etcd.Contents{Keys: 1000, HashKV: 0xfeedbeef, CompactRevision: 4000}
	f.br = &BackupReconciler{Client: f.kube, APIReader: f.kube, Dial: f.etcd.Dial, Now: func() time.Time { return f.now },
		Open: func(_ context.Context, d v1alpha1.BackupDestination, creds store.Credentials) (store.Store, error) {
			f.creds = creds
			return f.store.Open(d), nil
		}}
	return f
}

func (f *backupFixture) create(secret string) {
	b := &v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b1", UID: "0123456789abcdef", CreationTimestamp: metav1.NewTime(f.now)}}
	b.Spec.ClusterRef.Name = "demo"
	b.Spec.Destination.S3 = &v1alpha1.S3Destination{Bucket: "backups", CredentialsSecret: secret}
	require.NoError(f.t, f.kube.Create(context.Background(), b))
}

func (f *backupFixture) reconcile() (*v1alpha1.EtcdBackup, reconcile.Result) {
	f.t.Helper()
	res, err := f.br.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "b1"}})
	require.NoError(f.t, err)
	b := &v1alpha1.EtcdBackup{}
	require.NoError(f.t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "b1"}, b))
	return b, res
}

func TestBackupStoresACheckedSnapshotOfAFollower(t *testing.T) {
	f := newBackupFixture(t)
	f.create("")
	b, res := f.reconcile()
	require.Equal(t, v1alpha1.BackupSucceeded, b.Status.Phase)
	require.Zero(t, res.RequeueAfter)
	require.True(t, conditions.IsReady(b), "Ready: %v", b.Status.Conditions)
	require.Equal(t, []string{"Snapshot 2", "Contents 2 4711"}, f.etcd.Calls(), "a follower, by its member ID, and nothing else")
	require.Nil(t, f.creds, "no Secret named, none read")
	a := b.Status.Artifact
	require.NotNil(t, a)
	require.Equal(t, "demo-1", a.Member)
	require.Equal(t, int64(4711), a.Revision)
	require.Equal(t, int64(2000+32), a.Size, "the database and etcd's hash")
	require.Equal(t, "3.6.16", a.EtcdVersion)
	require.Len(t, a.SHA256, 64)
	key := "ns/demo/demo-20270115T080000Z-r4711-01234567.db"
	require.Equal(t, []string{key}, f.store.Keys())
	require.Equal(t, "s3://backups/"+key, a.URI)
	require.Equal(t, &v1alpha1.Contents{Keys: 1000, HashKV: 0xfeedbeef, CompactRevision: 4000}, a.Contents, "what the member held at the revision")

	f.reconcile()
	require.Len(t, f.etcd.Calls(), 2, "a backup that succeeded is not taken again")
}

func TestBackupWaitsForItsSecretAndFailsWhenTheStoreRefuses(t *testing.T) {
	f := newBackupFixture(t)
	f.create("s3-creds")
	b, res := f.reconcile()
	require.Equal(t, v1alpha1.BackupPending, b.Status.Phase)
	require.Equal(t, backupRetry, res.RequeueAfter)
	require.Equal(t, "CredentialsNotFound", conditions.GetReason(b, meta.ReadyCondition))
	require.Contains(t, conditions.GetMessage(b, meta.ReadyCondition), "Secret s3-creds does not exist")

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s3-creds"},
		Data: map[string][]byte{"accessKeyID": []byte("AKIDSECRETLOOKING"), "secretAccessKey": []byte("very-secret-value")}}
	require.NoError(t, f.kube.Create(context.Background(), secret))
	f.store.Err = fmt.Errorf("%w: bucket backups: NoSuchBucket: The specified bucket does not exist", store.ErrRefused)
	b, res = f.reconcile()
	require.Equal(t, secret.Data["secretAccessKey"], f.creds["secretAccessKey"])
	require.Equal(t, v1alpha1.BackupFailed, b.Status.Phase)
	require.Zero(t, res.RequeueAfter, "a refusal is not retried")
	require.True(t, conditions.IsStalled(b))
	require.Equal(t, "StoreRefused", conditions.GetReason(b, meta.StalledCondition))
	require.Contains(t, conditions.GetMessage(b, meta.StalledCondition), "NoSuchBucket")
	require.NotContains(t, fmt.Sprint(b.Status), "very-secret-value")
}

func TestBackupRetriesUntilItsDeadline(t *testing.T) {
	f := newBackupFixture(t)
	f.etcd.SetView(nil) // no member answers
	f.create("")
	b, res := f.reconcile()
	require.Equal(t, v1alpha1.BackupPending, b.Status.Phase)
	require.Equal(t, "NoMemberAnswers", conditions.GetReason(b, meta.ReadyCondition))
	require.Equal(t, backupRetry, res.RequeueAfter)
	require.True(t, conditions.IsReconciling(b))

	f.now = f.now.Add(backupDeadline + time.Second)
	b, res = f.reconcile()
	require.Equal(t, v1alpha1.BackupFailed, b.Status.Phase)
	require.Zero(t, res.RequeueAfter)
	require.Equal(t, "DeadlineExceeded", conditions.GetReason(b, meta.StalledCondition))
	require.Contains(t, conditions.GetMessage(b, meta.StalledCondition), "no member answers")
	require.Empty(t, f.store.Keys())
}

// drillFixture is a backup fixture whose backup asks for a restore drill, and whose
// scratch etcd holds what contents says.
func newDrillFixture(t *testing.T) (*backupFixture, *[]string, *etcd.Contents) {
	f := newBackupFixture(t)
	f.br.Images = resources.Images{EtcdRepository: "etcd", Operator: "op"}
	var asked []string
	held := f.etcd.Held
	f.br.Inspect = func(_ context.Context, url string, rev int64, rootPassword string) (etcd.Contents, error) {
		if rootPassword != "" {
			url = "root:" + rootPassword + "@" + url
		}
		asked = append(asked, fmt.Sprintf("%s@%d", url, rev))
		return held, nil
	}
	b := &v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b1", UID: "0123456789abcdef", CreationTimestamp: metav1.NewTime(f.now)}}
	b.Spec.ClusterRef.Name = "demo"
	b.Spec.Destination.S3 = &v1alpha1.S3Destination{Bucket: "backups"}
	b.Spec.Verify = true
	require.NoError(t, f.kube.Create(context.Background(), b))
	return f, &asked, &held
}

// drillPod is the drill's Pod, as the kubelet would report it once init containers ran
// (init) and etcd is ready (ready).
func (f *backupFixture) drillPod(init []corev1.ContainerStatus, ready bool) *corev1.Pod {
	f.t.Helper()
	p := &corev1.Pod{}
	require.NoError(f.t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "b1-drill"}, p))
	p.CreationTimestamp = metav1.NewTime(f.now)
	require.NoError(f.t, f.kube.Update(context.Background(), p))
	p.Status.InitContainerStatuses = init
	if ready {
		p.Status.PodIP = "10.88.9.1"
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	}
	require.NoError(f.t, f.kube.Status().Update(context.Background(), p))
	return p
}

func (f *backupFixture) drillGone() bool {
	err := f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "b1-drill"}, &corev1.Pod{})
	return apierrors.IsNotFound(err)
}

func TestDrillRestoresTheBackupIntoAScratchEtcdAndComparesWhatItHolds(t *testing.T) {
	f, asked, _ := newDrillFixture(t)
	b, res := f.reconcile()
	require.Equal(t, v1alpha1.BackupSucceeded, b.Status.Phase)
	require.Equal(t, metav1.ConditionUnknown, conditions.Get(b, v1alpha1.VerifiedCondition).Status)
	require.True(t, conditions.IsReconciling(b), "a drill running is progress")
	require.Equal(t, drillPoll, res.RequeueAfter)

	p := f.drillPod(nil, false)
	require.True(t, metav1.IsControlledBy(p, b), "the backup owns its drill")
	require.Equal(t, map[string]string{vocab.LabelBackup: "b1", vocab.LabelManagedBy: vocab.ManagerName}, p.Labels,
		"no cluster label: no Service or member list selects the scratch etcd")
	require.Equal(t, []string{"restore-fetch", "restore"}, []string{p.Spec.InitContainers[0].Name, p.Spec.InitContainers[1].Name})
	require.Contains(t, p.Spec.InitContainers[0].Command, "--sha256="+b.Status.Artifact.SHA256, "the object is checked before use")
	require.Equal(t, "etcd:v3.6.16", p.Spec.Containers[0].Image, "the version a recovery would restore with")
	require.Contains(t, p.Spec.Containers[0].Command, "--initial-cluster=drill=http://127.0.0.1:2380", "it joins nothing")

	_, res = f.reconcile()
	require.Equal(t, drillPoll, res.RequeueAfter, "etcd not ready yet")
	require.Empty(t, *asked)

	f.drillPod([]corev1.ContainerStatus{{Name: "restore-fetch", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}}}, true)
	b, res = f.reconcile()
	require.Equal(t, []string{"http://10.88.9.1:2379@4711"}, *asked, "read at the artifact's revision")
	require.Zero(t, res.RequeueAfter)
	require.True(t, conditions.IsTrue(b, v1alpha1.VerifiedCondition), "%v", b.Status.Conditions)
	require.Contains(t, conditions.GetMessage(b, v1alpha1.VerifiedCondition), "holds the 1000 keys and the history hash the cluster had at revision 4711")
	require.True(t, conditions.IsReady(b))
	require.False(t, conditions.IsReconciling(b))
	require.True(t, f.drillGone(), "the scratch etcd goes once read")

	f.reconcile()
	require.Len(t, *asked, 1, "a verdict is not drilled again")
}

// A cluster that has had auth on has its snapshots read as root: they carry etcd's users
// and auth flag, and the scratch etcd serves plain text, where no certificate names a user.
func TestDrillReadsAsRootWhenTheClusterHasHadAuth(t *testing.T) {
	f, asked, _ := newDrillFixture(t)
	c := &v1alpha1.EtcdCluster{}
	require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "demo"}, c))
	c.Status.Auth = &v1alpha1.AuthStatus{Enabled: true}
	require.NoError(t, f.kube.Status().Update(context.Background(), c))
	f.reconcile()
	f.drillPod(nil, true)
	b, _ := f.reconcile()
	require.Empty(t, *asked, "root's password Secret is missing")
	require.Contains(t, conditions.GetMessage(b, v1alpha1.VerifiedCondition), "reading root's password")

	require.NoError(t, f.kube.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-root"},
		Data: map[string][]byte{"password": []byte("pw")}}))
	b, _ = f.reconcile()
	require.Equal(t, []string{"root:pw@http://10.88.9.1:2379@4711"}, *asked)
	require.True(t, conditions.IsTrue(b, v1alpha1.VerifiedCondition))
}

func TestDrillFailsWhenTheRestoredDataDiffers(t *testing.T) {
	f, _, held := newDrillFixture(t)
	f.reconcile()
	f.drillPod(nil, true)
	held.Keys = 999
	b, _ := f.reconcile()
	require.True(t, conditions.IsFalse(b, v1alpha1.VerifiedCondition))
	require.Equal(t, "ContentsDiffer", conditions.GetReason(b, v1alpha1.VerifiedCondition))
	require.Contains(t, conditions.GetMessage(b, v1alpha1.VerifiedCondition), "holds 999 keys at revision 4711 where the cluster held 1000")
	require.False(t, conditions.IsReady(b), "a backup that may not restore is not ready")
	require.True(t, conditions.IsStalled(b))
	require.Equal(t, v1alpha1.BackupSucceeded, b.Status.Phase, "the snapshot was stored")
	require.True(t, f.drillGone())

	held.Keys = 1000
	held.HashKV++
	require.False(t, must(compareContents(b.Status.Artifact, *held)), "same keys, another history")
	held.CompactRevision++
	require.True(t, must(compareContents(b.Status.Artifact, *held)), "a hash since another compaction is not compared")
}

func must(ok bool, _, _ string) bool { return ok }

func TestDrillFailsWithTheFailedContainersMessage(t *testing.T) {
	f, asked, _ := newDrillFixture(t)
	f.reconcile()
	f.drillPod([]corev1.ContainerStatus{{Name: "restore-fetch", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 1, Message: "fetching s3://backups/k: snapshot corrupt: the object's SHA-256 is 00, its EtcdBackup recorded ff\n"}}}}, false)
	b, _ := f.reconcile()
	require.Equal(t, "DrillFailed", conditions.GetReason(b, v1alpha1.VerifiedCondition))
	require.Contains(t, conditions.GetMessage(b, v1alpha1.VerifiedCondition), "failed in restore-fetch (exit code 1): fetching s3://backups/k: snapshot corrupt")
	require.Empty(t, *asked)
	require.True(t, f.drillGone())
}

// A drill whose scratch etcd never served (here: no node fits it) judges nothing: the
// backup stays Ready with Verified Unknown, and the drill is tried again later, each wait
// twice the one before, never at the wake-up its own status write causes.
func TestDrillPastItsDeadlineIsRetriedLater(t *testing.T) {
	f, _, _ := newDrillFixture(t)
	ctx := context.Background()
	unschedulable := func() {
		p := f.drillPod(nil, false)
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
			Message: "0/3 nodes are available: 3 Insufficient memory."}}
		require.NoError(t, f.kube.Status().Update(ctx, p))
		f.now = f.now.Add(DefaultDrillDeadline + time.Second)
	}
	f.reconcile()
	unschedulable()
	b, res := f.reconcile()
	v := conditions.Get(b, v1alpha1.VerifiedCondition)
	require.Equal(t, metav1.ConditionUnknown, v.Status, "a drill that could not run says nothing of the data")
	require.Equal(t, v1alpha1.ReasonDrillDeadlineExceeded, v.Reason)
	require.Contains(t, v.Message, "did not serve within 15m0s (not scheduled: 0/3 nodes are available: 3 Insufficient memory.); tried again at ")
	require.True(t, conditions.IsReady(b), "the backup may restore")
	require.False(t, conditions.IsStalled(b))
	require.False(t, conditions.IsReconciling(b))
	require.Equal(t, drillRetryFirst, res.RequeueAfter)
	require.True(t, f.drillGone())

	_, res = f.reconcile()
	require.True(t, f.drillGone(), "not tried again before its time")
	require.Equal(t, drillRetryFirst, res.RequeueAfter)

	f.now = f.now.Add(drillRetryFirst)
	b, _ = f.reconcile()
	require.False(t, f.drillGone(), "tried again")
	require.Equal(t, "Drilling", conditions.GetReason(b, v1alpha1.VerifiedCondition))
	unschedulable()
	b, res = f.reconcile()
	require.Equal(t, 2*drillRetryFirst, res.RequeueAfter, "the next wait is twice as long")
	require.Equal(t, int32(2), b.Status.DrillTries)

	f.now = f.now.Add(2 * drillRetryFirst)
	f.reconcile()
	f.drillPod(nil, true)
	b, _ = f.reconcile()
	require.True(t, conditions.IsTrue(b, v1alpha1.VerifiedCondition))
	require.Zero(t, b.Status.DrillTries)
	require.Nil(t, b.Status.NextDrillTime)
}

// The operator's --drill-deadline replaces the 15 minutes: a drill's Pod is given that long
// to serve, not a moment less.
func TestDrillDeadlineIsConfigurable(t *testing.T) {
	f, _, _ := newDrillFixture(t)
	f.br.DrillDeadline = 20 * time.Second
	f.reconcile()
	f.drillPod(nil, false)
	f.now = f.now.Add(20 * time.Second)
	b, _ := f.reconcile()
	require.Equal(t, "Drilling", conditions.GetReason(b, v1alpha1.VerifiedCondition), "within its deadline")
	require.False(t, f.drillGone())
	f.now = f.now.Add(time.Second)
	b, res := f.reconcile()
	v := conditions.Get(b, v1alpha1.VerifiedCondition)
	require.Equal(t, metav1.ConditionUnknown, v.Status)
	require.Equal(t, v1alpha1.ReasonDrillDeadlineExceeded, v.Reason)
	require.Contains(t, v.Message, "did not serve within 20s")
	require.Equal(t, drillRetryFirst, res.RequeueAfter, "the retries keep their own waits")
	require.True(t, f.drillGone())
}

// A Pod of the drill's name that is not the backup's blocks the drill: nothing is judged,
// and the drill is tried again with a growing wait until the Pod is gone.
func TestDrillBlockedIsRetried(t *testing.T) {
	f, _, _ := newDrillFixture(t)
	ctx := context.Background()
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b1-drill"}}
	require.NoError(t, f.kube.Create(ctx, other))
	b, res := f.reconcile()
	require.Equal(t, metav1.ConditionUnknown, conditions.Get(b, v1alpha1.VerifiedCondition).Status)
	require.Equal(t, v1alpha1.ReasonDrillBlocked, conditions.GetReason(b, v1alpha1.VerifiedCondition))
	require.Contains(t, conditions.GetMessage(b, v1alpha1.VerifiedCondition), "the Pod b1-drill is not the backup's and is in the way")
	require.True(t, conditions.IsReady(b))
	require.False(t, b.DrillFailed())
	require.Equal(t, drillRetryFirst, res.RequeueAfter)

	f.now = f.now.Add(drillRetryFirst)
	b, res = f.reconcile()
	require.Equal(t, 2*drillRetryFirst, res.RequeueAfter)
	require.Equal(t, int32(2), b.Status.DrillTries)

	require.NoError(t, f.kube.Delete(ctx, other))
	f.now = f.now.Add(2 * drillRetryFirst)
	f.reconcile()
	p := &corev1.Pod{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "b1-drill"}, p))
	require.True(t, metav1.IsControlledBy(p, b), "the drill runs once the way is clear")
}

// The waits double up to an hour.
func TestDrillRetryWaitsDoubleUpToAnHour(t *testing.T) {
	r := &BackupReconciler{Now: func() time.Time { return time.Unix(0, 0) }}
	b := &v1alpha1.EtcdBackup{}
	var waits []time.Duration
	for range 9 {
		waits = append(waits, r.notRun(b, v1alpha1.ReasonDrillBlocked, "blocked").RequeueAfter)
	}
	require.Equal(t, []time.Duration{time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 16 * time.Minute, 32 * time.Minute,
		time.Hour, time.Hour, time.Hour}, waits)
}

// A backup to a volume claim: the claim must exist; a Pod mounting it streams the snapshot
// of the member the operator chose, and what it reports becomes the artifact; a failed Pod
// is replaced on the next try.
func TestBackupToAClaimRunsInAPodThatMountsIt(t *testing.T) {
	f := newBackupFixture(t)
	f.br.Images = resources.Images{EtcdRepository: "etcd", Operator: "op"}
	b := &v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b1", UID: "0123456789abcdef", CreationTimestamp: metav1.NewTime(f.now)}}
	b.Spec.ClusterRef.Name = "demo"
	b.Spec.Destination.PVC = &v1alpha1.PVCDestination{ClaimName: "backups", SubPath: "etcd"}
	require.NoError(t, f.kube.Create(context.Background(), b))
	b, _ = f.reconcile()
	require.Equal(t, "ClaimNotFound", conditions.GetReason(b, meta.ReadyCondition))
	require.Contains(t, conditions.GetMessage(b, meta.ReadyCondition), "PersistentVolumeClaim backups does not exist in ns")

	require.NoError(t, f.kube.Create(context.Background(), &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "backups"}}))
	b, res := f.reconcile()
	require.Equal(t, v1alpha1.BackupRunning, b.Status.Phase)
	require.Equal(t, drillPoll, res.RequeueAfter)
	require.Empty(t, f.etcd.Calls(), "the Pod reads etcd, not the operator")
	p := &corev1.Pod{}
	key := client.ObjectKey{Namespace: "ns", Name: "b1-snapshot"}
	require.NoError(t, f.kube.Get(context.Background(), key, p))
	require.True(t, metav1.IsControlledBy(p, b))
	cmd := p.Spec.Containers[0].Command
	require.Equal(t, []string{"/manager", "snapshot"}, cmd[:2])
	require.Contains(t, cmd, "--member=demo-1", "a follower")
	require.Contains(t, cmd, "--member-id=2")
	require.Contains(t, cmd, "--endpoint=http://10.88.0.1:2379")
	require.Contains(t, cmd, "--cluster-id=c1")
	require.Equal(t, "backups", p.Spec.Volumes[0].PersistentVolumeClaim.ClaimName)
	require.Equal(t, vocab.BackupMount, p.Spec.Containers[0].VolumeMounts[0].MountPath)

	p.Status.Phase = corev1.PodFailed
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "snapshot", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: agent.ExitStoreFull, Message: "the destination is full: mkdir /backup/etcd/ns: no space left on device"}}}}
	require.NoError(t, f.kube.Status().Update(context.Background(), p))
	b, res = f.reconcile()
	require.Equal(t, v1alpha1.BackupPending, b.Status.Phase)
	require.Equal(t, "StoreFull", conditions.GetReason(b, meta.ReadyCondition))
	require.Contains(t, conditions.GetMessage(b, meta.ReadyCondition), "failed in snapshot (exit code 4): the destination is full: "+
		"mkdir /backup/etcd/ns: no space left on device; free space there")
	require.Equal(t, backupRetry, res.RequeueAfter)
	require.True(t, apierrors.IsNotFound(f.kube.Get(context.Background(), key, &corev1.Pod{})), "the failed Pod goes")

	f.reconcile()
	require.NoError(t, f.kube.Get(context.Background(), key, p), "the next try makes a new Pod")
	p.Status.Phase = corev1.PodSucceeded
	p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "snapshot", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		Message: `{"key":"ns/demo/demo-r4711.db","size":2032,"sha256":"ab","revision":4711,"contents":{"keys":1000,"hashKV":7,"compactRevision":4000}}`}}}}
	require.NoError(t, f.kube.Status().Update(context.Background(), p))
	b, _ = f.reconcile()
	require.Equal(t, v1alpha1.BackupSucceeded, b.Status.Phase)
	a := b.Status.Artifact
	require.Equal(t, "pvc://backups/etcd/ns/demo/demo-r4711.db", a.URI)
	require.Equal(t, int64(4711), a.Revision)
	require.Equal(t, "demo-1", a.Member)
	require.Equal(t, "c1", a.ClusterID)
	require.Equal(t, "3.6.16", a.EtcdVersion)
	require.Equal(t, &v1alpha1.Contents{Keys: 1000, HashKV: 7, CompactRevision: 4000}, a.Contents)
	require.True(t, apierrors.IsNotFound(f.kube.Get(context.Background(), key, &corev1.Pod{})), "the Pod goes once read")
}

// A drill past its deadline says what its Pod waited on.
func TestDrillDeadlineSaysWhatThePodWaitedOn(t *testing.T) {
	waiting := func(name, reason, msg string) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}
	}
	running := corev1.ContainerStatus{Name: "restore-fetch", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
	p := &corev1.Pod{}
	require.Empty(t, waitingOn(p))
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{running}
	p.Status.ContainerStatuses = []corev1.ContainerStatus{waiting("etcd", "PodInitializing", "")}
	require.Equal(t, " (restore-fetch still runs)", waitingOn(p))
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{waiting("restore-fetch", "ImagePullBackOff", "Back-off pulling image \"op\"")}
	require.Equal(t, ` (restore-fetch waits: ImagePullBackOff: Back-off pulling image "op")`, waitingOn(p))
}
