package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/test/framework"
	"github.com/etcdplan/etcdplan/test/objstore"
)

// Every member's volume wiped: once approved, the cluster starts anew from its newest
// backup on a new seed, under a new cluster ID, and serves exactly what that backup holds;
// the lost members' Pods and volumes go. The cluster serves TLS on both sides, before and
// after: the new seed and its members take the cluster's certificates.
func TestTotalLossRestoresTheNewestBackup(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	before := framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto} })
	m := minioFor(t, ns, objstore.FreeAddrOn(t, framework.Env.Stack.Instance().BridgeIP()))
	ctx := context.Background()
	dest := framework.MinIODest(m.Endpoint)

	cli := framework.ClusterClient(t, ns, "demo")
	written := map[string]string{}
	put := func(from, to int) { putData(t, cli, written, from, to) }
	put(0, 100)
	framework.CreateBackup(t, ns, "older", dest)
	framework.WaitBackup(t, ns, "older", v1alpha1.BackupSucceeded)
	put(100, 200)
	framework.CreateBackup(t, ns, "newest", dest)
	newest := framework.WaitBackup(t, ns, "newest", v1alpha1.BackupSucceeded)
	require.Equal(t, before.Status.ClusterID, newest.Status.Artifact.ClusterID)
	backedUp := maps.Clone(written)
	put(200, 250) // lost with the volumes: no backup holds them

	// Every volume wiped before any Pod goes: a Pod re-created while another member's
	// volume still held data would let the plan count that member as a survivor.
	for _, name := range []string{"demo-0", "demo-1", "demo-2"} {
		require.NoError(t, framework.Env.Stack.WipePVC(ctx, ns, name))
	}
	for _, name := range []string{"demo-0", "demo-1", "demo-2"} {
		require.NoError(t, framework.Env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: framework.MetaName(ns, name)}))
	}
	c := framework.WaitFor(t, ns, "demo", 3*time.Minute, "a restore awaiting approval", func(c *v1alpha1.EtcdCluster) bool {
		return c.Status.Plan != nil && c.Status.Plan.Phase == v1alpha1.PlanAwaitingApproval &&
			slices.ContainsFunc(c.Status.Plan.Steps, func(s plan.Step) bool { return s.Action == plan.RestoreFromBackup })
	})
	s := c.Status.Plan.Steps[0]
	require.Equal(t, plan.RestoreFromBackup, s.Action)
	require.Equal(t, "newest", s.Backup)
	require.Contains(t, s.Reason, fmt.Sprintf("EtcdBackup newest (revision %d, taken ", newest.Status.Artifact.Revision))
	stalled := framework.Condition(c, fluxmeta.StalledCondition)
	require.NotNil(t, stalled)
	require.Equal(t, "QuorumLost", stalled.Reason)
	require.Contains(t, stalled.Message, "starts the cluster anew from EtcdBackup newest")
	require.Equal(t, before.Status.ClusterID, c.Status.ClusterID, "nothing runs before approval")

	id := c.Status.Plan.ID
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Annotations = map[string]string{v1alpha1.AnnotationApprove: id} })
	c = framework.WaitFor(t, ns, "demo", 5*time.Minute, "three voters again, none of the lost ones", func(c *v1alpha1.EtcdCluster) bool {
		return framework.Ready(c) && len(c.Status.Members) == 3 && !slices.ContainsFunc(c.Status.Members, func(m v1alpha1.MemberStatus) bool {
			return m.Name == "demo-0" || m.Name == "demo-1" || m.Name == "demo-2"
		})
	})
	require.NotEqual(t, before.Status.ClusterID, c.Status.ClusterID, "a new etcd cluster")
	require.Equal(t, newest.Status.Artifact.URI, c.Status.RestoredFrom)
	framework.RequireHistory(t, c, "RestoreFromBackup "+s.Member)
	require.Len(t, framework.CheckMembership(t, ns, "demo").Members, 3)
	require.Equal(t, backedUp, keys(t, ns, "demo", "/data/"), "exactly what the newest backup holds")
	for _, name := range []string{"demo-0", "demo-1", "demo-2"} {
		var claim corev1.PersistentVolumeClaim
		err := framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &claim)
		require.True(t, err != nil || claim.DeletionTimestamp != nil, "the lost member %s's claim goes", name)
	}
	var claim corev1.PersistentVolumeClaim
	require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: s.Member}, &claim))
	require.NotContains(t, claim.Annotations, vocab.AnnotationRestoreSeed, "the mark goes once a quorum answers")
}

