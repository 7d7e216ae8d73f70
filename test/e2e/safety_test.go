package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/test/framework"
)

// A NOSPACE alarm is not a member down: members stay ready. Data that does not fit under
// the quota stalls with QuotaTooSmall; raising the quota rolls the members one at a time,
// the leader last, with never more than one member down, and the alarm is disarmed after.
func TestNospaceRollsOneAtATime(t *testing.T) {
	ns, w := smallQuota(t)
	// Keys of their own leave no history. While defragmentation gives back enough room, the
	// alarm is disarmed and the writes go on, until the data itself fills the quota.
	var c *v1alpha1.EtcdCluster
	for round := 0; c == nil; round++ {
		require.Less(t, round, 6, "the data fills the quota")
		fill(t, ns, func(int) string { return fmt.Sprintf("/fill/%d", time.Now().UnixNano()) }, 64<<10)
		require.Eventually(t, func() bool {
			c = framework.Get(t, ns, "demo")
			if conditions.GetReason(c, meta.StalledCondition) == string(plan.BlockQuotaTooSmall) {
				return true
			}
			c = nil
			return canWrite(t, ns) // disarmed: fill again
		}, time.Minute, 250*time.Millisecond, "stalled for want of space, or the alarm disarmed")
	}
	w.stopAndVerify()
	require.Equal(t, int32(3), c.Status.ReadyReplicas, "members with an alarm still answer")
	require.Contains(t, conditions.GetMessage(c, meta.StalledCondition), "raise spec.options.quotaBackendBytes")
	c = rollOneAtATime(t, ns, plan.RestartMember, func(c *v1alpha1.EtcdCluster) { c.Spec.Options.QuotaBackendBytes = ptr.To[int64](64 << 20) })
	require.Contains(t, c.Status.History[0].Actions, "DisarmAlarm", "the alarm is disarmed once the data fits")
	require.Empty(t, c.Status.Alarms)
	writable(t, ns)
}

// A NOSPACE alarm of a database full of earlier revisions is recovered on real etcd with a
// writer running: the history is compacted, the members holding free space defragmented
// (the leader last, after leadership moved), the alarm disarmed once every database is
// under the quota, and no acknowledged write is lost.
func TestNospaceIsRecovered(t *testing.T) {
	ns, w := smallQuota(t)
	fill(t, ns, func(i int) string { return fmt.Sprintf("/over/%d", i%4) }, 1<<20) // four keys, written over and over
	c := framework.WaitFor(t, ns, "demo", 3*time.Minute, "the alarm disarmed", func(c *v1alpha1.EtcdCluster) bool {
		return len(c.Status.Alarms) == 0 && len(c.Status.History) > 0 && strings.Contains(c.Status.History[0].Actions, "DisarmAlarm")
	})
	w.stopAndVerify()
	// What compaction frees, and the alarms each member raises, show a moment apart: a plan
	// may be superseded by one made on what showed since. The steps each plan applied count.
	applied := appliedSteps(t, c)
	all := strings.Join(applied, ", ")
	for i, a := range applied {
		if member, ok := strings.CutPrefix(a, "TransferLeadership "); ok && i+1 < len(applied) {
			require.Equal(t, "Defragment "+member, applied[i+1], "the leader is defragmented right after leadership moved: %s", all)
		}
	}
	require.Contains(t, applied, "Compact", all)
	require.Contains(t, all, "Defragment demo-", all)
	require.True(t, strings.HasPrefix(applied[len(applied)-1], "DisarmAlarm"), all)
	// A member whose compaction had freed nothing yet when a plan was made is not
	// defragmented: the alarm is disarmed once every database is under the quota.
	underQuota(t, ns, 16<<20)
	writable(t, ns)
	framework.CheckMembership(t, ns, "demo")
}

