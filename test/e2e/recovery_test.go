package e2e

import (
	"context"
	"slices"
	"strings"
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
	"github.com/etcdplan/etcdplan/test/framework"
)

func TestScaleToZeroAndBack(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	before := framework.CreateReady(t, ns, 3)
	w := writeAWhile(t, ns, "demo")

	framework.Park(t, ns, "demo")
	var pvcs corev1.PersistentVolumeClaimList
	require.NoError(t, framework.Env.Client.List(context.Background(), &pvcs, client.InNamespace(ns)))
	require.Len(t, pvcs.Items, 3, "a parked cluster keeps its volumes")

	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 3 })
	after := framework.WaitReady(t, ns, "demo")
	require.Equal(t, before.Status.ClusterID, after.Status.ClusterID, "the same cluster comes back")
	w.stillThere() // the writes from before must be there too
	framework.CheckMembership(t, ns, "demo")
}

func TestDeletedPodComesBackAsTheSameMember(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	before := framework.CreateReady(t, ns, 3)
	w := startWriter(t, ns, "demo")
	pod := &corev1.Pod{}
	require.NoError(t, framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo-1"}, pod))
	require.NoError(t, framework.Env.Client.Delete(context.Background(), pod))
	framework.WaitFor(t, ns, "demo", 3*time.Minute, "demo-1 back", func(c *v1alpha1.EtcdCluster) bool {
		p := &corev1.Pod{}
		err := framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo-1"}, p)
		return err == nil && p.UID != pod.UID && framework.Ready(c)
	})
	after := framework.CheckMembership(t, ns, "demo")
	w.stopAndVerify()
	ids := map[string]string{}
	for _, m := range before.Status.Members {
		ids[m.Name] = m.ID
	}
	for _, m := range after.Members {
		require.Equal(t, ids[m.Name], framework.MemberID(m.ID), "member %s keeps its ID", m.Name)
	}
}

func TestWipedMemberIsReplaced(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	framework.CreateReady(t, ns, 3)
	w := startWriter(t, ns, "demo")
	// The disk under demo-1 is replaced: its data goes, then its Pod restarts.
	require.NoError(t, framework.Env.Stack.WipePVC(context.Background(), ns, "demo-1"))
	require.NoError(t, framework.Env.Client.Delete(context.Background(), &corev1.Pod{ObjectMeta: framework.MetaName(ns, "demo-1")}))
	c := framework.WaitFor(t, ns, "demo", 4*time.Minute, "demo-1 replaced", func(c *v1alpha1.EtcdCluster) bool {
		if !framework.Ready(c) {
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
	framework.CheckMembership(t, ns, "demo")
	w.stopAndVerify()
	framework.RequireHistory(t, c, "RemoveMember demo-1")
}

func TestScaleDownMovesLeadershipFirst(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	c := framework.CreateReady(t, ns, 3)
	// Make the member that scale-down removes (the newest) the leader.
	var target uint64
	for _, m := range c.Status.Members {
		if m.Name == "demo-2" {
			target = framework.ParseID(t, m.ID)
		}
	}
	framework.MoveLeader(t, ns, "demo", target)
	w := startWriter(t, ns, "demo")
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 2 })
	c = framework.WaitReady(t, ns, "demo")
	framework.CheckMembership(t, ns, "demo")
	w.stopAndVerify()
	framework.RequireHistory(t, c, "TransferLeadership demo-2, RemoveMember demo-2")
}

// Two of three voters lose their volumes while a backup destination is known (a suspended
// schedule to a claim): the recovery stores the survivor's snapshot, stops its Pod and
// restores the snapshot on three new members at once, under a new cluster ID. Every write
// the survivor had is there; its claim is kept, retained. The cluster serves TLS on both
// sides: the snapshot Pod dials the survivor with the operator's certificate, and the new
// members get theirs.
func TestQuorumLossRestoresTheSurvivorsSnapshot(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	createClaim(t, ns, "backups")
	sched := &v1alpha1.EtcdBackupSchedule{ObjectMeta: framework.MetaName(ns, "nightly")}
	sched.Spec.ClusterRef.Name, sched.Spec.Schedule, sched.Spec.Suspend = "demo", "@daily", true
	sched.Spec.Destination = framework.ClaimDest("backups")
	require.NoError(t, framework.Env.Client.Create(context.Background(), sched))
	before := framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) {
		c.Spec.Recovery = &v1alpha1.RecoverySpec{QuorumLoss: v1alpha1.QuorumLossAutomatic, AutoApproveDataLoss: true}
		c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto}
	})
	ctx := context.Background()
	written := writeToSurvivor(t, ns)

	for _, m := range []string{"demo-1", "demo-2"} {
		require.NoError(t, framework.Env.Stack.WipePVC(ctx, ns, m))
	}
	for _, m := range []string{"demo-1", "demo-2"} {
		require.NoError(t, framework.Env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: framework.MetaName(ns, m)}))
	}
	c := framework.WaitFor(t, ns, "demo", 5*time.Minute, "three voters again, none of the lost ones", func(c *v1alpha1.EtcdCluster) bool {
		return framework.Ready(c) && len(c.Status.Members) == 3 && !slices.ContainsFunc(c.Status.Members, func(m v1alpha1.MemberStatus) bool {
			return m.Name == "demo-0" || m.Name == "demo-1" || m.Name == "demo-2"
		})
	})
	require.NotEqual(t, before.Status.ClusterID, c.Status.ClusterID, "a new etcd cluster")
	framework.RequireHistory(t, c, "SnapshotSurvivor demo-0")
	framework.RequireHistory(t, c, "StopMember demo-0, RestoreFromBackup demo-3")
	l := c.Status.LastRecovery
	require.Equal(t, "RestoreFromBackup demo-3", l.Action+" "+l.Member)
	require.True(t, strings.HasPrefix(l.Backup, "demo-0-survivor-"), l.Backup)
	snap := framework.WaitBackup(t, ns, l.Backup, v1alpha1.BackupSucceeded)
	require.Equal(t, before.Status.ClusterID, snap.Status.Artifact.ClusterID, "the snapshot is of the cluster that lost its quorum")
	// Asked for as soon as no quorum answered (while the wiped members' Pods show their data
	// gone, unless they did first), it records the survivor's raft position; the recovery
	// took it as its own, and took no other.
	require.NotEmpty(t, snap.Annotations[vocab.AnnotationRaftAt], "the survivor's raft term and index when it was asked for")
	var backups v1alpha1.EtcdBackupList
	require.NoError(t, framework.Env.Client.List(ctx, &backups, client.InNamespace(ns)))
	require.Len(t, slices.DeleteFunc(backups.Items, func(b v1alpha1.EtcdBackup) bool { return b.Spec.Member == "" }), 1, "one snapshot of the survivor")
	require.Equal(t, snap.Status.Artifact.URI, c.Status.RestoredFrom)
	require.Len(t, framework.CheckMembership(t, ns, "demo").Members, 3)
	require.Equal(t, written, keys(t, ns, "demo", "/data/"), "every write the survivor had")
	var claim corev1.PersistentVolumeClaim
	require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-0"}, &claim))
	require.Equal(t, "true", claim.Labels[v1alpha1.LabelRetained], "the survivor's claim is kept")
}

