package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/test/framework"
)

// naiveRun is a rollout done the way a tool that knows nothing of etcd's leader does it,
// timed and probed like the floor's run.
type naiveRun struct {
	How    string
	Time   time.Duration
	Writes writeStats
}

// naive runs do on the floor's cluster under the probe, after the floor's run.
func (b *bench) naive(r *benchResult, how, cluster, version string, do func(), extra func(ns string) bool) {
	d, writes, _ := b.probed(b.floorNS, cluster, do, func() bool {
		return b.settled(b.floorNS, cluster, 3, version) && (extra == nil || extra(b.floorNS))
	})
	r.Naive = &naiveRun{How: how, Time: d, Writes: writes}
	b.t.Logf("bench: %s, naive (%s): %v, %d of %d writes failed, slowest %v", r.Name, how, d.Round(time.Millisecond),
		r.Naive.Writes.Failed, r.Naive.Writes.Writes, r.Naive.Writes.Max)
}

// upgrade measures a 3.5 -> 3.6 upgrade of three members: the operator's, the floor's (the
// same steps: followers, then the leader after handing leadership over) and a naive one (a
// StatefulSet's order, highest ordinal first, leadership never moved).
func (b *bench) upgrade() benchResult {
	t := b.t
	from, to := "3.5.35", "3.6.16"
	ready := func(name string) *floor {
		c := framework.NewCluster(b.floorNS, name, 3)
		c.Spec.Version = from
		fl := newFloor(t, b.floorNS, c)
		fl.bootstrap(3, from)
		return fl
	}
	up := framework.NewCluster(b.opNS, "up", 3)
	up.Spec.Version = from
	require.NoError(t, framework.Env.Client.Create(context.Background(), up))
	framework.WaitReady(t, b.opNS, "up")
	flUp, naiveUp := ready("up"), ready("naive-up")
	r := b.run("upgrade 3 members 3.5 -> 3.6", "up", 3, to, func() {
		framework.Update(t, b.opNS, "up", func(c *v1alpha1.EtcdCluster) { c.Spec.Version = to })
	}, func() {
		leader := flUp.leader()
		for _, m := range []string{"up-0", "up-1", "up-2"} {
			if m != leader {
				flUp.restart(leader, m, to)
			}
		}
		flUp.restart(flUp.other(leader), leader, to)
	}, nil)
	b.naive(&r, "members restarted highest ordinal first, leadership not moved", "naive-up", to, func() {
		for _, m := range []string{"naive-up-2", "naive-up-1", "naive-up-0"} {
			naiveUp.deletePod(m, true)
			naiveUp.start(m, to, false, true)
			naiveUp.healthy(m)
		}
	}, nil)
	return r
}

// Each defragmentation rewrites a database of 64 MiB of keys and 32 MiB of free pages.
const defragLive, defragFree = 64, 32

// defrag measures defragmenting three members that each hold defragFree MiB free: the
// operator at a threshold, the floor (the same steps: followers, then the leader after
// handing leadership over) and a naive run (every member in turn, the leader in place, as
// `etcdctl defrag --cluster` does).
func (b *bench) defrag() benchResult {
	t := b.t
	c := framework.NewCluster(b.opNS, "big", 3)
	c.Spec.Storage.Size = resource.MustParse("256Mi")
	require.NoError(t, framework.Env.Client.Create(context.Background(), c))
	fl := newFloor(t, b.floorNS, c)
	fl.bootstrap(3, c.Spec.Version)
	framework.WaitReady(t, b.opNS, "big")
	for _, ns := range []string{b.opNS, b.floorNS} {
		load(t, ns, "big", defragLive)
		framework.Fragment(t, ns, "big", defragFree)
	}
	done := func(ns string) bool { return b.defragmented(ns, "big") }
	r := b.run(fmt.Sprintf("defragment 3 members, %d MiB each", defragLive+defragFree), "big", 3, c.Spec.Version, func() {
		framework.Update(t, b.opNS, "big", func(c *v1alpha1.EtcdCluster) {
			c.Spec.Maintenance = &v1alpha1.MaintenanceSpec{Defrag: &v1alpha1.DefragSpec{ThresholdPercent: 20}}
		})
	}, func() {
		leader := fl.leader()
		for _, m := range []string{"big-0", "big-1", "big-2"} {
			if m != leader {
				fl.defrag(m)
			}
		}
		fl.handOff(leader, fl.other(leader))
		fl.defrag(leader)
	}, done)
	framework.Fragment(t, b.floorNS, "big", defragFree)
	b.naive(&r, "every member in turn, the leader in place", "big", c.Spec.Version, func() {
		for _, m := range []string{"big-0", "big-1", "big-2"} {
			fl.defrag(m)
		}
	}, done)
	return r
}

// load writes mib MiB of keys that stay, four writers at once.
func load(t *testing.T, ns, cluster string, mib int) {
	t.Helper()
	cli := framework.EtcdClient(t, framework.Endpoints(t, ns, cluster))
	value := strings.Repeat("x", 512<<10)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < 2*mib; i += 4 {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_, err := cli.Put(ctx, fmt.Sprintf("/bench/live/%04d", i), value)
				cancel()
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	require.NoError(t, <-errs)
}

// defragmented: every member answers, with less than a tenth of its database free.
func (b *bench) defragmented(ns, cluster string) bool {
	eps := framework.Endpoints(b.t, ns, cluster)
	cli := framework.EtcdClient(b.t, eps)
	defer cli.Close()
	for _, ep := range eps {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := cli.Status(ctx, ep)
		cancel()
		if err != nil || (st.DbSize-st.DbSizeInUse)*10 >= st.DbSize {
			return false
		}
	}
	return true
}

// defrag defragments one member at its own endpoint, until it succeeds.
func (f *floor) defrag(name string) {
	cli := f.client(name)
	defer cli.Close()
	ctx, cancel := f.ctx()
	defer cancel()
	for {
		_, err := cli.Defragment(ctx, cli.Endpoints()[0])
		if err == nil {
			return
		}
		require.NoError(f.t, ctx.Err(), "defragment %s: %v", name, err)
		time.Sleep(floorPoll)
	}
}

// other is a member of the floor's cluster that is not name.
func (f *floor) other(name string) string {
	for m := range f.members {
		if m != name {
			return m
		}
	}
	f.t.Fatalf("the floor's cluster has no member but %s", name)
	return ""
}

// naiveReport compares, for the rollouts that have a naive run, what clients saw: writes
// failed, the slowest that succeeded, and the longest without one that succeeded.
func naiveReport(results []benchResult) string {
	var b strings.Builder
	for _, r := range results {
		if r.Naive == nil {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\n| rollout | operator | writes failed | write max | no write for | naive rollout | naive | writes failed | write max | no write for |\n|---|---|---|---|---|---|---|---|---|---|\n")
		}
		n := r.Naive
		fmt.Fprintf(&b, "| %s | %.2f s | %d of %d | %s | %s | %s | %.2f s | %d of %d | %s | %s |\n", r.title(), r.Operator.Seconds(), r.During.Failed, r.During.Writes,
			ms(r.During.Max), ms(r.During.Gap), n.How, n.Time.Seconds(), n.Writes.Failed, n.Writes.Writes, ms(n.Writes.Max), ms(n.Writes.Gap))
	}
	return b.String()
}
