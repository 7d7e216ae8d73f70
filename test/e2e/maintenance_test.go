package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// A defragmentation schedule (every 20 s here) defragments the members fragmented when it
// comes, followers first and the leader last after leadership moved, with a writer running
// and every acknowledged write read back.
func TestScheduledDefragmentation(t *testing.T) {
	t.Parallel()
	ns := namespace(t)
	startOperator(t, ns)
	createReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) {
		c.Spec.Maintenance = &v1alpha1.MaintenanceSpec{Defrag: &v1alpha1.DefragSpec{Schedule: "*/20 * * * * *"}}
	})
	w := startWriter(t, ns, "demo")

	// Revisions of one key, compacted away: free pages in every member's database.
	cli := etcdClient(t, endpoints(t, ns, "demo"))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	big := strings.Repeat("x", 256<<10)
	var rev int64
	for range 16 {
		resp, err := cli.Put(ctx, "/fragments", big)
		require.NoError(t, err)
		rev = resp.Header.Revision
	}
	_, err := cli.Compact(ctx, rev)
	require.NoError(t, err)

	c := waitFor(t, ns, "demo", 2*time.Minute, "three members defragmented on schedule", func(c *v1alpha1.EtcdCluster) bool {
		n := 0
		for _, h := range c.Status.History {
			n += strings.Count(h.Actions, "Defragment ")
		}
		return n == 3 && c.Status.Plan == nil
	})
	w.stopAndVerify()
	require.NotNil(t, c.Status.Defrag)
	require.Empty(t, c.Status.Defrag.Pending)
	var actions []string
	for _, h := range c.Status.History {
		if strings.Contains(h.Actions, "Defragment") {
			require.Equal(t, v1alpha1.PlanSucceeded, h.Phase, "%+v", h)
			actions = append([]string{h.Actions}, actions...)
		}
	}
	require.Regexp(t, `^Defragment (demo-\d), Defragment (demo-\d), TransferLeadership (demo-\d), Defragment (demo-\d)$`, strings.Join(actions, ", "),
		"followers first, the leader last after leadership moved")
	checkMembership(t, ns, "demo")
}