// Two voters under a NOSPACE alarm cannot take one of theirs away for a defragmentation (it
// stalls that member's raft loop, and with two voters every write): the plan compacts the
// history, adds a temporary third member and promotes it before any defragmentation, then
// defragments, disarms the alarm and removes the third member. The cluster is back to two
// voters and Ready, every acknowledged write is there, and a linearizable read went
// through every second.
func TestNospaceOnTwoVotersDefragmentsBehindAThirdMember(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	const quota = 16 << 20
	before := framework.CreateReady(t, ns, 2, func(c *v1alpha1.EtcdCluster) { c.Spec.Options.QuotaBackendBytes = ptr.To[int64](quota) })
	cli := framework.EtcdClient(t, framework.Endpoints(t, ns, "demo"))
	written := map[string]string{}
	putData(t, cli, written, 0, 100)
	w := startWriter(t, ns, "demo")
	time.Sleep(time.Second)
	qw := watchQuorum(t, ns, "demo")
	plans := framework.WatchPlans(t, ns, "demo", nil)

	// Four keys written over and over: once their history is compacted, nearly the whole
	// database is free space that only a defragmentation gives back.
	fill(t, ns, func(i int) string { return fmt.Sprintf("/over/%d", i%4) }, 1<<20)
	c := framework.WaitFor(t, ns, "demo", 3*time.Minute, "the alarm disarmed, two voters again", func(c *v1alpha1.EtcdCluster) bool {
		return framework.Ready(c) && len(c.Status.Alarms) == 0 && len(c.Status.Members) == 2 && len(c.Status.History) > 0 &&
			strings.Contains(c.Status.History[0].Actions, "DisarmAlarm")
	})
	require.Empty(t, qw.stop(), "a linearizable read went through every second")
	steps, _ := plans.Stop()
	w.stopAndVerify()

	applied := appliedSteps(t, c)
	all := strings.Join(applied, ", ")
	third := fmt.Sprintf("demo-%d", before.Status.NextOrdinal)
	added := slices.Index(applied, "AddLearner "+third)
	promoted := slices.Index(applied, "PromoteLearner "+third)
	defrag := slices.IndexFunc(applied, func(a string) bool { return strings.HasPrefix(a, "Defragment ") })
	require.GreaterOrEqual(t, added, 0, "a third member joined: %s", all)
	require.Greater(t, promoted, added, all)
	require.Greater(t, defrag, promoted, "the third member votes before any defragmentation: %s", all)
	require.Less(t, slices.Index(applied, "Compact"), added, "the history is compacted first: %s", all)
	require.Less(t, slices.IndexFunc(applied, func(a string) bool { return strings.HasPrefix(a, "DisarmAlarm") }),
		slices.Index(applied, "RemoveMember "+third), "the alarm is disarmed before the third member leaves: %s", all)
	require.Contains(t, applied, "DeleteMember "+third, all)
	i := slices.IndexFunc(steps, func(s plan.Step) bool { return s.Action == plan.AddLearner })
	require.GreaterOrEqual(t, i, 0)
	require.Contains(t, steps[i].Reason, "temporary third member, so two voters keep quorum while each restarts or is defragmented")

	after := framework.CheckMembership(t, ns, "demo")
	require.Len(t, after.Members, 2)
	ids := map[string]bool{}
	for _, m := range before.Status.Members {
		ids[m.ID] = true
	}
	for _, m := range after.Members {
		require.True(t, ids[framework.MemberID(m.ID)], "member %s is one of the two from before", m.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	alarms, err := cli.AlarmList(ctx)
	require.NoError(t, err)
	require.Empty(t, alarms.Alarms, "etcd lists no alarm")
	underQuota(t, ns, quota)
	require.Equal(t, written, keys(t, ns, "demo", "/data/"), "the keys from before the alarm")
	writable(t, ns)
}

// underQuota: every member's database leaves a tenth of the quota free, as the planner
// requires before it disarms a NOSPACE alarm.
func underQuota(t *testing.T, ns string, quota int64) {
	t.Helper()
	cli := framework.EtcdClient(t, framework.Endpoints(t, ns, "demo"))
	for _, ep := range cli.Endpoints() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := cli.Status(ctx, ep)
		cancel()
		require.NoError(t, err, ep)
		require.LessOrEqual(t, st.DbSize*10, quota*9, "%s: database of %d bytes", ep, st.DbSize)
	}
}

// smallQuota is a ready cluster of three with a 16 MiB quota, under its own operator, and a
// writer running.
func smallQuota(t *testing.T) (string, *writer) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.Options.QuotaBackendBytes = ptr.To[int64](16 << 20) })
	w := startWriter(t, ns, "demo")
	time.Sleep(time.Second)
	return ns, w
}

