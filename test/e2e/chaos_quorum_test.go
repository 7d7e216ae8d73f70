package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/test/framework"
)

// TestChaosQuorumLoss runs, per seed (CHAOS_SEEDS, as for TestChaos), two quorum losses
// of a three-member cluster whose recovery is automatic, while a client writes: in
// "survivor", two members' volumes are wiped and their Pods deleted, and the cluster
// recovers from the third; in "backup", all three are, and it recovers from its backup.
// The seed draws which members, the order and gaps (under a second) between the wipes, how
// the Pods go (graceful or not) and whether the operator is killed during the recovery.
// Checks: at every look (every 100 ms) at most one etcd cluster answers behind the client
// Service; the cluster comes back with three voters, none of the wiped members, by the
// recovery status.lastRecovery records (or none, when the operator replaced a wiped member
// before the next wipe); every write acknowledged at or below the revision it came back with
// is there, with its value.
func TestChaosQuorumLoss(t *testing.T) {
	for _, seed := range chaosSeeds(t) {
		for _, variant := range []string{"survivor", "backup"} {
			t.Run(fmt.Sprintf("%s-seed-%d", variant, seed), func(t *testing.T) {
				t.Parallel()
				runQuorumLoss(t, seed, variant == "backup")
			})
		}
	}
}

func runQuorumLoss(t *testing.T, seed uint64, all bool) {
	r := &chaosRun{t: t, ns: framework.Namespace(t), rng: rand.New(rand.NewPCG(seed, 0x71756f72)), start: time.Now()}
	r.op = framework.StartOperator(t, r.ns)
	createClaim(t, r.ns, "backups")
	before := framework.CreateReady(t, r.ns, 3, func(c *v1alpha1.EtcdCluster) {
		c.Spec.Recovery = &v1alpha1.RecoverySpec{QuorumLoss: v1alpha1.QuorumLossAutomatic, AutoApproveDataLoss: true}
	})
	w := startWriter(t, r.ns, "demo")
	time.Sleep(time.Duration(1000+r.rng.IntN(2000)) * time.Millisecond)
	framework.CreateBackup(t, r.ns, "nightly", framework.ClaimDest("backups"))
	backup := framework.WaitBackup(t, r.ns, "nightly", v1alpha1.BackupSucceeded)
	r.log("backup at revision %d", backup.Status.Artifact.Revision)
	time.Sleep(time.Duration(r.rng.IntN(3000)) * time.Millisecond)

	looks := watchClusterIDs(t, r.ns, "demo")
	wiped := r.wipeMajority(all)
	acked := w.stop()
	r.log("%d writes acknowledged", len(acked))
	c := framework.WaitFor(t, r.ns, "demo", 5*time.Minute, "three voters again, none of the wiped members", func(c *v1alpha1.EtcdCluster) bool {
		return framework.Ready(c) && len(c.Status.Members) == 3 && !slices.ContainsFunc(c.Status.Members, func(m v1alpha1.MemberStatus) bool {
			return slices.Contains(wiped, m.Name)
		})
	})
	r.log("recovered: cluster %s, restored from %q", c.Status.ClusterID, c.Status.RestoredFrom)
	looks.stop()
	seen := looks.verdict(t)
	recovery := r.recovery(c, before.Status.ClusterID, backup)
	require.Len(t, framework.CheckMembership(t, r.ns, "demo").Members, 3)
	rev, lost := checkAcked(t, r.ns, acked)
	if recovery == string(plan.RestoreFromBackup) {
		// A backup records the revision when its snapshot began; writes that came in while
		// it was taken may be in it too.
		require.GreaterOrEqual(t, rev, backup.Status.Artifact.Revision, "the restored cluster holds the backup's revision")
	}
	r.log("recovery: %s", recovery)
	r.log("cluster IDs behind the Service, in turn: %v (%d looks); every write acknowledged up to revision %d is there, %d after it lost", seen, looks.n, rev, len(lost))
	name := fmt.Sprintf("quorum-loss-survivor-seed-%d", seed)
	if all {
		name = fmt.Sprintf("quorum-loss-backup-seed-%d", seed)
	}
	r.report(name, map[string]any{"seed": seed, "recovery": recovery, "namespace": r.ns, "events": r.events, "acknowledged": len(acked), "lostAbove": len(lost),
		"revision": rev, "clusterIDs": seen, "looks": looks.n, "history": c.Status.History, "duration": time.Since(r.start).Round(time.Second).String()})
}

