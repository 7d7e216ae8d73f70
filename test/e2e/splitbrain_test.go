package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/test/framework"
	"github.com/etcdplan/etcdplan/test/objstore"
)

// Members in memory, two of three Pods force-deleted while demo-0 runs on alone: the
// automatic recovery snapshots demo-0 first, stops it, and starts the cluster anew from
// that snapshot (newer than the backup) under a new cluster ID. Behind the client Service
// no more than one cluster ID answers at any look, and every write acknowledged before the
// fault, after the backup too, is served after the recovery.
func TestMemorySurvivorIsSnapshottedAndRestoredAlone(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	before := framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) {
		c.Spec.Storage.Medium = v1alpha1.StorageMediumMemory
		// etcd preallocates its WAL in 64 MB segments, the next one ahead: a tmpfs of 64Mi
		// fills up before the database is written.
		c.Spec.Storage.Size = resource.MustParse("256Mi")
		c.Spec.Recovery = &v1alpha1.RecoverySpec{QuorumLoss: v1alpha1.QuorumLossAutomatic, AutoApproveDataLoss: true}
	})
	m := minioFor(t, ns, objstore.FreeAddrOn(t, framework.Env.Stack.Instance().BridgeIP()))
	ctx := context.Background()

	cli := framework.EtcdClient(t, framework.Endpoints(t, ns, "demo"))
	written := map[string]string{}
	putData(t, cli, written, 0, 50)
	framework.CreateBackup(t, ns, "nightly", framework.MinIODest(m.Endpoint))
	backup := framework.WaitBackup(t, ns, "nightly", v1alpha1.BackupSucceeded)
	putData(t, cli, written, 50, 150) // no backup holds these: only the members' memory
	// A linearizable read through demo-0 returns once it applied every write acknowledged
	// so far: the survivor holds them all.
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	resp, err := framework.EtcdClient(t, []string{podEndpoint(t, ns, "demo-0")}).Get(rctx, "/data/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.EqualValues(t, len(written), resp.Count)
	require.Greater(t, resp.Header.Revision, backup.Status.Artifact.Revision)
	var survivorID string
	for _, mem := range before.Status.Members {
		if mem.Name == "demo-0" {
			survivorID = mem.ID
		}
	}
	require.NotEmpty(t, survivorID)

	looks := watchClusterIDs(t, ns, "demo")
	// Both at once, with no grace: the operator sees a majority gone in one look.
	deleted := make(chan error, 2)
	for _, name := range []string{"demo-1", "demo-2"} {
		go func() {
			deleted <- framework.Env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: framework.MetaName(ns, name)}, client.GracePeriodSeconds(0))
		}()
	}
	require.NoError(t, <-deleted)
	require.NoError(t, <-deleted)
	c := framework.WaitFor(t, ns, "demo", 5*time.Minute, "three voters of a new cluster, none of the old members", func(c *v1alpha1.EtcdCluster) bool {
		return framework.Ready(c) && len(c.Status.Members) == 3 && c.Status.ClusterID != before.Status.ClusterID &&
			!slices.ContainsFunc(c.Status.Members, func(m v1alpha1.MemberStatus) bool {
				return m.Name == "demo-0" || m.Name == "demo-1" || m.Name == "demo-2"
			})
	})
	looks.stop()
	seen := looks.verdict(t)
	require.Equal(t, []string{before.Status.ClusterID, c.Status.ClusterID}, seen,
		"the old cluster served until it was stopped, then the restored one, and never both")

	survivor := &v1alpha1.EtcdBackup{}
	name := "demo-0-survivor-" + survivorID
	require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, survivor), "the survivor's snapshot %s", name)
	require.Equal(t, v1alpha1.BackupSucceeded, survivor.Status.Phase, "%+v", survivor.Status.Conditions)
	require.Equal(t, survivorID, survivor.Spec.Member)
	a := survivor.Status.Artifact
	require.NotNil(t, a)
	require.Greater(t, a.Revision, backup.Status.Artifact.Revision, "the survivor's snapshot is newer than the backup")
	require.GreaterOrEqual(t, a.Revision, resp.Header.Revision, "it holds the last acknowledged write")
	require.Equal(t, before.Status.ClusterID, a.ClusterID)

	require.Equal(t, before.Status.ClusterID, c.Status.PreviousClusterID)
	require.Equal(t, a.URI, c.Status.RestoredFrom, "restored from the survivor's snapshot, not the older backup")
	// History, newest first: the snapshot's plan succeeded, then demo-0 was stopped, then a
	// seed restored (its plan may be superseded later on: the restore is on record in
	// status.lastRecovery, finished once the seed answered through a quorum).
	snapshot := historyIndex(c, "SnapshotSurvivor demo-0", true)
	stop := historyIndex(c, "StopMember demo-0", false)
	restore := historyIndex(c, "RestoreFromBackup demo-", false)
	require.True(t, snapshot >= 0 && stop >= 0 && restore >= 0 && restore <= stop && stop < snapshot,
		"the survivor snapshotted, stopped, then a seed restored: %+v", c.Status.History)
	l := c.Status.LastRecovery
	require.NotNil(t, l)
	require.Equal(t, "RestoreFromBackup "+name, l.Action+" "+l.Backup)
	require.NotNil(t, l.FinishedAt, "%+v", l)
	require.Equal(t, c.Status.ClusterID, l.ClusterID)
	require.Equal(t, before.Status.ClusterID, l.FromClusterID)
	require.Len(t, framework.CheckMembership(t, ns, "demo").Members, 3)
	require.Equal(t, written, keys(t, ns, "demo", "/data/"), "every acknowledged write, after the backup's too")
	t.Logf("%d looks at the client Service's endpoints, one every 100 ms; cluster IDs in turn: %v", looks.n, seen)
}