// fill writes values of the size under the keys key(i) gives until etcd refuses for want
// of space.
func fill(t *testing.T, ns string, key func(i int) string, size int) {
	t.Helper()
	cli := framework.EtcdClient(t, framework.Endpoints(t, ns, "demo"))
	big := strings.Repeat("x", size)
	i := 0
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		i++
		_, err := cli.Put(ctx, key(i), big)
		return err != nil && strings.Contains(err.Error(), "database space exceeded")
	}, 2*time.Minute, 10*time.Millisecond, "the cluster fills up")
}

// writable: the cluster takes writes again.
func writable(t *testing.T, ns string) {
	t.Helper()
	require.Eventually(t, func() bool { return canWrite(t, ns) }, time.Minute, 200*time.Millisecond, "the cluster takes writes")
}

func canWrite(t *testing.T, ns string) bool {
	cli, err := clientv3.New(clientv3.Config{Endpoints: framework.Endpoints(t, ns, "demo"), DialTimeout: 3 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = cli.Put(ctx, "/after", "room again")
	return err == nil
}

// A rolling upgrade on real etcd: followers first, the leader last after leadership moved,
// never more than one member down, no acknowledged write lost.
func TestUpgradeFollowersFirstLeaderLast(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	c := framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "3.5.35" })
	w := startWriter(t, ns, "demo")
	c = rollOneAtATime(t, ns, plan.UpgradeMember, func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "3.6.16" })
	require.Equal(t, "3.6.16", c.Status.Version)
	w.stopAndVerify()

	// Once every member ran 3.6, etcd's cluster version moves, and there is no way back.
	framework.WaitFor(t, ns, "demo", time.Minute, "etcd's cluster version 3.6", func(c *v1alpha1.EtcdCluster) bool { return c.Status.ClusterVersion == "3.6.0" })
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "3.5.35" })
	c = framework.Refused(t, ns, "demo", time.Minute, string(plan.BlockDowngrade))
	require.Contains(t, framework.Condition(c, "Stalled").Message, "etcd's cluster version is 3.6")
	require.Equal(t, "3.6.16", c.Status.Version, "nothing restarted")
}

// A resources change restarts each member in turn, the leader last after leadership moved,
// with a writer running and every acknowledged write read back.
func TestResourcesChangeRollsOneAtATime(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	framework.CreateReady(t, ns, 3)
	w := startWriter(t, ns, "demo")
	rollOneAtATime(t, ns, plan.RestartMember, func(c *v1alpha1.EtcdCluster) {
		c.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")}
	})
	w.stopAndVerify()
	pods := framework.MemberPods(t, ns, "demo")
	require.Len(t, pods, 3)
	for _, p := range pods {
		require.Equal(t, "64Mi", p.Spec.Containers[0].Resources.Requests.Memory().String(), p.Name)
	}
}

// rollOneAtATime changes the spec of the running cluster "demo" of three members and checks
// the plans that follow restart each member once with action, the leader last after
// leadership moved, while never fewer than two members answer. A plan may be superseded
// while a restart is under way (its old Pod gone, the fresh plan starts the member's new
// Pod): that StartMember finishes the restart.
func rollOneAtATime(t *testing.T, ns string, action plan.Action, change func(c *v1alpha1.EtcdCluster)) *v1alpha1.EtcdCluster {
	t.Helper()
	leader, before := "", map[string]bool{}
	c := framework.Get(t, ns, "demo")
	for _, m := range c.Status.Members {
		if m.Leader {
			leader = m.Name
		}
	}
	for _, h := range c.Status.History {
		before[h.ID] = true
	}
	up := watchAnswering(t, ns, "demo")
	framework.Update(t, ns, "demo", change)
	c = framework.WaitReady(t, ns, "demo")
	require.GreaterOrEqual(t, up.stop(), 2, "two of three members answered throughout the roll")
	require.Equal(t, v1alpha1.PlanSucceeded, c.Status.History[0].Phase, "%+v", c.Status.History)
	var events, restarted []string
	interrupted := map[string]bool{}
	for _, h := range slices.Backward(c.Status.History) {
		if before[h.ID] {
			continue
		}
		acts := strings.Split(h.Actions, ", ")
		var done int
		_, err := fmt.Sscanf(h.Steps, "%d/", &done)
		require.NoError(t, err, h.Steps)
		for _, a := range acts[:done] {
			act, m, _ := strings.Cut(a, " ")
			switch {
			case act == string(action) || act == string(plan.StartMember) && interrupted[m]:
				delete(interrupted, m)
				restarted = append(restarted, m)
				events = append(events, "restart "+m)
			case act == string(plan.TransferLeadership):
				events = append(events, a)
			}
		}
		if act, m, _ := strings.Cut(acts[min(done, len(acts)-1)], " "); done < len(acts) && act == string(action) {
			interrupted[m] = true
		}
	}
	slices.Sort(restarted)
	require.Equal(t, []string{"demo-0", "demo-1", "demo-2"}, restarted, "each member restarted once: %+v", c.Status.History)
	require.Equal(t, []string{"TransferLeadership " + leader, "restart " + leader}, events[len(events)-2:],
		"the leader goes last, after leadership moved: %+v", c.Status.History)
	framework.CheckMembership(t, ns, "demo")
	return c
}

