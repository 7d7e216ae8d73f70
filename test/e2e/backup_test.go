package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/test/framework"
	"github.com/etcdplan/etcdplan/test/objstore"
	"github.com/etcdplan/etcdplan/test/stack"
)

// An EtcdBackup streams a follower's snapshot to MinIO, another to a fake-gcs-server; each
// object, restored with etcdutl and served by an etcd of its own, holds every key written
// before, byte for byte. New clusters restored from each (three members from the S3
// EtcdBackup, one from the GCS object named by its key) serve the same keys. A missing
// bucket and wrong credentials fail the backup with the store's refusal, and no credential
// shows in its status. The stores listen on the bridge, where member Pods reach them.
func TestBackupAndRestoreS3AndGCS(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	framework.CreateReady(t, ns, 3)
	m := minioFor(t, ns, objstore.FreeAddrOn(t, framework.Env.Stack.Instance().BridgeIP()))
	ctx := context.Background()
	require.NoError(t, framework.Env.Client.Create(ctx, &corev1.Secret{ObjectMeta: framework.MetaName(ns, "wrong"),
		StringData: map[string]string{"accessKeyID": m.User, "secretAccessKey": "not-the-password"}}))

	written := map[string]string{}
	cli := framework.EtcdClient(t, framework.Endpoints(t, ns, "demo"))
	var rev int64
	for i := range 300 {
		k, v := fmt.Sprintf("/data/%04d", i), strings.Repeat(fmt.Sprint(i), 1+i%50)
		resp, err := cli.Put(ctx, k, v)
		require.NoError(t, err)
		written[k], rev = v, resp.Header.Revision
	}

	s3dest := func(bucket, secret string) v1alpha1.BackupDestination {
		return v1alpha1.BackupDestination{S3: &v1alpha1.S3Destination{Bucket: bucket, Prefix: "etcd", Endpoint: m.Endpoint,
			ForcePathStyle: true, CredentialsSecret: secret}}
	}
	b := framework.CreateBackup(t, ns, "nightly", s3dest("etcd-backups", "s3"))
	b = framework.WaitBackup(t, ns, b.Name, v1alpha1.BackupSucceeded)
	a := b.Status.Artifact
	require.NotNil(t, a)
	require.GreaterOrEqual(t, a.Revision, rev, "the snapshot holds the last write")
	require.Equal(t, "3.6.16", a.EtcdVersion)
	st, err := cli.Status(ctx, podEndpoint(t, ns, a.Member))
	require.NoError(t, err)
	require.NotEqual(t, st.Leader, st.Header.MemberId, "a follower was read, not the leader")
	key := strings.TrimPrefix(a.URI, "s3://etcd-backups/")
	require.True(t, strings.HasPrefix(key, "etcd/"+ns+"/demo/demo-"), a.URI)

	obj, err := m.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("etcd-backups"), Key: aws.String(key)})
	require.NoError(t, err)
	require.Equal(t, written, restoredKeys(t, download(t, obj.Body, a.Size), "/data/"), "every key and value came back from S3")

	g := objstore.StartFakeGCS(t, objstore.FreeAddrOn(t, framework.Env.Stack.Instance().BridgeIP()))
	g.Bucket(t, "etcd-backups")
	b = framework.CreateBackup(t, ns, "to-gcs", v1alpha1.BackupDestination{GCS: &v1alpha1.GCSDestination{Bucket: "etcd-backups", Endpoint: g.Endpoint}})
	a = framework.WaitBackup(t, ns, b.Name, v1alpha1.BackupSucceeded).Status.Artifact
	key, ok := strings.CutPrefix(a.URI, "gs://etcd-backups/")
	require.True(t, ok, a.URI)
	r, err := g.Client(t).Bucket("etcd-backups").Object(key).NewReader(ctx)
	require.NoError(t, err)
	require.Equal(t, written, restoredKeys(t, download(t, r, a.Size), "/data/"), "every key and value came back from GCS")

	fromS3 := framework.NewCluster(ns, "from-s3", 3)
	fromS3.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Restore: &v1alpha1.RestoreSpec{BackupName: "nightly"}}
	fromGCS := framework.NewCluster(ns, "from-gcs", 1)
	fromGCS.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Restore: &v1alpha1.RestoreSpec{Source: &v1alpha1.SnapshotSource{
		BackupDestination: v1alpha1.BackupDestination{GCS: &v1alpha1.GCSDestination{Bucket: "etcd-backups", Endpoint: g.Endpoint}}, Key: key}}}
	for _, c := range []*v1alpha1.EtcdCluster{fromS3, fromGCS} {
		require.NoError(t, framework.Env.Client.Create(ctx, c))
	}
	for _, c := range []*v1alpha1.EtcdCluster{fromS3, fromGCS} {
		got := framework.WaitReady(t, ns, c.Name)
		require.NotEmpty(t, got.Status.RestoredFrom)
		require.Len(t, framework.CheckMembership(t, ns, c.Name).Members, int(c.Spec.Replicas))
		require.Equal(t, written, keys(t, ns, c.Name, "/data/"), "%s serves every key restored from %s", c.Name, got.Status.RestoredFrom)
	}

	for name, want := range map[string]string{"no-bucket": "NoSuchBucket", "wrong-secret": "SignatureDoesNotMatch"} {
		dest := s3dest("missing-bucket", "s3")
		if name == "wrong-secret" {
			dest = s3dest("etcd-backups", "wrong")
		}
		framework.CreateBackup(t, ns, name, dest)
		b := framework.WaitBackup(t, ns, name, v1alpha1.BackupFailed)
		stalled := meta.FindStatusCondition(b.Status.Conditions, fluxmeta.StalledCondition)
		require.NotNil(t, stalled, "%s: %+v", name, b.Status)
		require.Equal(t, "StoreRefused", stalled.Reason)
		require.Contains(t, stalled.Message, want)
		require.NotContains(t, fmt.Sprint(b.Status), "not-the-password")
		require.NotContains(t, fmt.Sprint(b.Status), m.Password)
	}
}