// historyIndex is the index in status.history (newest first) of the newest plan whose
// actions contain actions, and that succeeded when succeeded is set; -1 for none.
func historyIndex(c *v1alpha1.EtcdCluster, actions string, succeeded bool) int {
	return slices.IndexFunc(c.Status.History, func(h v1alpha1.PlanRecord) bool {
		return strings.Contains(h.Actions, actions) && (!succeeded || h.Phase == v1alpha1.PlanSucceeded)
	})
}

// idWatch looks every 100 ms at the ready addresses of a cluster's client Service (its
// EndpointSlices) and asks each, with a short timeout, which etcd cluster it serves.
type idWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	n      int      // looks taken
	seen   []string // cluster IDs answering, in the order they first answered
	split  []string // looks at which more than one cluster ID answered
}

func watchClusterIDs(t *testing.T, ns, cluster string) *idWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &idWatch{cancel: cancel, done: make(chan struct{})}
	svc := vocab.ClientService((&v1alpha1.EtcdCluster{ObjectMeta: framework.MetaName(ns, cluster)}).Name)
	clients := map[string]*clientv3.Client{} // by address, kept across looks
	go func() {
		defer close(w.done)
		defer func() {
			for _, c := range clients {
				_ = c.Close()
			}
		}()
		for ctx.Err() == nil {
			start := time.Now()
			answers := w.look(ctx, ns, svc, clients)
			if ctx.Err() != nil {
				return
			}
			ids := slices.Sorted(maps.Keys(answers))
			w.mu.Lock()
			w.n++
			for _, id := range ids {
				if !slices.Contains(w.seen, id) {
					w.seen = append(w.seen, id)
				}
			}
			if len(ids) > 1 {
				w.split = append(w.split, fmt.Sprintf("%s: %v", start.Format("15:04:05.000"), answers))
			}
			w.mu.Unlock()
			time.Sleep(100*time.Millisecond - time.Since(start))
		}
	}()
	return w
}

// look asks every ready address of the Service for its member list (serializable: a member
// without quorum answers too) and returns, by cluster ID, the addresses that answered. An
// answer from a member of another namespace (an address another test's Pod took over
// before the EndpointSlice caught up) does not count.
func (w *idWatch) look(ctx context.Context, ns, svc string, clients map[string]*clientv3.Client) map[string][]string {
	var eps discoveryv1.EndpointSliceList
	if err := framework.Env.Client.List(ctx, &eps, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: svc}); err != nil {
		return nil
	}
	var addrs []string
	for _, s := range eps.Items {
		for _, e := range s.Endpoints {
			if e.Conditions.Ready == nil || *e.Conditions.Ready {
				addrs = append(addrs, e.Addresses...)
			}
		}
	}
	answers := map[string][]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, addr := range addrs {
		cli := clients[addr]
		if cli == nil {
			var err error
			cli, err = clientv3.New(clientv3.Config{Endpoints: []string{fmt.Sprintf("http://%s:%d", addr, vocab.ClientPort)}, Logger: zap.NewNop()})
			if err != nil {
				continue
			}
			clients[addr] = cli
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			lctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
			defer cancel()
			list, err := cli.MemberList(lctx, clientv3.WithSerializable())
			if err != nil || !ours(list, ns) {
				return
			}
			mu.Lock()
			defer mu.Unlock()
			id := framework.MemberID(list.Header.ClusterId)
			answers[id] = append(answers[id], addr)
		}()
	}
	wg.Wait()
	return answers
}