// answering counts, while an operation runs, how many members answer a status request. A
// member counts as down when it failed two rounds in a row, so one slow answer on a loaded
// machine is not taken for a member down.
type answering struct {
	cancel context.CancelFunc
	done   chan struct{}
	min    int
}

func watchAnswering(t *testing.T, ns, name string) *answering {
	ctx, cancel := context.WithCancel(context.Background())
	a := &answering{cancel: cancel, done: make(chan struct{}), min: 99}
	id := framework.Get(t, ns, name).Status.ClusterID
	failed := map[string]int{} // endpoint -> failed rounds in a row
	go func() {
		defer close(a.done)
		for ctx.Err() == nil {
			eps := framework.Endpoints(t, ns, name)
			var mu sync.Mutex
			var wg sync.WaitGroup
			for _, ep := range eps {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ok := statusOK(ctx, ep, id)
					mu.Lock()
					defer mu.Unlock()
					if ok {
						failed[ep] = 0
					} else {
						failed[ep]++
					}
				}()
			}
			wg.Wait()
			n := 0
			for _, ep := range eps {
				if failed[ep] < 2 {
					n++
				}
			}
			if ctx.Err() == nil {
				a.min = min(a.min, n)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return a
}

// statusOK: the member at ep answers a status request, as a member of cluster id.
func statusOK(ctx context.Context, ep, id string) bool {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return false
	}
	defer cli.Close()
	sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	st, err := cli.Status(sctx, ep)
	return err == nil && framework.SameCluster(st.Header, id) == nil
}

func (a *answering) stop() int {
	a.cancel()
	<-a.done
	return a.min
}

// A member cut off the network in the middle of a scale-up keeps its data: nothing is
// removed or deleted on what it (or anyone without a quorum) says, the scale-up waits for it,
// and resumes once it is back.
func TestPartitionedMemberKeepsItsData(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	before := framework.CreateReady(t, ns, 3)
	claims := claimUIDs(t, ns)
	w := startWriter(t, ns, "demo")

	ctx := context.Background()
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 5 })
	framework.WaitFor(t, ns, "demo", 2*time.Minute, "demo-3 joined", func(c *v1alpha1.EtcdCluster) bool {
		return slices.ContainsFunc(c.Status.Members, func(m v1alpha1.MemberStatus) bool {
			return m.Name == "demo-3" && m.Role == v1alpha1.RoleVoter
		})
	})
	require.NoError(t, framework.Env.Stack.CutPod(ctx, ns, "demo-2")) // it misses what comes next
	time.Sleep(8 * time.Second)
	requireClaimsKept(t, ns, claims)
	require.NoError(t, framework.Env.Stack.HealPod(ctx, ns, "demo-2"))

	c := framework.WaitReady(t, ns, "demo")
	requireClaimsKept(t, ns, claims)
	ids := map[string]string{}
	for _, m := range before.Status.Members {
		ids[m.Name] = m.ID
	}
	for _, m := range c.Status.Members {
		if id, ok := ids[m.Name]; ok {
			require.Equal(t, id, m.ID, "member %s keeps its ID", m.Name)
		}
	}
	for _, h := range c.Status.History {
		require.NotContains(t, h.Actions, "RemoveMember", "nothing was removed: %+v", h)
	}
	framework.CheckMembership(t, ns, "demo")
	w.stopAndVerify()
}