// download writes what r yields to a file, checks its size and returns its path.
func download(t *testing.T, r io.ReadCloser, size int64) string {
	t.Helper()
	defer r.Close()
	file := filepath.Join(t.TempDir(), "snapshot.db")
	f, err := os.Create(file)
	require.NoError(t, err)
	n, err := io.Copy(f, r)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.Equal(t, size, n)
	return file
}

// minioFor starts a MinIO listening on addr (one on the stack's bridge is what member Pods
// reach) with the bucket etcd-backups, and the Secret s3 in ns holding its credentials.
func minioFor(t *testing.T, ns, addr string) *objstore.MinIO {
	t.Helper()
	m := objstore.StartMinIO(t, addr)
	m.Bucket(t, "etcd-backups")
	require.NoError(t, framework.Env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: framework.MetaName(ns, "s3"),
		StringData: map[string]string{"accessKeyID": m.User, "secretAccessKey": m.Password}}))
	return m
}

// createClaim creates a volume claim of 1 GiB to back up to.
func createClaim(t *testing.T, ns, name string) {
	t.Helper()
	require.NoError(t, framework.Env.Client.Create(context.Background(), &corev1.PersistentVolumeClaim{ObjectMeta: framework.MetaName(ns, name),
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}}))
}

// putData writes the keys /data/<from> to /data/<to-1>, with values of varied length, and
// records them in written.
func putData(t *testing.T, cli *clientv3.Client, written map[string]string, from, to int) {
	t.Helper()
	for i := from; i < to; i++ {
		k, v := fmt.Sprintf("/data/%04d", i), strings.Repeat(fmt.Sprint(i), 1+i%40)
		_, err := cli.Put(context.Background(), k, v)
		require.NoError(t, err)
		written[k] = v
	}
}

// verify asks a backup for a restore drill.
func verify(b *v1alpha1.EtcdBackup) { b.Spec.Verify = true }

// spoil replaces the object a backup stored in minioFor's bucket with what f makes of it.
func spoil(t *testing.T, m *objstore.MinIO, uri string, f func([]byte) []byte) {
	t.Helper()
	ctx := context.Background()
	key := strings.TrimPrefix(uri, "s3://etcd-backups/")
	obj, err := m.Client().GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("etcd-backups"), Key: aws.String(key)})
	require.NoError(t, err)
	data, err := io.ReadAll(obj.Body)
	require.NoError(t, err)
	_, err = m.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("etcd-backups"), Key: aws.String(key), Body: bytes.NewReader(f(data))})
	require.NoError(t, err)
}

func podEndpoint(t *testing.T, ns, pod string) string {
	t.Helper()
	var p corev1.Pod
	require.NoError(t, framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: pod}, &p))
	return observe.ClientURL(&p)
}