// ours: the member that answered has a peer URL of a member of namespace ns.
func ours(list *clientv3.MemberListResponse, ns string) bool {
	for _, m := range list.Members {
		if m.ID == list.Header.MemberId {
			return slices.ContainsFunc(m.PeerURLs, func(u string) bool { return strings.Contains(u, "."+ns+".svc") })
		}
	}
	return false
}

func (w *idWatch) stop() {
	w.cancel()
	<-w.done
}

// verdict fails the test when more than one cluster ID answered at any look, and returns
// the cluster IDs that answered, in the order they first did.
func (w *idWatch) verdict(t *testing.T) []string {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Empty(t, w.split, "more than one etcd cluster answered behind the client Service (%d looks)", w.n)
	return w.seen
}

// Every voter's volume wiped while a learner joins: the operator was frozen right after it
// created the learner's Pod, so the learner runs, caught up, and is never promoted. The
// automatic restore stops the learner's Pod before its seed starts; at every look behind the
// client Service at most one cluster answers, and the restored cluster holds the backup's
// writes.
func TestRestoreStopsAJoiningLearnerFirst(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	op := framework.StartOperator(t, ns)
	createClaim(t, ns, "backups")
	before := framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) {
		c.Spec.Recovery = &v1alpha1.RecoverySpec{QuorumLoss: v1alpha1.QuorumLossAutomatic, AutoApproveDataLoss: true}
	})
	ctx := context.Background()
	written := map[string]string{}
	putData(t, framework.EtcdClient(t, framework.Endpoints(t, ns, "demo")), written, 0, 50)
	framework.CreateBackup(t, ns, "nightly", framework.ClaimDest("backups"))
	framework.WaitBackup(t, ns, "nightly", v1alpha1.BackupSucceeded)

	// The learner's Pod starts its containers well after the object exists: freezing the
	// operator as soon as it does leaves the learner added and started, never promoted.
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 4 })
	var learner corev1.Pod
	require.Eventually(t, func() bool {
		return framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-3"}, &learner) == nil
	}, 2*time.Minute, 10*time.Millisecond, "the learner's Pod")
	op.Pause()
	paused := true
	defer func() {
		if paused {
			op.Resume()
		}
	}()
	learnerID := ""
	require.Eventually(t, func() bool {
		list, err := framework.EtcdClient(t, framework.Endpoints(t, ns, "demo")).MemberList(ctx)
		if err != nil {
			return false
		}
		for _, m := range list.Members {
			if m.Name == "demo-3" && m.IsLearner {
				learnerID = framework.MemberID(m.ID)
			}
		}
		return learnerID != ""
	}, time.Minute, 100*time.Millisecond, "demo-3 runs as a learner")

	looks := watchClusterIDs(t, ns, "demo")
	for _, m := range []string{"demo-0", "demo-1", "demo-2"} {
		require.NoError(t, framework.Env.Stack.WipePVC(ctx, ns, m))
		require.NoError(t, framework.Env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: framework.MetaName(ns, m)}, client.GracePeriodSeconds(0)))
	}
	op.Resume()
	paused = false
	c := framework.WaitFor(t, ns, "demo", 5*time.Minute, "four voters of a new cluster", func(c *v1alpha1.EtcdCluster) bool {
		return framework.Ready(c) && len(c.Status.Members) == 4 && c.Status.ClusterID != "" && c.Status.ClusterID != before.Status.ClusterID
	})
	looks.stop()
	seen := looks.verdict(t)
	require.Equal(t, before.Status.ClusterID, c.Status.PreviousClusterID)
	stop := historyIndex(c, "StopMember demo-3", false)
	restore := historyIndex(c, "RestoreFromBackup", false)
	require.True(t, stop >= 0 && restore >= 0 && restore <= stop, "the learner stopped, then a seed restored: %+v", c.Status.History)
	l := c.Status.LastRecovery
	require.True(t, l != nil && l.Action == "RestoreFromBackup" && l.FinishedAt != nil && l.ClusterID == c.Status.ClusterID, "%+v", l)
	var now corev1.Pod
	err := framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-3"}, &now)
	require.True(t, err != nil || now.UID != learner.UID, "the learner's Pod is gone")
	for _, m := range c.Status.Members {
		require.NotEqual(t, learnerID, m.ID, "the old learner is no member of the restored cluster")
	}
	require.Equal(t, written, keys(t, ns, "demo", "/data/"), "the backup's writes")
	t.Logf("%d looks at the client Service's endpoints; cluster IDs in turn: %v", looks.n, seen)
}
