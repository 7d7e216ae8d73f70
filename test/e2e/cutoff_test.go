package e2e

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/test/framework"
)

// recoveryActions are the steps that start a cluster anew or snapshot a survivor: none may
// be planned while a quorum of members still runs.
var recoveryActions = []plan.Action{plan.RestoreFromBackup, plan.ForceNewCluster, plan.SnapshotSurvivor}

// Members in memory, the nodes of two of them cut off from the API server and their Pods
// deleted: the Pods stay Terminating while etcd runs on in them (their kubelets never see
// the deletion), as when nodes lose the control plane. Those members are down, not lost
// (their data goes only with their Pods): for as long as the cut lasts the operator plans
// no recovery, the cluster keeps its ID, serves linearizable reads and acknowledges
// writes. Reconnected, the nodes stop the Pods, the two members' data goes with them, and
// the cluster recovers from a snapshot of the survivor, every acknowledged write kept.
// Cutting nodes off freezes every Pod on them: the test needs node-1..3 to itself, and
// `make test` runs it after the others (ETCDPLAN_STACK_EXCLUSIVE=1), beside the real node's
// test, whose Pods all run on node-4.
func TestExclusiveMemoryMembersTerminatingOnCutOffNodesKeepServing(t *testing.T) {
	if os.Getenv("ETCDPLAN_STACK_EXCLUSIVE") != "1" {
		t.Skip("cuts nodes off the API server: run alone by `make test` with ETCDPLAN_STACK_EXCLUSIVE=1")
	}
	t.Parallel()
	start := time.Now()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	ctx := context.Background()
	// Where the survivor's snapshot goes: the destination of a schedule (suspended, so it
	// takes no backup of its own).
	createClaim(t, ns, "backups")
	sched := &v1alpha1.EtcdBackupSchedule{ObjectMeta: framework.MetaName(ns, "nightly")}
	sched.Spec.ClusterRef.Name, sched.Spec.Schedule, sched.Spec.Suspend = "demo", "@daily", true
	sched.Spec.Destination = framework.ClaimDest("backups")
	require.NoError(t, framework.Env.Client.Create(ctx, sched))
	before := framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) {
		c.Spec.Storage.Medium = v1alpha1.StorageMediumMemory
		c.Spec.Storage.Size = resource.MustParse("256Mi") // etcd's WAL preallocates 64 MB segments
		c.Spec.Recovery = &v1alpha1.RecoverySpec{QuorumLoss: v1alpha1.QuorumLossAutomatic, AutoApproveDataLoss: true}
		// One member per node: cutting a node off cuts off one member.
		c.Spec.Affinity = &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey:   corev1.LabelHostname,
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{v1alpha1.LabelCluster: "demo"}},
			}}}}
	})
	survivor, victims := "demo-0", []string{"demo-1", "demo-2"}
	nodes := map[string]string{}
	victimURLs := map[string]string{}
	for _, p := range framework.MemberPods(t, ns, "demo") {
		nodes[p.Name] = p.Spec.NodeName
	}
	require.Len(t, nodes, 3)
	require.NotEqual(t, nodes[survivor], nodes[victims[0]], "Pods by node: %v", nodes)
	require.NotEqual(t, nodes[survivor], nodes[victims[1]], "Pods by node: %v", nodes)
	require.NotEqual(t, nodes[victims[0]], nodes[victims[1]], "Pods by node: %v", nodes)
	for _, v := range victims {
		victimURLs[v] = podEndpoint(t, ns, v)
	}

	w := startWriter(t, ns, "demo")
	w.waitAcked()
	t.Cleanup(func() { // whatever happens, the stack's nodes come back for the other tests
		for _, v := range victims {
			if err := framework.Env.Stack.ReconnectNodeToAPI(context.Background(), nodes[v]); err != nil {
				t.Errorf("reconnecting node %s: %v", nodes[v], err)
			}
		}
	})
	for _, v := range victims {
		require.NoError(t, framework.Env.Stack.CutNodeFromAPI(ctx, nodes[v]))
	}
	cut := time.Now()
	ackedAtCut := w.ackedCount()
	for _, v := range victims {
		require.NoError(t, framework.Env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: framework.MetaName(ns, v)})) // graceful: it stays Terminating
	}
	t.Logf("%s: nodes %s and %s cut off from the API server, Pods %v deleted (%d writes acknowledged so far)",
		time.Since(start).Round(time.Second), nodes[victims[0]], nodes[victims[1]], victims, ackedAtCut)

	// For 40 s and more, every second: no recovery planned, the cluster ID kept, a
	// linearizable read through the cluster's endpoints and through each Terminating member,
	// writes acknowledged.
	cli := framework.EtcdClient(t, framework.Endpoints(t, ns, "demo"))
	victimClients := map[string]*clientv3.Client{}
	for _, v := range victims {
		victimClients[v] = framework.EtcdClient(t, []string{victimURLs[v]})
	}
	lastAcked, lastProgress := ackedAtCut, time.Now()
	looks := 0
	var c *v1alpha1.EtcdCluster
	for time.Since(cut) < 42*time.Second {
		tick := time.Now()
		looks++
		c = framework.Get(t, ns, "demo")
		require.Equal(t, before.Status.ClusterID, c.Status.ClusterID, "status.clusterID changed while a quorum runs\n%s", framework.Describe(c))
		requireNoRecovery(t, c)
		for _, v := range victims {
			var p corev1.Pod
			require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: v}, &p), "Pod %s is gone: its node was cut off", v)
			require.NotNil(t, p.DeletionTimestamp, "Pod %s", v)
		}
		if eps := framework.Endpoints(t, ns, "demo"); len(eps) > 0 {
			cli.SetEndpoints(eps...)
		}
		require.NoError(t, linearizableMembers(ctx, cli, before.Status.ClusterID, 3), "through the cluster's endpoints, %s after the cut", time.Since(cut).Round(time.Second))
		for _, v := range victims {
			require.NoError(t, linearizableMembers(ctx, victimClients[v], before.Status.ClusterID, 3),
				"through Terminating member %s, %s after the cut", v, time.Since(cut).Round(time.Second))
		}
		if n := w.ackedCount(); n > lastAcked {
			lastAcked, lastProgress = n, time.Now()
		}
		require.Less(t, time.Since(lastProgress), 10*time.Second, "no write acknowledged for 10 s, %s after the cut", time.Since(cut).Round(time.Second))
		time.Sleep(time.Second - time.Since(tick))
	}
	require.Greater(t, w.ackedCount(), ackedAtCut, "writes acknowledged while the nodes were cut off")
	for _, v := range victims {
		var n corev1.Node
		require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKey{Name: nodes[v]}, &n))
		require.False(t, isNodeReady(&n), "node %s reported nothing for 40 s: the node controller marks it not ready", n.Name)
	}
	t.Logf("%s: %d looks over %s, the cluster kept serving; status: %s", time.Since(start).Round(time.Second), looks,
		time.Since(cut).Round(time.Second), strings.TrimSpace(framework.Describe(c)))

	// The writes end here; a linearizable read through the survivor returns once it applied
	// every write acknowledged so far, so its snapshot holds them all.
	w.cancel()
	<-w.done
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err := framework.EtcdClient(t, []string{podEndpoint(t, ns, survivor)}).Get(rctx, "/writer/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)

	for _, v := range victims {
		require.NoError(t, framework.Env.Stack.ReconnectNodeToAPI(ctx, nodes[v]))
	}
	reconnected := time.Now()
	require.Eventually(t, func() bool {
		for _, v := range victims {
			if err := framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: v}, &corev1.Pod{}); !apierrors.IsNotFound(err) {
				return false
			}
		}
		return true
	}, time.Minute, 100*time.Millisecond, "the reconnected nodes stop and delete the Terminating Pods")
	for _, v := range victims {
		require.Error(t, oldMemberAnswers(ctx, victimClients[v], before.Status.ClusterID), "member %s is gone with its Pod", v)
	}
	t.Logf("%s: nodes reconnected, the Pods gone %s later", time.Since(start).Round(time.Second), time.Since(reconnected).Round(100*time.Millisecond))

	old := append([]string{survivor}, victims...)
	c = framework.WaitFor(t, ns, "demo", 150*time.Second, "three voters of a new cluster", func(c *v1alpha1.EtcdCluster) bool {
		return framework.Ready(c) && len(c.Status.Members) == 3 && c.Status.ClusterID != before.Status.ClusterID &&
			!slices.ContainsFunc(c.Status.Members, func(m v1alpha1.MemberStatus) bool { return slices.Contains(old, m.Name) })
	})
	snapshot := historyIndex(c, "SnapshotSurvivor "+survivor, true)
	restore := historyIndex(c, "RestoreFromBackup demo-", true)
	require.True(t, snapshot >= 0 && restore >= 0 && restore < snapshot, "the survivor snapshotted, then the cluster restored from it: %+v", c.Status.History)
	require.Equal(t, before.Status.ClusterID, c.Status.PreviousClusterID)
	require.Len(t, framework.CheckMembership(t, ns, "demo").Members, 3)
	w.stopAndVerify() // every write acknowledged, before the cut and during it
	t.Logf("%s: recovered %s after the reconnection, restored from %s", time.Since(start).Round(time.Second),
		time.Since(reconnected).Round(time.Second), c.Status.RestoredFrom)
}