// restoredKeys restores a snapshot file with etcdutl (which checks its integrity hash),
// serves it with an etcd of its own on the host, and reads the keys under prefix.
func restoredKeys(t *testing.T, file, prefix string) map[string]string {
	t.Helper()
	bin := filepath.Join(framework.Env.Root, "bin", "etcd-"+stack.EtcdVersion)
	dir := filepath.Join(t.TempDir(), "restored")
	out, err := exec.Command(filepath.Join(bin, "etcdutl"), "snapshot", "restore", file, "--data-dir", dir).CombinedOutput()
	require.NoError(t, err, "etcdutl snapshot restore: %s", out)
	clientAddr, peer := objstore.FreeAddr(t), objstore.FreeAddr(t)
	etcd := exec.Command(filepath.Join(bin, "etcd"), "--data-dir", dir, "--listen-client-urls", "http://"+clientAddr,
		"--advertise-client-urls", "http://"+clientAddr, "--listen-peer-urls", "http://"+peer)
	require.NoError(t, etcd.Start())
	t.Cleanup(func() { _ = etcd.Process.Kill(); _ = etcd.Wait() })
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://" + clientAddr}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer cli.Close()
	got := map[string]string{}
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
		if err != nil {
			return false
		}
		for _, kv := range resp.Kvs {
			got[string(kv.Key)] = string(kv.Value)
		}
		return true
	}, time.Minute, 200*time.Millisecond, "the restored etcd serves")
	return got
}

// An EtcdBackupSchedule every 5 s with keepLast 2: backups come one after another, and the
// third-oldest goes, EtcdBackup and stored object alike; once suspended, what stays is the
// two newest, each with its object, and nothing else in the bucket.
func TestBackupScheduleKeepsTheLastTwo(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	framework.CreateReady(t, ns, 1)
	m := minioFor(t, ns, "")
	ctx := context.Background()
	s := &v1alpha1.EtcdBackupSchedule{ObjectMeta: framework.MetaName(ns, "often")}
	s.Spec.ClusterRef.Name, s.Spec.Schedule = "demo", "*/5 * * * * *"
	s.Spec.Destination = framework.MinIODest(m.Endpoint)
	s.Spec.Retention.KeepLast = ptr.To[int32](2)
	_, uris := keepLastTwo(t, s)
	out, err := m.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("etcd-backups")})
	require.NoError(t, err)
	var stored []string
	for _, o := range out.Contents {
		stored = append(stored, "s3://etcd-backups/"+aws.ToString(o.Key))
	}
	require.ElementsMatch(t, uris, stored, "the bucket holds the kept backups' snapshots and nothing else")

	require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKeyFromObject(s), s))
	require.NotNil(t, s.Status.LastSuccessfulTime)
}