// requireClaimsKept asserts each of the claims is still there, the same object.
func requireClaimsKept(t *testing.T, ns string, claims map[string]types.UID) {
	t.Helper()
	now := claimUIDs(t, ns)
	for name, uid := range claims {
		require.Equal(t, uid, now[name], "the volume of %s is the one it had", name)
	}
}

func claimUIDs(t *testing.T, ns string) map[string]types.UID {
	t.Helper()
	var pvcs corev1.PersistentVolumeClaimList
	require.NoError(t, framework.Env.Client.List(context.Background(), &pvcs, client.InNamespace(ns)))
	out := map[string]types.UID{}
	for _, p := range pvcs.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p.UID
		}
	}
	return out
}

// A voter whose volume was wiped while the cluster was parked never starts under its old
// ID: it is removed and a new member takes its place, and no acknowledged write is lost.
func TestVolumeWipedWhileParkedIsReplaced(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	before := framework.CreateReady(t, ns, 3)
	w := writeAWhile(t, ns, "demo")

	framework.Park(t, ns, "demo")
	require.NoError(t, framework.Env.Stack.WipePVC(context.Background(), ns, "demo-1"))
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 3 })
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
	framework.RequireHistory(t, c, "RemoveMember demo-1")
	old := map[string]bool{}
	for _, m := range before.Status.Members {
		old[m.ID] = true
	}
	for _, m := range c.Status.Members {
		require.Equal(t, m.Name != "demo-3", old[m.ID], "member %s %s", m.Name, m.ID)
	}
	framework.CheckMembership(t, ns, "demo")
	w.stillThere() // the writes from before must be there too
}

// A Pod the cluster does not own holds the name of its first member: the operator neither
// adopts nor deletes it, and the step stalls with NameTaken.
func TestForeignPodNameStalls(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	foreign := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "demo-0", Labels: map[string]string{"app": "other"}},
		Spec: corev1.PodSpec{NodeName: "nowhere", Containers: []corev1.Container{{Name: "x", Image: "other:1",
			SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}, SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}}}}}
	require.NoError(t, framework.Env.Client.Create(context.Background(), foreign))
	c := framework.NewCluster(ns, "demo", 1)
	c.Spec.UpdateStrategy.ProgressDeadlineSeconds = 10
	require.NoError(t, framework.Env.Client.Create(context.Background(), c))
	c = framework.Refused(t, ns, "demo", 2*time.Minute, "NameTaken")
	require.Contains(t, framework.Condition(c, "Stalled").Message, "Pod demo-0 exists and is not this cluster's")
	p := &corev1.Pod{}
	require.NoError(t, framework.Env.Client.Get(context.Background(), client.ObjectKeyFromObject(foreign), p))
	require.Equal(t, foreign.UID, p.UID, "the foreign Pod is left alone")
	require.Empty(t, p.OwnerReferences)
}

// retainPolicy Delete -> Retain takes the cluster's ownership off existing volumes, so
// deleting the cluster keeps them.
func TestRetainPolicyChangeKeepsVolumes(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "demo", 1)
	c.Spec.Storage.RetainPolicy = v1alpha1.RetainPolicyDelete
	require.NoError(t, framework.Env.Client.Create(context.Background(), c))
	c = framework.WaitReady(t, ns, "demo")
	owners := func() int {
		pvc := &corev1.PersistentVolumeClaim{}
		require.NoError(t, framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo-0"}, pvc))
		return len(pvc.OwnerReferences)
	}
	require.Equal(t, 1, owners(), "with Delete the cluster owns its volumes")
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.RetainPolicy = v1alpha1.RetainPolicyRetain })
	require.Eventually(t, func() bool { return owners() == 0 }, time.Minute, 250*time.Millisecond, "Retain takes the ownership off")

	require.NoError(t, framework.Env.Client.Delete(context.Background(), framework.Get(t, ns, "demo")))
	require.Eventually(t, func() bool {
		var pods corev1.PodList
		_ = framework.Env.Client.List(context.Background(), &pods, client.InNamespace(ns))
		return len(pods.Items) == 0
	}, 2*time.Minute, time.Second, "the Pods go with the cluster")
	time.Sleep(2 * time.Second) // the garbage collector has had its chance
	require.Len(t, claimUIDs(t, ns), 1, "the volume stays")
}