// keys reads every key under prefix from a cluster, with its value.
func keys(t *testing.T, ns, name, prefix string) map[string]string {
	t.Helper()
	resp, err := framework.ClusterClient(t, ns, name).Get(context.Background(), prefix, clientv3.WithPrefix())
	require.NoError(t, err)
	got := map[string]string{}
	for _, kv := range resp.Kvs {
		got[string(kv.Key)] = string(kv.Value)
	}
	return got
}

// Bad input loses nothing and says what is wrong: a snapshot corrupted or truncated in
// its store is refused by the seed's checksum checks, the new cluster stalls with
// RestoreFailed naming the check, and no member joins; a backup to an endpoint that does
// not answer says StoreUnavailable while it is retried.
func TestBadSnapshotsAndStoresAreRefused(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	framework.CreateReady(t, ns, 1)
	m := minioFor(t, ns, objstore.FreeAddrOn(t, framework.Env.Stack.Instance().BridgeIP()))
	ctx := context.Background()
	_, err := framework.EtcdClient(t, framework.Endpoints(t, ns, "demo")).Put(ctx, "/data/k", strings.Repeat("v", 4096))
	require.NoError(t, err)

	// Each bad object stands for one good backup: its bytes in the store are replaced.
	bad := map[string]func([]byte) []byte{
		"corrupt":   func(b []byte) []byte { b[len(b)/2] ^= 0xff; return b },
		"truncated": func(b []byte) []byte { return b[:len(b)/2] },
	}
	for name, f := range bad {
		framework.CreateBackup(t, ns, name, framework.MinIODest(m.Endpoint))
		spoil(t, m, framework.WaitBackup(t, ns, name, v1alpha1.BackupSucceeded).Status.Artifact.URI, f)
		c := framework.NewCluster(ns, "from-"+name, 3)
		c.Spec.UpdateStrategy.ProgressDeadlineSeconds = 20
		c.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Restore: &v1alpha1.RestoreSpec{BackupName: name}}
		require.NoError(t, framework.Env.Client.Create(ctx, c))
	}
	for name := range bad {
		c := framework.Refused(t, ns, "from-"+name, 3*time.Minute, "RestoreFailed")
		msg := conditions.GetMessage(c, fluxmeta.StalledCondition)
		require.Contains(t, msg, "restoring from EtcdBackup "+name+" failed in restore-fetch", msg)
		require.Contains(t, msg, "does not match", msg)
		require.Len(t, c.Status.Members, 0, "no member joined")
		require.Len(t, framework.MemberPods(t, ns, c.Name), 1, "the seed's Pod is kept for its logs, and no other starts")
	}

	// A closed port on the stack's bridge: the operator reaches the address, nothing listens.
	closed := objstore.FreeAddrOn(t, framework.Env.Stack.Instance().BridgeIP())
	framework.CreateBackup(t, ns, "unreachable", framework.MinIODest("http://"+closed))
	var last v1alpha1.EtcdBackupStatus
	if !assert.Eventually(t, func() bool {
		var b v1alpha1.EtcdBackup
		require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "unreachable"}, &b))
		last = b.Status
		ready := apimeta.FindStatusCondition(b.Status.Conditions, fluxmeta.ReadyCondition)
		return ready != nil && ready.Reason == "StoreUnavailable" && strings.Contains(ready.Message, closed) &&
			b.Status.Phase != v1alpha1.BackupSucceeded && !strings.Contains(fmt.Sprint(b.Status), m.Password)
	}, time.Minute, 200*time.Millisecond) {
		t.Fatalf("an unreachable store (%s) is named, and retried; the backup's last status: %+v", closed, last)
	}

	// A store that fills up says StoreFull, keeps no part of the snapshot, and is tried
	// again: once there is room, the backup succeeds.
	small := objstore.StartSmallMinIO(t, objstore.FreeAddrOn(t, framework.Env.Stack.Instance().BridgeIP()), 4<<20)
	small.Bucket(t, "etcd-backups")
	for i := range 5 {
		_, err := framework.EtcdClient(t, framework.Endpoints(t, ns, "demo")).Put(ctx, fmt.Sprintf("/big/%d", i), strings.Repeat("v", 1<<20))
		require.NoError(t, err)
	}
	framework.CreateBackup(t, ns, "full", framework.MinIODest(small.Endpoint))
	require.Eventually(t, func() bool {
		var b v1alpha1.EtcdBackup
		require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "full"}, &b))
		ready := apimeta.FindStatusCondition(b.Status.Conditions, fluxmeta.ReadyCondition)
		return ready != nil && ready.Reason == "StoreFull" && strings.Contains(ready.Message, "XMinioStorageFull") &&
			strings.Contains(ready.Message, "free space there") && b.Status.Phase == v1alpha1.BackupPending
	}, time.Minute, 200*time.Millisecond, "a full store is named, and retried")
	objs, err := small.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("etcd-backups")})
	require.NoError(t, err)
	require.Empty(t, objs.Contents, "no part of the snapshot stays")
	small.Resize(t, 256<<20)
	require.Greater(t, framework.WaitBackup(t, ns, "full", v1alpha1.BackupSucceeded).Status.Artifact.Size, int64(5<<20))
}

