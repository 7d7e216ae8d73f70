package e2e

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/test/framework"
	"github.com/etcdplan/etcdplan/test/stack"
)

// A larger size grows every member's claim in place (the stack's class allows expansion):
// no Pod is restarted, and etcd keeps its members.
func TestStorageGrowsInPlace(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	framework.CreateReady(t, ns, 3)
	pods := framework.PodUIDs(t, ns, "demo")
	before := framework.CheckMembership(t, ns, "demo")
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.Size = resource.MustParse("128Mi") })
	c := framework.WaitFor(t, ns, "demo", time.Minute, "the claims grown", func(c *v1alpha1.EtcdCluster) bool {
		return framework.Ready(c) && c.Status.ObservedGeneration == c.Generation && len(c.Status.History) > 0
	})
	framework.RequireHistory(t, c, "ExpandVolume demo-0, ExpandVolume demo-1, ExpandVolume demo-2")
	for _, pvc := range claims(t, ns) {
		want := resource.MustParse("128Mi")
		require.Zero(t, want.Cmp(pvc.Spec.Resources.Requests[corev1.ResourceStorage]), pvc.Name)
		require.Eventually(t, func() bool {
			got := &corev1.PersistentVolumeClaim{}
			require.NoError(t, framework.Env.Client.Get(context.Background(), client.ObjectKeyFromObject(&pvc), got))
			have := got.Status.Capacity[corev1.ResourceStorage]
			return have.Cmp(want) == 0
		}, time.Minute, 200*time.Millisecond, "the class grows the volume of %s", pvc.Name)
	}
	require.Equal(t, pods, framework.PodUIDs(t, ns, "demo"), "no Pod restarted")
	require.ElementsMatch(t, before.Members, framework.CheckMembership(t, ns, "demo").Members)
}

// A new storage class moves the members one at a time with a writer running: a member joins
// on the new class before one on the old leaves (the leader last, after leadership moved),
// so etcd never has fewer than three voters, and no acknowledged write is lost. The new
// class cannot expand volumes, so a larger size then moves them again.
func TestStorageMovesToANewClass(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	class := "fixed-" + ns // cluster-scoped: one per test
	require.NoError(t, framework.Env.Client.Create(context.Background(), &storagev1.StorageClass{
		ObjectMeta: framework.MetaName("", class), Provisioner: stack.Provisioner,
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate), ReclaimPolicy: ptr.To(corev1.PersistentVolumeReclaimDelete),
		AllowVolumeExpansion: ptr.To(false),
	}))
	t.Cleanup(func() {
		_ = framework.Env.Client.Delete(context.Background(), &storagev1.StorageClass{ObjectMeta: framework.MetaName("", class)})
	})
	framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.StorageClassName = stack.StorageClass })
	w := startWriter(t, ns, "demo")
	for _, step := range []struct {
		what   string
		change func(c *v1alpha1.EtcdCluster)
		size   string
	}{
		{"a new class", func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.StorageClassName = class }, "64Mi"},
		{"a size the class cannot grow to", func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.Size = resource.MustParse("96Mi") }, "96Mi"},
	} {
		voters := watchVoters(t, ns, "demo")
		framework.Update(t, ns, "demo", step.change)
		c := framework.WaitFor(t, ns, "demo", 4*time.Minute, "members moved for "+step.what, func(c *v1alpha1.EtcdCluster) bool {
			if !framework.Ready(c) || c.Status.ObservedGeneration != c.Generation {
				return false
			}
			for _, pvc := range claims(t, ns) {
				if ptr.Deref(pvc.Spec.StorageClassName, "") != class || pvc.Spec.Resources.Requests.Storage().String() != step.size {
					return false
				}
			}
			return len(claims(t, ns)) == 3
		})
		require.GreaterOrEqual(t, voters.stop(), 3, "etcd had three voters throughout (%s)", step.what)
		require.GreaterOrEqual(t, c.Status.NextOrdinal, int32(6), "three new members joined")
		framework.CheckMembership(t, ns, "demo")
	}
	w.stopAndVerify()
	t.Logf("moving storage twice: %d writes failed (5 s timeout), worst latency %v", w.failed, w.maxLat)
}

// claims are the member volume claims of the cluster "demo" in ns.
func claims(t *testing.T, ns string) []corev1.PersistentVolumeClaim {
	t.Helper()
	var list corev1.PersistentVolumeClaimList
	require.NoError(t, framework.Env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelCluster: "demo"}))
	return list.Items
}

// voterWatch records the fewest voters etcd listed while an operation ran.
type voterWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	least  int
}

func watchVoters(t *testing.T, ns, name string) *voterWatch {
	ctx, cancel := context.WithCancel(context.Background())
	v := &voterWatch{cancel: cancel, done: make(chan struct{}), least: 99}
	id := framework.Get(t, ns, name).Status.ClusterID
	cli := framework.EtcdClient(t, framework.Endpoints(t, ns, name))
	go func() {
		defer close(v.done)
		for i := 0; ctx.Err() == nil; i++ {
			if i%10 == 0 {
				if eps := framework.Endpoints(t, ns, name); len(eps) > 0 {
					cli.SetEndpoints(eps...)
				}
			}
			lctx, lcancel := context.WithTimeout(ctx, 2*time.Second)
			list, err := cli.MemberList(lctx)
			lcancel()
			if err == nil && framework.SameCluster(list.Header, id) == nil {
				n := 0
				for _, m := range list.Members {
					if !m.IsLearner {
						n++
					}
				}
				v.mu.Lock()
				v.least = min(v.least, n)
				v.mu.Unlock()
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return v
}

func (v *voterWatch) stop() int {
	v.cancel()
	<-v.done
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.least
}

// Members in memory lose their data with their Pod: a configuration change replaces them one
// at a time (a new member joins, then an old one leaves) and restarts none, with a writer
// running and etcd never below three voters.
func TestMemoryMembersAreReplaced(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.Medium = v1alpha1.StorageMediumMemory })
	w := startWriter(t, ns, "demo")
	voters := watchVoters(t, ns, "demo")
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) {
		c.Spec.Options.SnapshotCount = ptr.To[int64](20000)
	})
	c := framework.WaitFor(t, ns, "demo", 4*time.Minute, "the members replaced", func(c *v1alpha1.EtcdCluster) bool {
		return framework.Ready(c) && c.Status.ObservedGeneration == c.Generation && c.Status.NextOrdinal >= 6
	})
	require.GreaterOrEqual(t, voters.stop(), 3, "etcd had three voters throughout")
	w.stopAndVerify()
	for _, h := range c.Status.History {
		require.NotContains(t, h.Actions, "RestartMember", "no member in memory is restarted: %+v", c.Status.History)
	}
	framework.CheckMembership(t, ns, "demo")
	t.Logf("replacing members in memory: %d writes failed (5 s timeout), worst latency %v", w.failed, w.maxLat)
}