// requireNoRecovery fails when the plan in status, or any plan in its history, starts the
// cluster anew or snapshots a survivor.
func requireNoRecovery(t *testing.T, c *v1alpha1.EtcdCluster) {
	t.Helper()
	for _, a := range recoveryActions {
		if p := c.Status.Plan; p != nil {
			for _, s := range p.Steps {
				require.NotEqual(t, a, s.Action, "a recovery is planned while a quorum of members runs\n%s", framework.Describe(c))
			}
		}
		require.Equal(t, -1, historyIndex(c, string(a), false), "a recovery ran while a quorum of members runs: %+v", c.Status.History)
	}
}

// linearizableMembers reads the member list through a quorum and checks the cluster ID and
// the number of members.
func linearizableMembers(ctx context.Context, cli *clientv3.Client, clusterID string, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	list, err := cli.MemberList(ctx)
	if err != nil {
		return err
	}
	if err := framework.SameCluster(list.Header, clusterID); err != nil {
		return err
	}
	if len(list.Members) != n {
		return fmt.Errorf("%d members, want %d: %v", len(list.Members), n, list.Members)
	}
	return nil
}

// oldMemberAnswers is nil when a member of the cluster clusterID answers at the client's
// endpoint (its own view will do).
func oldMemberAnswers(ctx context.Context, cli *clientv3.Client, clusterID string) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	list, err := cli.MemberList(ctx, clientv3.WithSerializable())
	if err != nil {
		return err
	}
	return framework.SameCluster(list.Header, clusterID)
}

func isNodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