// Restore drills on real etcd: a good backup restores into a scratch etcd holding the keys
// and history hash the cluster had (compacted history included); a corrupt object, and an
// artifact that records other contents than the snapshot holds, fail their drills and say
// where. spec.verify set on a backup that succeeded drills it then.
func TestRestoreDrillsVerifyBackups(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	framework.CreateReady(t, ns, 1)
	m := minioFor(t, ns, objstore.FreeAddrOn(t, framework.Env.Stack.Instance().BridgeIP()))
	ctx := context.Background()
	dest := framework.MinIODest(m.Endpoint)
	cli := framework.EtcdClient(t, framework.Endpoints(t, ns, "demo"))
	var rev int64
	for i := range 150 {
		r, err := cli.Put(ctx, fmt.Sprintf("/data/%04d", i), strings.Repeat("v", i))
		require.NoError(t, err)
		rev = r.Header.Revision
	}
	_, err := cli.Compact(ctx, rev-50)
	require.NoError(t, err)
	_, err = cli.Delete(ctx, "/data/0007")
	require.NoError(t, err)

	framework.CreateBackup(t, ns, "good", dest, verify)
	for _, name := range []string{"corrupt", "forged"} {
		framework.CreateBackup(t, ns, name, dest)
	}
	good := waitVerified(t, ns, "good", metav1.ConditionTrue)
	require.Equal(t, int64(149), good.Status.Artifact.Contents.Keys)
	require.Equal(t, rev-50, good.Status.Artifact.Contents.CompactRevision)
	require.Contains(t, conditions.GetMessage(good, v1alpha1.VerifiedCondition),
		fmt.Sprintf("holds the 149 keys and the history hash the cluster had at revision %d", good.Status.Artifact.Revision))
	require.True(t, conditions.IsReady(good))
	require.Eventually(t, func() bool {
		var pods corev1.PodList
		require.NoError(t, framework.Env.Client.List(ctx, &pods, client.InNamespace(ns), client.HasLabels{vocab.LabelBackup}))
		return len(pods.Items) == 0
	}, time.Minute, 200*time.Millisecond, "the scratch etcd goes once read")

	corrupt := framework.WaitBackup(t, ns, "corrupt", v1alpha1.BackupSucceeded)
	spoil(t, m, corrupt.Status.Artifact.URI, func(b []byte) []byte { b[len(b)/2] ^= 0xff; return b })
	forged := framework.WaitBackup(t, ns, "forged", v1alpha1.BackupSucceeded)
	forged.Status.Artifact.Contents.Keys++
	require.NoError(t, framework.Env.Client.Status().Update(ctx, forged))
	for _, name := range []string{"corrupt", "forged"} {
		b := &v1alpha1.EtcdBackup{}
		require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, b))
		framework.PatchSpec(t, b, func() { b.Spec.Verify = true })
	}
	corrupt = waitVerified(t, ns, "corrupt", metav1.ConditionFalse)
	require.Equal(t, "DrillFailed", conditions.GetReason(corrupt, v1alpha1.VerifiedCondition))
	require.Contains(t, conditions.GetMessage(corrupt, v1alpha1.VerifiedCondition), "failed in restore-fetch (exit code 1)")
	require.False(t, conditions.IsReady(corrupt), "a backup that does not restore is not ready")
	forged = waitVerified(t, ns, "forged", metav1.ConditionFalse)
	require.Equal(t, "ContentsDiffer", conditions.GetReason(forged, v1alpha1.VerifiedCondition))
	require.Contains(t, conditions.GetMessage(forged, v1alpha1.VerifiedCondition), "holds 149 keys at revision")
	require.Contains(t, conditions.GetMessage(forged, v1alpha1.VerifiedCondition), "where the cluster held 150")
}