// A schedule onto a volume claim that drills every other backup: the first, third, ...
// are restored into scratch etcds and verified, retention deletes the third-oldest's file
// through a Pod that mounts the claim, and the claim holds the kept backups' files alone.
// The cluster serves TLS, as a backup dials it with the operator's certificate.
func TestBackupScheduleOnAClaimDrillsEveryOther(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	metrics := metricsAddr(t)
	framework.StartOperator(t, ns, "--metrics-bind-address="+metrics)
	// With TLS: the snapshot Pods dial as the operator, and its certificates are in the metrics.
	framework.CreateReady(t, ns, 1, func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto} })
	ctx := context.Background()
	createClaim(t, ns, "backups")
	s := &v1alpha1.EtcdBackupSchedule{ObjectMeta: framework.MetaName(ns, "often")}
	s.Spec.ClusterRef.Name, s.Spec.Schedule = "demo", "*/5 * * * * *"
	s.Spec.Destination = framework.ClaimDest("backups")
	s.Spec.Retention.KeepLast = ptr.To[int32](2)
	s.Spec.Verify = &v1alpha1.VerifyPolicy{Every: 2}
	seen, uris := keepLastTwo(t, s)

	for i, b := range seen {
		require.Equal(t, i%2 == 0, b.Spec.Verify, "backup %d of the schedule, %s", i+1, b.Name)
	}
	var kept v1alpha1.EtcdBackupList
	require.NoError(t, framework.Env.Client.List(ctx, &kept, client.InNamespace(ns)))
	verified := ""
	for _, b := range kept.Items {
		if b.Spec.Verify {
			verified = waitVerified(t, ns, b.Name, metav1.ConditionTrue).Name
		}
	}
	require.NotEmpty(t, verified, "one of two kept backups was drilled")
	require.Eventually(t, func() bool {
		require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKeyFromObject(s), s))
		return s.Status.LastVerifiedBackup == verified
	}, time.Minute, 200*time.Millisecond, "the schedule names its last verified backup")

	dir, err := framework.Env.Stack.ClaimDir(ctx, ns, "backups")
	require.NoError(t, err)
	var stored []string
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			stored = append(stored, "pvc://backups/"+filepath.ToSlash(rel))
		}
		return err
	}))
	require.ElementsMatch(t, uris, stored, "the claim holds the kept backups' snapshots and nothing else")
	require.Eventually(t, func() bool {
		var pods corev1.PodList
		require.NoError(t, framework.Env.Client.List(ctx, &pods, client.InNamespace(ns), client.HasLabels{vocab.LabelBackup}))
		return len(pods.Items) == 0
	}, time.Minute, 200*time.Millisecond, "the snapshot, drill and prune Pods go")

	// What the alerts read: the operator's gauges of this cluster and its backups, and
	// etcd's own metrics from the member (kustomize/components/monitoring).
	op, err := framework.MetricsText("http://" + metrics + "/metrics")
	require.NoError(t, err)
	member, err := framework.MetricsText(fmt.Sprintf("http://%s:%d/metrics", framework.MemberPods(t, ns, "demo")[0].Status.PodIP, vocab.MetricsPort))
	require.NoError(t, err)
	requireAlertMetrics(t, op, member)
	ours := []string{`cluster="demo"`, fmt.Sprintf(`namespace="%s"`, ns)}
	require.Equal(t, 1.0, framework.Sum(op, "etcdplan_cluster_voters_healthy", ours...))
	require.Equal(t, 0.0, framework.Sum(op, "etcdplan_cluster_failures_tolerated", ours...))
	last := framework.Sum(op, "etcdplan_cluster_last_backup_timestamp_seconds", ours...)
	require.InDelta(t, float64(time.Now().Unix()), last, 120, "the newest backup was taken a moment ago")
}

// keepLastTwo creates a schedule with keepLast 2, waits until its first backup is deleted,
// suspends it, and waits until its two newest backups alone stay, succeeded. It returns
// every backup it saw, oldest first, and the kept ones' artifact URIs.
func keepLastTwo(t *testing.T, s *v1alpha1.EtcdBackupSchedule) (seen []v1alpha1.EtcdBackup, uris []string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, framework.Env.Client.Create(ctx, s))
	list := func() []v1alpha1.EtcdBackup {
		var l v1alpha1.EtcdBackupList
		require.NoError(t, framework.Env.Client.List(ctx, &l, client.InNamespace(s.Namespace)))
		for _, b := range l.Items {
			require.NotEqual(t, v1alpha1.BackupFailed, b.Status.Phase, "%s: %+v", b.Name, b.Status.Conditions)
			if !slices.ContainsFunc(seen, func(o v1alpha1.EtcdBackup) bool { return o.Name == b.Name }) {
				seen = append(seen, b)
			}
		}
		return l.Items
	}
	require.Eventually(t, func() bool {
		bs := list()
		return len(seen) > 0 && !slices.ContainsFunc(bs, func(b v1alpha1.EtcdBackup) bool { return b.Name == seen[0].Name })
	}, 2*time.Minute, 200*time.Millisecond, "the first backup went")

	require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKeyFromObject(s), s))
	framework.PatchSpec(t, s, func() { s.Spec.Suspend = true })
	// Once the schedule says it is suspended, no reconcile that read it before can still
	// create a backup.
	require.Eventually(t, func() bool {
		require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKeyFromObject(s), s))
		ready := meta.FindStatusCondition(s.Status.Conditions, fluxmeta.ReadyCondition)
		return ready != nil && ready.Reason == "Suspended"
	}, 30*time.Second, 100*time.Millisecond, "the schedule says it is suspended")
	require.Eventually(t, func() bool {
		bs, done := list(), true
		uris = nil
		for _, b := range bs {
			done = done && b.Status.Phase == v1alpha1.BackupSucceeded
			if b.Status.Artifact != nil {
				uris = append(uris, b.Status.Artifact.URI)
			}
		}
		return done && len(bs) == 2
	}, time.Minute, 200*time.Millisecond, "two succeeded backups stay")
	slices.SortStableFunc(seen, func(a, b v1alpha1.EtcdBackup) int { return a.CreationTimestamp.Compare(b.CreationTimestamp.Time) })
	return seen, uris
}