// recovery checks how the cluster came back and returns the action of its recovery, or
// "none". The wipes are drawn within a second of each other, yet the operator may replace a
// wiped member before the next one goes, so that the next wipe costs no quorum (nothing to
// recover), or a member that joined meanwhile holds the data when every old one is gone (a
// forced restart of it). With the backup's destination known, a survivor is snapshotted and
// restored on every member rather than restarted alone. Recovered or not, it is the same
// cluster unless restored, and a recovery is on record, finished, under the cluster's ID.
func (r *chaosRun) recovery(c *v1alpha1.EtcdCluster, before string, backup *v1alpha1.EtcdBackup) string {
	l := c.Status.LastRecovery
	if l == nil {
		require.Equal(r.t, before, c.Status.ClusterID, "no recovery: the same cluster")
		return "none"
	}
	require.NotNil(r.t, l.FinishedAt, "%+v", l)
	require.Equal(r.t, c.Status.ClusterID, l.ClusterID, "%+v", l)
	switch {
	case l.Action == string(plan.RestoreFromBackup) && strings.Contains(l.Backup, "-survivor-"):
		// The survivor's snapshot, restored on every member at once.
		snap := framework.WaitBackup(r.t, r.ns, l.Backup, v1alpha1.BackupSucceeded)
		require.Equal(r.t, before, snap.Status.Artifact.ClusterID, "a snapshot of the cluster that lost its quorum")
		require.Equal(r.t, snap.Status.Artifact.URI, c.Status.RestoredFrom, "restored from the survivor's snapshot")
		require.NotEqual(r.t, before, c.Status.ClusterID)
		return "RestoreFromBackup (survivor's snapshot)"
	case l.Action == string(plan.RestoreFromBackup):
		require.Equal(r.t, backup.Name, l.Backup)
		require.Equal(r.t, backup.Status.Artifact.URI, c.Status.RestoredFrom, "restored from the backup")
		require.NotEqual(r.t, before, c.Status.ClusterID)
	default:
		require.Equal(r.t, before, c.Status.ClusterID, "a forced restart keeps the cluster")
	}
	return l.Action
}

// wipeMajority wipes the volumes of two members (all three with all) and deletes their
// Pods, in the order and with the gaps and grace the seed draws; it may kill the operator
// in the middle. It returns the members wiped.
func (r *chaosRun) wipeMajority(all bool) []string {
	ctx := context.Background()
	members := []string{"demo-0", "demo-1", "demo-2"}
	r.rng.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
	if !all {
		members = members[:2]
	}
	killAt := -1
	if r.rng.IntN(2) == 0 {
		killAt = r.rng.IntN(len(members) + 1)
	}
	for i, m := range members {
		if i == killAt {
			r.log("fault: kill the operator")
			r.op.Kill()
		}
		grace := []client.DeleteOption{}
		if r.rng.IntN(2) == 0 {
			grace = append(grace, client.GracePeriodSeconds(0))
		}
		r.log("wipe the volume of %s and delete its Pod (%d options)", m, len(grace))
		require.NoError(r.t, framework.Env.Stack.WipePVC(ctx, r.ns, m))
		require.NoError(r.t, client.IgnoreNotFound(framework.Env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: framework.MetaName(r.ns, m)}, grace...)))
		time.Sleep(time.Duration(r.rng.IntN(1000)) * time.Millisecond)
	}
	if killAt == len(members) {
		time.Sleep(time.Duration(r.rng.IntN(5000)) * time.Millisecond)
		r.log("fault: kill the operator")
		r.op.Kill()
	}
	return members
}

// checkAcked reads the keys the writer wrote from the cluster and returns the highest
// revision among them, and the acknowledged writes above it (lost): every write
// acknowledged at or below it must be there (a recovery may lose only a suffix of the
// history, never a write in the middle).
func checkAcked(t *testing.T, ns string, acked map[string]int64) (int64, map[string]int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := framework.EtcdClient(t, framework.Endpoints(t, ns, "demo")).Get(ctx, "/writer/", clientv3.WithPrefix())
	require.NoError(t, err)
	have := map[string]int64{}
	var top int64
	for _, kv := range resp.Kvs {
		have[string(kv.Key)] = kv.ModRevision
		top = max(top, kv.ModRevision)
	}
	lost := map[string]int64{}
	for k, rev := range acked {
		if rev > top {
			lost[k] = rev
			continue
		}
		require.Equal(t, rev, have[k], "write %s, acknowledged at revision %d, at or below the revision %d the cluster came back with", k, rev, top)
	}
	require.NotEmpty(t, have, "no acknowledged write survived")
	t.Logf("%d writes acknowledged, %d present (up to revision %d), %d above it lost", len(acked), len(have), top, len(lost))
	return top, lost
}