// A member that hangs (its process stopped: it accepts connections and answers nothing) is
// silent, not down: status says so, and a rolling change restarts it first only because the
// others keep quorum without it. No acknowledged write is lost.
func TestHungMemberIsSilent(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	c := framework.CreateReady(t, ns, 3)
	follower := ""
	for _, m := range c.Status.Members {
		if !m.Leader {
			follower = m.Name
		}
	}
	ctx := context.Background()
	require.NoError(t, framework.Env.Stack.PauseContainer(ctx, ns, follower, "etcd"))
	t.Cleanup(func() { _ = framework.Env.Stack.ResumeContainer(ctx, ns, follower, "etcd") })
	framework.WaitFor(t, ns, "demo", time.Minute, follower+" silent in status", func(c *v1alpha1.EtcdCluster) bool {
		i := slices.IndexFunc(c.Status.Members, func(m v1alpha1.MemberStatus) bool { return m.Name == follower })
		return i >= 0 && c.Status.Members[i].Silent && !c.Status.Members[i].Healthy && !framework.Ready(c)
	})

	w := startWriter(t, ns, "demo")
	quota := int64(64 << 20)
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Options.QuotaBackendBytes = &quota })
	require.Eventually(t, func() bool {
		var p corev1.Pod
		return framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: follower}, &p) == nil && p.DeletionTimestamp != nil
	}, time.Minute, 50*time.Millisecond, "the hung member's Pod is deleted")
	require.NoError(t, framework.Env.Stack.ResumeContainer(ctx, ns, follower, "etcd")) // its pending SIGTERM ends it
	c = framework.WaitReady(t, ns, "demo")
	require.True(t, strings.HasPrefix(c.Status.History[0].Actions, "RestartMember "+follower), "the hung member restarted first: %s", c.Status.History[0].Actions)
	w.stopAndVerify()
	framework.CheckMembership(t, ns, "demo")
}

// A failed upgrade is rolled back by setting spec.version back: the member whose new version
// never answered still counts at the version its data last served, so this is no downgrade,
// and it restarts on its old version first. Versions etcd cannot reach are refused.
func TestFailedUpgradeRollsBack(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	c := framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "3.5.35" })
	w := startWriter(t, ns, "demo")

	// No binary serves 3.6.99 on the stack: its container never starts, as with an image
	// that cannot be pulled.
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "3.6.99" })
	var failed string
	require.Eventually(t, func() bool {
		var pods corev1.PodList
		require.NoError(t, framework.Env.Client.List(context.Background(), &pods, client.InNamespace(ns)))
		for _, p := range pods.Items {
			if p.Annotations[vocab.AnnotationVersion] == "3.6.99" && !framework.PodReady(&p) {
				failed = p.Name
			}
		}
		return failed != ""
	}, time.Minute, 100*time.Millisecond, "a member Pod on 3.6.99")
	c = framework.WaitFor(t, ns, "demo", time.Minute, "the member on 3.6.99 counted at its last version", func(c *v1alpha1.EtcdCluster) bool {
		for _, m := range c.Status.Members {
			if m.Name == failed {
				return !m.Healthy && m.Version == "3.5.35"
			}
		}
		return false
	})

	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "3.5.35" })
	c = framework.WaitReady(t, ns, "demo")
	require.Equal(t, "3.5.35", c.Status.Version)
	require.Equal(t, "3.5.0", c.Status.ClusterVersion)
	require.Contains(t, c.Status.History[0].Actions, "UpgradeMember "+failed, "the failed member went back first")
	for _, m := range c.Status.Members {
		var pvc corev1.PersistentVolumeClaim
		require.NoError(t, framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: m.PVC}, &pvc))
		require.Equal(t, "3.5.35", pvc.Annotations[vocab.AnnotationRanVersion], "claim %s", m.PVC)
	}
	w.stopAndVerify()

	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "3.7.0" })
	c = framework.Refused(t, ns, "demo", time.Minute, string(plan.BlockSkippedMinor))
	require.Contains(t, framework.Condition(c, "Stalled").Message, "set spec.version to a 3.6.x release first")
}
