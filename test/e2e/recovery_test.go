package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
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