// Two of three voters lose their volumes: the recovery plan waits for approval, then the
// survivor restarts alone with --force-new-cluster and new members join it. Every write the
// survivor had is there, in the same etcd cluster. The cluster serves TLS on both sides:
// the survivor and the new members keep their certificates.
func TestQuorumLossRecoversFromTheSurvivor(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	before := framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto} })
	ctx := context.Background()
	written := writeToSurvivor(t, ns)

	for _, m := range []string{"demo-1", "demo-2"} {
		require.NoError(t, framework.Env.Stack.WipePVC(ctx, ns, m))
		require.NoError(t, framework.Env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: framework.MetaName(ns, m)}))
	}
	forced := func(c *v1alpha1.EtcdCluster) bool {
		return c.Status.Plan != nil && slices.ContainsFunc(c.Status.Plan.Steps, func(s plan.Step) bool { return s.Action == plan.ForceNewCluster })
	}
	c := framework.WaitFor(t, ns, "demo", 3*time.Minute, "a recovery awaiting approval", func(c *v1alpha1.EtcdCluster) bool {
		return forced(c) && c.Status.Plan.Phase == v1alpha1.PlanAwaitingApproval
	})
	stalled := framework.Condition(c, fluxmeta.StalledCondition)
	require.NotNil(t, stalled)
	require.Equal(t, "QuorumLost", stalled.Reason)
	require.Contains(t, stalled.Message, "restarts demo-0 (raft term ")
	var pod corev1.Pod
	require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-0"}, &pod))
	require.NotContains(t, pod.Annotations, vocab.AnnotationForceNewCluster, "nothing runs before approval")

	id := c.Status.Plan.ID
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Annotations = map[string]string{v1alpha1.AnnotationApprove: id} })
	c = framework.WaitFor(t, ns, "demo", 5*time.Minute, "three voters again, none of the lost ones", func(c *v1alpha1.EtcdCluster) bool {
		return framework.Ready(c) && len(c.Status.Members) == 3 && !slices.ContainsFunc(c.Status.Members, func(m v1alpha1.MemberStatus) bool {
			return m.Name == "demo-1" || m.Name == "demo-2"
		})
	})
	require.Equal(t, before.Status.ClusterID, c.Status.ClusterID, "the same etcd cluster")
	framework.RequireHistory(t, c, "ForceNewCluster demo-0")
	require.Len(t, framework.CheckMembership(t, ns, "demo").Members, 3)
	require.Equal(t, written, keys(t, ns, "demo", "/data/"), "every write the survivor had")
	var claim corev1.PersistentVolumeClaim
	require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-0"}, &claim))
	require.NotContains(t, claim.Annotations, vocab.AnnotationForceNewCluster, "the mark goes once a quorum answers")
}

// writeToSurvivor writes 200 keys to a cluster demo that serves clients TLS, and returns
// them once demo-0, the member that survives, has them all: a linearizable read through it
// returns once it applied every write acknowledged so far.
func writeToSurvivor(t *testing.T, ns string) map[string]string {
	written := map[string]string{}
	putData(t, framework.ClusterClient(t, ns, "demo"), written, 0, 200)
	survivor := framework.EtcdClientTLS(t, []string{podEndpoint(t, ns, "demo-0")}, framework.ClientTLS(t, ns, "demo"))
	resp, err := survivor.Get(context.Background(), "/data/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.EqualValues(t, len(written), resp.Count, "the survivor applied every write")
	return written
}
