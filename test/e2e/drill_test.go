package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/backupctl"
	"github.com/etcdplan/etcdplan/test/objstore"
)

// A restore drill no node can take is no verdict. The cluster's one member is pinned to a
// node (nodeSelector) and asks for half its free CPU; the drill runs with the same placement
// and resources, so once another workload takes a quarter of it, drills can no longer be
// scheduled. The first backup of a schedule drills before that and is verified; the next
// four wait past the operator's --drill-deadline (20 s here) and end DrillDeadlineExceeded:
// Verified stays Unknown (not False), the backup stays Ready with a time for the next try.
// Retention counts them as good backups: with keepLast 4, all four and their stored objects
// stay (counted as failed, the oldest would go: three failed backups are kept), and so does
// the verified one that keepLast alone would remove. A new cluster restores from the oldest
// of them and serves every key it held; once the other workload is gone, the drills tried
// again on their own verify.
func TestUnschedulableDrillLeavesTheBackupUsable(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	startOperator(t, ns, "--drill-deadline=20s")
	node, free := roomiestNode(t)
	createReady(t, ns, 1, func(c *v1alpha1.EtcdCluster) {
		c.Spec.NodeSelector = map[string]string{corev1.LabelHostname: node}
		c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(free/2, resource.DecimalSI)}
	})
	m := minioFor(t, ns, objstore.FreeAddrOn(t, env.stack.Instance().BridgeIP()))
	ctx := context.Background()
	cli := etcdClient(t, endpoints(t, ns, "demo"))
	written := map[string]string{}
	putData(t, cli, written, 0, 100)

	s := &v1alpha1.EtcdBackupSchedule{ObjectMeta: metaName(ns, "often")}
	s.Spec.ClusterRef.Name, s.Spec.Schedule = "demo", "*/10 * * * * *"
	s.Spec.Destination = minioDest(m.Endpoint)
	s.Spec.Verify = &v1alpha1.VerifyPolicy{Every: 1}
	s.Spec.Retention.KeepLast = ptr.To[int32](10) // lowered below once the backups are taken
	require.NoError(t, env.client.Create(ctx, s))
	backups := func() []v1alpha1.EtcdBackup {
		var l v1alpha1.EtcdBackupList
		require.NoError(t, env.client.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels{backupctl.LabelSchedule: s.Name}))
		slices.SortFunc(l.Items, func(a, b v1alpha1.EtcdBackup) int { return strings.Compare(a.Name, b.Name) }) // names end in their time
		return l.Items
	}
	suspend := func(on bool) {
		t.Helper()
		require.NoError(t, env.client.Get(ctx, client.ObjectKeyFromObject(s), s))
		patchSpec(t, s, func() { s.Spec.Suspend = on })
	}
	waitBackups := func(n int) []v1alpha1.EtcdBackup {
		t.Helper()
		var bs []v1alpha1.EtcdBackup
		require.Eventually(t, func() bool { bs = backups(); return len(bs) >= n }, time.Minute, 100*time.Millisecond, "%d backups", n)
		return bs
	}

	// The first backup, drilled while the node has room.
	verified := waitBackups(1)[0].Name
	suspend(true)
	waitVerified(t, ns, verified, metav1.ConditionTrue)
	require.Len(t, backups(), 1)
	putData(t, cli, written, 100, 150)

	// Another workload takes a quarter of the node's CPU: the member still runs, a drill
	// beside it no longer fits anywhere.
	other := &corev1.Pod{ObjectMeta: metaName(ns, "other-workload"), Spec: corev1.PodSpec{
		NodeSelector: map[string]string{corev1.LabelHostname: node},
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers: []corev1.Container{{Name: "work", Image: "busybox:1.36", Command: []string{"sleep", "3600"},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(free/4, resource.DecimalSI)}},
			SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}}}},
	}}
	require.NoError(t, env.client.Create(ctx, other))
	require.Eventually(t, func() bool {
		require.NoError(t, env.client.Get(ctx, client.ObjectKeyFromObject(other), other))
		return other.Spec.NodeName == node
	}, time.Minute, 100*time.Millisecond, "the other workload is scheduled")

	// Four more backups (the first at once: the schedule catches up), each drilled in vain.
	suspend(false)
	waitBackups(5)
	suspend(true)
	require.Eventually(t, func() bool {
		require.NoError(t, env.client.Get(ctx, client.ObjectKeyFromObject(s), s))
		return conditions.GetReason(s, fluxmeta.ReadyCondition) == "Suspended"
	}, 30*time.Second, 100*time.Millisecond, "the schedule says it is suspended")
	notRun := backups()[1:]
	firstTry := map[string]*v1alpha1.EtcdBackup{} // each backup as its first drill ended
	require.Eventually(t, func() bool {
		for _, b := range backups()[1:] {
			v := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.VerifiedCondition)
			if firstTry[b.Name] == nil && v != nil && v.Reason == "DrillDeadlineExceeded" {
				firstTry[b.Name] = b.DeepCopy()
			}
		}
		return len(firstTry) == len(notRun)
	}, 2*time.Minute, 100*time.Millisecond, "every drill past its deadline")
	for _, b := range firstTry {
		v := apimeta.FindStatusCondition(b.Status.Conditions, v1alpha1.VerifiedCondition)
		require.Equal(t, metav1.ConditionUnknown, v.Status, "%s: a drill that could not run judges nothing", b.Name)
		require.Contains(t, v.Message, "did not serve within 20s (not scheduled: 0/3 nodes are available:", b.Name)
		require.Contains(t, v.Message, "Insufficient cpu", b.Name)
		require.Equal(t, v1alpha1.BackupSucceeded, b.Status.Phase)
		require.True(t, conditions.IsReady(b), "%s may restore", b.Name)
		require.Equal(t, "DrillDeadlineExceeded", conditions.GetReason(b, fluxmeta.ReadyCondition))
		require.False(t, conditions.IsStalled(b))
		require.False(t, b.DrillFailed())
		require.Equal(t, int32(1), b.Status.DrillTries)
		next := b.Status.NextDrillTime
		require.NotNil(t, next, "%s says when its drill is tried again", b.Name)
		require.Contains(t, v.Message, "; tried again at "+next.UTC().Format(time.RFC3339), b.Name)
		// The drill starts once the snapshot is stored, ends 20 s on, and is tried again a
		// minute after that.
		late := next.Sub(b.Status.Artifact.TakenAt.Time) - 80*time.Second
		require.True(t, late > -2*time.Second && late < 15*time.Second, "%s: snapshot at %s, next drill at %s", b.Name, b.Status.Artifact.TakenAt, next)
	}
	require.GreaterOrEqual(t, len(notRun), 4, "more drills that could not run than failed backups are kept")

	// keepLast as many as drills could not run: counted as good backups, they all stay,
	// and the verified one, past keepLast, stays as the newest verified.
	require.NoError(t, env.client.Get(ctx, client.ObjectKeyFromObject(s), s))
	patchSpec(t, s, func() { s.Spec.Retention.KeepLast = ptr.To(int32(len(notRun))) })
	require.Eventually(t, func() bool {
		require.NoError(t, env.client.Get(ctx, client.ObjectKeyFromObject(s), s))
		return s.Status.ObservedGeneration == s.Generation
	}, 30*time.Second, 100*time.Millisecond, "retention ran with keepLast %d", len(notRun))
	time.Sleep(2 * time.Second) // and had time for more
	bs := backups()
	require.Len(t, bs, 1+len(notRun), "no backup removed")
	var uris []string
	for _, b := range bs {
		uris = append(uris, b.Status.Artifact.URI)
		require.False(t, b.DrillFailed(), b.Name)
	}
	out, err := m.Client().ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("etcd-backups")})
	require.NoError(t, err)
	var stored []string
	for _, o := range out.Contents {
		stored = append(stored, "s3://etcd-backups/"+aws.ToString(o.Key))
	}
	require.ElementsMatch(t, uris, stored, "every backup's snapshot stays")
	require.Equal(t, verified, s.Status.LastVerifiedBackup)
	require.True(t, conditions.IsReady(s), "the schedule is Ready: %+v", s.Status.Conditions)

	// The other workload goes: the drills, tried again on their own, find room one at a time.
	// Meanwhile the oldest backup whose drill could not run restores.
	require.NoError(t, env.client.Delete(ctx, other))
	c := newCluster(ns, "copy", 1)
	c.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Restore: &v1alpha1.RestoreSpec{BackupName: notRun[0].Name}}
	require.NoError(t, env.client.Create(ctx, c))
	waitReady(t, ns, "copy")
	require.Equal(t, written, keys(t, ns, "copy", "/data/"), "every key, from %s", notRun[0].Name)
	require.Eventually(t, func() bool {
		for _, b := range backups()[1:] {
			if b.Verified() {
				require.Zero(t, b.Status.DrillTries, b.Name)
				require.Nil(t, b.Status.NextDrillTime, b.Name)
				return true
			}
		}
		return false
	}, 3*time.Minute, 200*time.Millisecond, "a drill tried again verifies its backup")
}

// roomiestNode is the node with the most CPU no Pod asks for, and how much that is in
// millicores (earlier tests' Pods may still hold some).
func roomiestNode(t *testing.T) (string, int64) {
	t.Helper()
	ctx := context.Background()
	var nodes corev1.NodeList
	require.NoError(t, env.client.List(ctx, &nodes))
	var pods corev1.PodList
	require.NoError(t, env.client.List(ctx, &pods))
	asked := map[string]int64{}
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		for _, c := range p.Spec.Containers {
			asked[p.Spec.NodeName] += c.Resources.Requests.Cpu().MilliValue()
		}
	}
	best, most := "", int64(-1)
	for _, n := range nodes.Items {
		if free := n.Status.Allocatable.Cpu().MilliValue() - asked[n.Name]; free > most {
			best, most = n.Name, free
		}
	}
	require.GreaterOrEqual(t, most, int64(2000), "a node with two CPUs free")
	return best, most
}
