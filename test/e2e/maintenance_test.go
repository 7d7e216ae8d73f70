package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/test/framework"
)

// A defragmentation schedule (every 20 s here) defragments the members fragmented when it
// comes, followers first and the leader last after leadership moved; then a threshold alone
// defragments them as they reach it. A writer runs throughout and every acknowledged write
// is read back.
func TestDefragmentation(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) {
		c.Spec.Maintenance = &v1alpha1.MaintenanceSpec{Defrag: &v1alpha1.DefragSpec{Schedule: "*/20 * * * * *"}}
	})
	w := startWriter(t, ns, "demo")

	framework.Fragment(t, ns, "demo", 8)
	c, n := waitDefragmented(t, ns, 3, "three members defragmented on schedule")
	require.NotNil(t, c.Status.Defrag)
	require.Empty(t, c.Status.Defrag.Pending)
	require.NotNil(t, c.Status.Defrag.LastScheduleTime)

	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) {
		c.Spec.Maintenance.Defrag = &v1alpha1.DefragSpec{ThresholdPercent: 30}
	})
	framework.Fragment(t, ns, "demo", 8)
	c, _ = waitDefragmented(t, ns, n+3, "three members defragmented at the threshold")
	require.Nil(t, c.Status.Defrag)
	w.stopAndVerify()
	framework.CheckMembership(t, ns, "demo")
}

// waitDefragmented waits until the plans defragmented at least n members in all, the last
// three followers first and the leader last after leadership moved, and returns how many.
// (Free space shows on each member as its compaction runs: a plan may be superseded after
// some of its steps by one made on what showed since.)
func waitDefragmented(t *testing.T, ns string, n int, what string) (*v1alpha1.EtcdCluster, int) {
	t.Helper()
	var all string
	c := framework.WaitFor(t, ns, "demo", 2*time.Minute, what, func(c *v1alpha1.EtcdCluster) bool {
		all = strings.Join(appliedSteps(t, c), ", ")
		return strings.Count(all, "Defragment ") >= n && c.Status.Plan == nil
	})
	require.Regexp(t, `Defragment (demo-\d), Defragment (demo-\d), TransferLeadership (demo-\d), Defragment (demo-\d)$`, all,
		"followers first, the leader last after leadership moved")
	return c, strings.Count(all, "Defragment ")
}

// appliedSteps are the steps the plans in history applied, oldest first: every step of a
// plan that succeeded, the first of a superseded one up to where it stopped, and the step it
// stopped at when that step was applied (its history message says so): a fresh plan made on
// a look that showed the effect, but went on otherwise, supersedes the plan at that step.
// No plan failed.
func appliedSteps(t *testing.T, c *v1alpha1.EtcdCluster) []string {
	t.Helper()
	var applied []string
	for _, h := range slices.Backward(c.Status.History) {
		require.Contains(t, []v1alpha1.PlanPhase{v1alpha1.PlanSucceeded, v1alpha1.PlanSuperseded}, h.Phase, "%+v", c.Status.History)
		var done, total int
		_, err := fmt.Sscanf(h.Steps, "%d/%d", &done, &total)
		require.NoError(t, err, h.Steps)
		actions := strings.Split(h.Actions, ", ")
		if h.Phase == v1alpha1.PlanSuperseded && done < len(actions) && strings.Contains(h.Message, fmt.Sprintf(" after step %d/%d ", done+1, total)) &&
			strings.Contains(h.Message, " was applied; whether it took effect, the cluster shows") {
			done++
		}
		applied = append(applied, actions[:done]...)
	}
	return applied
}
