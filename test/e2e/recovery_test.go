package e2e

import (
	"context"
	"slices"
	"testing"
	"time"

	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
)

func TestScaleToZeroAndBack(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	startOperator(t, ns)
	before := createReady(t, ns, 3)
	w := writeAWhile(t, ns, "demo")

	park(t, ns, "demo")
	var pvcs corev1.PersistentVolumeClaimList
	require.NoError(t, env.client.List(context.Background(), &pvcs, client.InNamespace(ns)))
	require.Len(t, pvcs.Items, 3, "a parked cluster keeps its volumes")

	update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 3 })
	after := waitReady(t, ns, "demo")
	require.Equal(t, before.Status.ClusterID, after.Status.ClusterID, "the same cluster comes back")
	w.stillThere() // the writes from before must be there too
	checkMembership(t, ns, "demo")
}

func TestDeletedPodComesBackAsTheSameMember(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	startOperator(t, ns)
	before := createReady(t, ns, 3)
	w := startWriter(t, ns, "demo")
	pod := &corev1.Pod{}
	require.NoError(t, env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo-1"}, pod))
	require.NoError(t, env.client.Delete(context.Background(), pod))
	waitFor(t, ns, "demo", 3*time.Minute, "demo-1 back", func(c *v1alpha1.EtcdCluster) bool {
		p := &corev1.Pod{}
		err := env.client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo-1"}, p)
		return err == nil && p.UID != pod.UID && ready(c)
	})
	after := checkMembership(t, ns, "demo")
	w.stopAndVerify()
	ids := map[string]string{}
	for _, m := range before.Status.Members {
		ids[m.Name] = m.ID
	}
	for _, m := range after.Members {
		require.Equal(t, ids[m.Name], memberID(m.ID), "member %s keeps its ID", m.Name)
	}
}

func TestWipedMemberIsReplaced(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	startOperator(t, ns)
	createReady(t, ns, 3)
	w := startWriter(t, ns, "demo")
	// The disk under demo-1 is replaced: its data goes, then its Pod restarts.
	require.NoError(t, env.stack.WipePVC(context.Background(), ns, "demo-1"))
	require.NoError(t, env.client.Delete(context.Background(), &corev1.Pod{ObjectMeta: metaName(ns, "demo-1")}))
	c := waitFor(t, ns, "demo", 4*time.Minute, "demo-1 replaced", func(c *v1alpha1.EtcdCluster) bool {
		if !ready(c) {
			return false
		}
		for _, m := range c.Status.Members {
			if m.Name == "demo-1" {
				return false
			}
		}
		return true
	})
	require.Len(t, c.Status.Members, 3)
	checkMembership(t, ns, "demo")
	w.stopAndVerify()
	requireHistory(t, c, "RemoveMember demo-1")
}

func TestScaleDownMovesLeadershipFirst(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	startOperator(t, ns)
	c := createReady(t, ns, 3)
	// Make the member that scale-down removes (the newest) the leader.
	var target uint64
	for _, m := range c.Status.Members {
		if m.Name == "demo-2" {
			target = parseID(t, m.ID)
		}
	}
	moveLeader(t, ns, "demo", target)
	w := startWriter(t, ns, "demo")
	update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 2 })
	c = waitReady(t, ns, "demo")
	checkMembership(t, ns, "demo")
	w.stopAndVerify()
	requireHistory(t, c, "TransferLeadership demo-2, RemoveMember demo-2")
}

// Two of three voters lose their volumes: the recovery plan waits for approval, then the
// survivor restarts alone with --force-new-cluster and new members join it. Every write the
// survivor had is there, in the same etcd cluster.
func TestQuorumLossRecoversFromTheSurvivor(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	startOperator(t, ns)
	before := createReady(t, ns, 3)
	ctx := context.Background()
	cli := etcdClient(t, endpoints(t, ns, "demo"))
	written := map[string]string{}
	putData(t, cli, written, 0, 200)
	// A linearizable read through demo-0 returns once it applied every write acknowledged
	// so far: the survivor has them all.
	survivor := etcdClient(t, []string{podEndpoint(t, ns, "demo-0")})
	resp, err := survivor.Get(ctx, "/data/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.EqualValues(t, len(written), resp.Count)

	for _, m := range []string{"demo-1", "demo-2"} {
		require.NoError(t, env.stack.WipePVC(ctx, ns, m))
		require.NoError(t, env.client.Delete(ctx, &corev1.Pod{ObjectMeta: metaName(ns, m)}))
	}
	forced := func(c *v1alpha1.EtcdCluster) bool {
		return c.Status.Plan != nil && slices.ContainsFunc(c.Status.Plan.Steps, func(s plan.Step) bool { return s.Action == plan.ForceNewCluster })
	}
	c := waitFor(t, ns, "demo", 3*time.Minute, "a recovery awaiting approval", func(c *v1alpha1.EtcdCluster) bool {
		return forced(c) && c.Status.Plan.Phase == v1alpha1.PlanAwaitingApproval
	})
	stalled := condition(c, fluxmeta.StalledCondition)
	require.NotNil(t, stalled)
	require.Equal(t, "QuorumLost", stalled.Reason)
	require.Contains(t, stalled.Message, "restarts demo-0 (raft term ")
	var pod corev1.Pod
	require.NoError(t, env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-0"}, &pod))
	require.NotContains(t, pod.Annotations, vocab.AnnotationForceNewCluster, "nothing runs before approval")

	id := c.Status.Plan.ID
	update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Annotations = map[string]string{v1alpha1.AnnotationApprove: id} })
	c = waitFor(t, ns, "demo", 5*time.Minute, "three voters again, none of the lost ones", func(c *v1alpha1.EtcdCluster) bool {
		return ready(c) && len(c.Status.Members) == 3 && !slices.ContainsFunc(c.Status.Members, func(m v1alpha1.MemberStatus) bool {
			return m.Name == "demo-1" || m.Name == "demo-2"
		})
	})
	require.Equal(t, before.Status.ClusterID, c.Status.ClusterID, "the same etcd cluster")
	requireHistory(t, c, "ForceNewCluster demo-0")
	require.Len(t, checkMembership(t, ns, "demo").Members, 3)
	require.Equal(t, written, keys(t, ns, "demo", "/data/"), "every write the survivor had")
	var claim corev1.PersistentVolumeClaim
	require.NoError(t, env.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-0"}, &claim))
	require.NotContains(t, claim.Annotations, vocab.AnnotationForceNewCluster, "the mark goes once a quorum answers")
}
