package bench

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/test/framework"
	"github.com/etcdplan/etcdplan/test/objstore"
)

// TestBenchBackup measures a backup of a large database to MinIO: how long the snapshot
// takes to stream, how much the operator's memory grows meanwhile, and how long a new
// cluster takes to be Ready restored from it. BENCH_BACKUP_MIB sets the database's size
// (256 MiB by default). make bench runs it.
func TestBenchBackup(t *testing.T) {
	if os.Getenv("BENCH") == "" {
		t.Skip("BENCH is not set: make bench runs the benchmarks")
	}
	mib := 256
	if n, err := strconv.Atoi(os.Getenv("BENCH_BACKUP_MIB")); err == nil && n > 0 {
		mib = n
	}
	ns := framework.Namespace(t)
	b := &bench{t: t}
	op := b.managerWith(ns, "0")
	big := func(c *v1alpha1.EtcdCluster) {
		c.Spec.Storage.Size = resource.MustParse(fmt.Sprintf("%dMi", 3*mib+512))
		quota := int64(2*mib+256) << 20
		c.Spec.Options.QuotaBackendBytes = &quota
	}
	framework.CreateReady(t, ns, 3, big)
	ctx := context.Background()
	cli := framework.EtcdClient(t, framework.Endpoints(t, ns, "demo"))
	value := make([]byte, 1<<20) // incompressible, as a store sees real data
	for i := range mib {
		_, _ = rand.Read(value)
		_, err := cli.Put(ctx, fmt.Sprintf("/big/%05d", i), string(value))
		require.NoError(t, err)
	}
	m := objstore.StartMinIO(t, objstore.FreeAddrOn(t, framework.Env.Stack.Instance().BridgeIP()))
	m.Bucket(t, "etcd-backups")
	require.NoError(t, framework.Env.Client.Create(ctx, &corev1.Secret{ObjectMeta: framework.MetaName(ns, "s3"),
		StringData: map[string]string{"accessKeyID": m.User, "secretAccessKey": m.Password}}))
	rssBefore, peakBefore := memory(t, op.pid())
	start := time.Now()
	framework.CreateBackup(t, ns, "big", framework.MinIODest(m.Endpoint))
	bk := &v1alpha1.EtcdBackup{}
	require.Eventually(t, func() bool {
		require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "big"}, bk))
		require.NotEqual(t, v1alpha1.BackupFailed, bk.Status.Phase, "%+v", bk.Status.Conditions)
		return bk.Status.Phase == v1alpha1.BackupSucceeded
	}, 20*time.Minute, 50*time.Millisecond)
	took := time.Since(start)
	rssAfter, peakAfter := memory(t, op.pid())
	size := bk.Status.Artifact.Size

	// What a backup's contents record costs (a backup reads it after the snapshot): etcd's
	// HashKV at the snapshot's revision, read again here from the same member.
	pod := &corev1.Pod{}
	require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: bk.Status.Artifact.Member}, pod))
	start = time.Now()
	_, err := cli.HashKV(ctx, observe.ClientURL(pod), bk.Status.Artifact.Revision)
	require.NoError(t, err)
	hashTook := time.Since(start)

	start = time.Now()
	require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "big"}, bk))
	framework.PatchSpec(t, bk, func() { bk.Spec.Verify = true })
	require.Eventually(t, func() bool {
		require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "big"}, bk))
		v := apimeta.FindStatusCondition(bk.Status.Conditions, v1alpha1.VerifiedCondition)
		require.False(t, v != nil && v.Status == metav1.ConditionFalse, "%+v", v)
		return v != nil && v.Status == metav1.ConditionTrue && v.ObservedGeneration == bk.Generation
	}, 20*time.Minute, 50*time.Millisecond, "the drill passes")
	drillTook := time.Since(start)

	start = time.Now()
	restored := framework.NewCluster(ns, "restored", 3)
	big(restored)
	restored.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Restore: &v1alpha1.RestoreSpec{BackupName: "big"}}
	require.NoError(t, framework.Env.Client.Create(ctx, restored))
	framework.WaitFor(t, ns, "restored", 20*time.Minute, "restored and Ready", framework.Ready)
	restoreTook := time.Since(start)
	resp, err := framework.EtcdClient(t, framework.Endpoints(t, ns, "restored")).Get(ctx, "/big/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.EqualValues(t, mib, resp.Count, "every key restored")

	report := fmt.Sprintf("backup of a %d MiB database (3 members) to MinIO: %v, %.0f MiB/s (of which its contents record, etcd's HashKV: %v); "+
		"operator RSS %d -> %d MiB, peak %d -> %d MiB (+%d MiB); a restore drill of it Verified in %v; "+
		"a new 3-member cluster restored from it Ready in %v",
		size>>20, took.Round(10*time.Millisecond), float64(size)/(1<<20)/took.Seconds(), hashTook.Round(time.Millisecond),
		rssBefore>>20, rssAfter>>20, peakBefore>>20, peakAfter>>20, (peakAfter-peakBefore)>>20,
		drillTook.Round(100*time.Millisecond), restoreTook.Round(100*time.Millisecond))
	t.Log("bench: " + report)
	fmt.Println(report)
}
