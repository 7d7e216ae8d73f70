package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// A defragmentation schedule (every 20 s here) defragments the members fragmented when it
// comes, followers first and the leader last after leadership moved; then a threshold alone
// defragments them as they reach it. A writer runs throughout and every acknowledged write
// is read back.
func TestDefragmentation(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	startOperator(t, ns)
	createReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) {
		c.Spec.Maintenance = &v1alpha1.MaintenanceSpec{Defrag: &v1alpha1.DefragSpec{Schedule: "*/20 * * * * *"}}
	})
	w := startWriter(t, ns, "demo")

	fragment(t, ns, "demo", 8)
	c, n := waitDefragmented(t, ns, 3, "three members defragmented on schedule")
	require.NotNil(t, c.Status.Defrag)
	require.Empty(t, c.Status.Defrag.Pending)
	require.NotNil(t, c.Status.Defrag.LastScheduleTime)

	update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) {
		c.Spec.Maintenance.Defrag = &v1alpha1.DefragSpec{ThresholdPercent: 30}
	})
	fragment(t, ns, "demo", 8)
	c, _ = waitDefragmented(t, ns, n+3, "three members defragmented at the threshold")
	require.Nil(t, c.Status.Defrag)
	w.stopAndVerify()
	checkMembership(t, ns, "demo")
}

// fragment writes mib MiB of revisions of one key and compacts them away: mib MiB of free
// pages in every member's database, once their compaction ran.
func fragment(t *testing.T, ns, cluster string, mib int) {
	t.Helper()
	cli := etcdClient(t, endpoints(t, ns, cluster))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	value := strings.Repeat("x", 512<<10)
	var rev int64
	for range 2 * mib {
		resp, err := cli.Put(ctx, "/bench/garbage", value)
		require.NoError(t, err)
		rev = resp.Header.Revision
	}
	_, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical())
	require.NoError(t, err)
}

// waitDefragmented waits until the plans that succeeded defragmented at least n members in
// all, the last three followers first and the leader last after leadership moved, and
// returns how many. (A time of the schedule may come while the cluster bootstraps: a plan
// then may be superseded before its defragmentation.)
func waitDefragmented(t *testing.T, ns string, n int, what string) (*v1alpha1.EtcdCluster, int) {
	t.Helper()
	var all string
	c := waitFor(t, ns, "demo", 2*time.Minute, what, func(c *v1alpha1.EtcdCluster) bool {
		var actions []string
		for _, h := range c.Status.History {
			if h.Phase == v1alpha1.PlanSucceeded {
				actions = append([]string{h.Actions}, actions...)
			}
		}
		all = strings.Join(actions, ", ")
		return strings.Count(all, "Defragment ") >= n && c.Status.Plan == nil
	})
	require.Regexp(t, `Defragment (demo-\d), Defragment (demo-\d), TransferLeadership (demo-\d), Defragment (demo-\d)$`, all,
		"followers first, the leader last after leadership moved")
	return c, strings.Count(all, "Defragment ")
}