// waitVerified waits for a backup's drill verdict, and fails at once on the other one.
func waitVerified(t *testing.T, ns, name string, want metav1.ConditionStatus) *v1alpha1.EtcdBackup {
	t.Helper()
	b := &v1alpha1.EtcdBackup{}
	for end := time.Now().Add(3 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		require.NoError(t, framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, b))
		v := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.VerifiedCondition)
		switch {
		case v != nil && v.Status != metav1.ConditionUnknown && v.ObservedGeneration == b.Generation && v.Status != want:
			t.Fatalf("backup %s: Verified %s, not %s: %s: %s", name, v.Status, want, v.Reason, v.Message)
		case v != nil && v.Status == want && v.ObservedGeneration == b.Generation:
			return b
		case time.Now().After(end):
			t.Fatalf("backup %s not Verified %s in 3 minutes: phase %s, conditions %+v", name, want, b.Status.Phase, b.Status.Conditions)
		}
	}
}

// A backup to a volume claim, end to end on real etcd: a claim that does not exist is
// named and waited for; a Pod mounting the claim stores the snapshot there and reports it;
// the drill and a new cluster's seed read it from the claim (mounted read-only) and restore
// every key.
func TestBackupToAVolumeClaimAndRestore(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	framework.CreateReady(t, ns, 1)
	ctx := context.Background()
	cli := framework.EtcdClient(t, framework.Endpoints(t, ns, "demo"))
	written := map[string]string{}
	putData(t, cli, written, 0, 120)
	framework.CreateBackup(t, ns, "missing", framework.ClaimDest("backups"))
	require.Eventually(t, func() bool {
		var b v1alpha1.EtcdBackup
		require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "missing"}, &b))
		ready := apimeta.FindStatusCondition(b.Status.Conditions, fluxmeta.ReadyCondition)
		return b.Status.Phase == v1alpha1.BackupPending && ready != nil && ready.Reason == "ClaimNotFound" &&
			strings.Contains(ready.Message, "PersistentVolumeClaim backups does not exist")
	}, time.Minute, 200*time.Millisecond, "a missing claim is named, and waited for")

	createClaim(t, ns, "backups")
	framework.CreateBackup(t, ns, "onclaim", framework.ClaimDest("backups"), verify)
	b := waitVerified(t, ns, "onclaim", metav1.ConditionTrue)
	a := b.Status.Artifact
	require.True(t, strings.HasPrefix(a.URI, "pvc://backups/etcd/"+ns+"/demo/demo-"), a.URI)
	require.Equal(t, int64(120), a.Contents.Keys)
	require.Equal(t, "demo-0", a.Member)
	require.NotEmpty(t, a.ClusterID)
	framework.WaitBackup(t, ns, "missing", v1alpha1.BackupSucceeded)

	c := framework.NewCluster(ns, "restored", 1)
	c.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Restore: &v1alpha1.RestoreSpec{BackupName: "onclaim"}}
	require.NoError(t, framework.Env.Client.Create(ctx, c))
	framework.WaitReady(t, ns, "restored")
	require.Equal(t, written, keys(t, ns, "restored", "/data/"), "every key, from the claim")
	var pods corev1.PodList
	require.NoError(t, framework.Env.Client.List(ctx, &pods, client.InNamespace(ns), client.HasLabels{vocab.LabelBackup}))
	require.Empty(t, pods.Items, "the snapshot Pods go once read")
}
