package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	fluxmeta "github.com/fluxcd/pkg/apis/meta"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/test/framework"
)

// A member whose preflight check cannot read its data directory (a regular file where
// <data-dir>/member should be: it is neither absent nor empty, so not shown lost) is down,
// not lost: it stalls with the check's words (PreflightFailed), its failed Pod is kept, no
// step but starting it is planned, its claim stays, and the others keep quorum. Once the
// directory is back and the Pod deleted, as docs/operations.md says, it comes back under its
// old member ID with its data and catches up.
func TestUnreadableDataDirectoryStallsAndDeletesNothing(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	framework.CreateReady(t, ns, 3)
	// A short deadline, so that the stall shows soon; set once the cluster formed, where a
	// slow machine cannot make the bootstrap stall.
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.UpdateStrategy.ProgressDeadlineSeconds = 20 })
	before := framework.WaitReady(t, ns, "demo")
	ctx := context.Background()
	cli := framework.EtcdClient(t, framework.Endpoints(t, ns, "demo"))
	written := map[string]string{}
	putData(t, cli, written, 0, 100)

	// A follower, so that no election muddles the picture.
	var victim, victimID string
	for _, m := range before.Status.Members {
		if !m.Leader && victim == "" {
			victim, victimID = m.Name, m.ID
		}
	}
	require.NotEmpty(t, victim)
	claims := claimUIDs(t, ns)
	dir, err := framework.Env.Stack.ClaimDir(ctx, ns, victim)
	require.NoError(t, err)
	member, aside := filepath.Join(dir, "data", "member"), filepath.Join(dir, "member.aside")
	qw := watchQuorum(t, ns, "demo")
	plans := framework.WatchPlans(t, ns, "demo", map[string]types.UID{victim: claims[victim]})

	// The local kubelet runs the check as the Pod's user and chowns the volume to its
	// fsGroup, so permissions would not hold: a file in the directory's place does.
	require.NoError(t, os.Rename(member, aside))
	require.NoError(t, os.WriteFile(member, []byte("not a directory\n"), 0o644))
	old := &corev1.Pod{}
	require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim}, old))
	require.NoError(t, framework.Env.Client.Delete(ctx, old))

	const why = "exit code 5: data directory /var/lib/etcd/data cannot be read: /var/lib/etcd/data/member is not a directory; its data may be intact, so it is not taken as lost"
	c := framework.WaitFor(t, ns, "demo", 2*time.Minute, "stalled with PreflightFailed", func(c *v1alpha1.EtcdCluster) bool {
		s := framework.Condition(c, fluxmeta.StalledCondition)
		return s != nil && s.Reason == "PreflightFailed"
	})
	stalled := framework.Condition(c, fluxmeta.StalledCondition)
	require.Contains(t, stalled.Message, why)
	require.Contains(t, stalled.Message, fmt.Sprintf("then delete Pod %s and a new one starts", victim))
	require.Equal(t, "PreflightFailed", framework.Condition(c, fluxmeta.ReadyCondition).Reason)
	require.NotNil(t, c.Status.Plan)
	require.Contains(t, c.Status.Plan.Steps[0].Reason, why, "the plan says why the member is down")
	require.Contains(t, c.Status.Plan.Steps[0].Reason, "the member is down, not lost, and nothing of it is deleted")
	i := slices.IndexFunc(c.Status.Members, func(m v1alpha1.MemberStatus) bool { return m.Name == victim })
	require.GreaterOrEqual(t, i, 0, "%s is still a member", victim)
	require.Equal(t, victimID, c.Status.Members[i].ID)
	require.False(t, c.Status.Members[i].Healthy)
	failed := &corev1.Pod{}
	require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim}, failed))
	require.Equal(t, corev1.PodFailed, failed.Status.Phase, "the failed Pod is kept for a person")
	// The victim's address may serve another test's Pod by now: ask the other two alone.
	var eps []string
	for _, m := range before.Status.Members {
		if m.Name != victim {
			eps = append(eps, podEndpoint(t, ns, m.Name))
		}
	}
	others := framework.EtcdClient(t, eps)
	list, err := others.MemberList(ctx) // linearizable
	require.NoError(t, err)
	require.NoError(t, framework.SameCluster(list.Header, before.Status.ClusterID))
	require.Len(t, list.Members, 3)
	require.True(t, slices.ContainsFunc(list.Members, func(m *etcdserverpb.Member) bool { return framework.MemberID(m.ID) == victimID }), "still in etcd's member list")
	putData(t, others, written, 100, 150) // the others take writes meanwhile
	time.Sleep(5 * time.Second)           // and nothing else happens
	requireClaimsKept(t, ns, claims)

	// The runbook: mend the volume, delete the Pod.
	require.NoError(t, os.Remove(member))
	require.NoError(t, os.Rename(aside, member))
	require.NoError(t, framework.Env.Client.Delete(ctx, failed))
	c = framework.WaitFor(t, ns, "demo", 2*time.Minute, victim+" back", func(c *v1alpha1.EtcdCluster) bool {
		p := &corev1.Pod{}
		err := framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: victim}, p)
		return err == nil && p.UID != failed.UID && framework.Ready(c)
	})
	require.Empty(t, qw.stop(), "quorum held throughout")
	steps, claimErrs := plans.Stop()
	require.Empty(t, claimErrs, "the claim of %s stays", victim)
	require.Equal(t, []string{"StartMember " + victim}, framework.Actions(steps), "no step but starting the member")
	requireClaimsKept(t, ns, claims)
	require.Equal(t, before.Status.NextOrdinal, c.Status.NextOrdinal, "no member added")
	after := framework.CheckMembership(t, ns, "demo")
	ids := map[string]string{}
	for _, m := range before.Status.Members {
		ids[m.Name] = m.ID
	}
	for _, m := range after.Members {
		require.Equal(t, ids[m.Name], framework.MemberID(m.ID), "member %s keeps its ID", m.Name)
	}
	// Its own data: what it holds, read from it alone, is every key, those from before it
	// went down and those it caught up on.
	require.Equal(t, written, keys(t, ns, "demo", "/data/"), "every acknowledged write")
	one := framework.EtcdClient(t, []string{podEndpoint(t, ns, victim)})
	held := map[string]string{}
	require.Eventually(t, func() bool {
		resp, err := one.Get(ctx, "/data/", clientv3.WithPrefix(), clientv3.WithSerializable())
		if err != nil || framework.MemberID(resp.Header.MemberId) != victimID || framework.SameCluster(resp.Header, before.Status.ClusterID) != nil {
			return false
		}
		clear(held)
		for _, kv := range resp.Kvs {
			held[string(kv.Key)] = string(kv.Value)
		}
		return len(held) == len(written)
	}, 30*time.Second, 200*time.Millisecond, "%s serves every key itself", victim)
	require.Equal(t, written, held)
}
