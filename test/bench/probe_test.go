package bench

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/etcd/etcdfake"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/planner"
	"github.com/etcdplan/etcdplan/test/framework"
)

// probe writes at a fixed rate, each write on a 2 s clock, and records every outcome: what
// a client of the cluster sees while an operation runs.
type probe struct {
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	mu      sync.Mutex
	samples []probeSample
	cli     *clientv3.Client // the client writes go through now (follow)
	tls     *tls.Config      // the client's TLS, nil for plain text
	busy    atomic.Bool      // a follow is under way
}

type probeSample struct {
	At      time.Time
	Latency time.Duration
	OK      bool
}

const probeEvery = 20 * time.Millisecond

func startProbe(t *testing.T, ns, cluster string) *probe {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p := &probe{cancel: cancel}
	p.follow(t, ns, cluster)
	if p.cli == nil {
		t.Fatalf("the probe of %s/%s found no member to write to", ns, cluster)
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		tick := time.NewTicker(probeEvery)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			if i%25 == 0 && p.busy.CompareAndSwap(false, true) { // follow the members as they come and go
				p.wg.Add(1)
				go func() {
					defer p.wg.Done()
					defer p.busy.Store(false)
					p.follow(t, ns, cluster)
				}()
			}
			p.mu.Lock()
			cli := p.cli
			p.mu.Unlock()
			p.wg.Add(1)
			go func() {
				defer p.wg.Done()
				start := time.Now()
				wctx, wcancel := context.WithTimeout(context.Background(), 2*time.Second)
				_, err := cli.Put(wctx, fmt.Sprintf("/probe/%08d", i), "x")
				wcancel()
				p.mu.Lock()
				p.samples = append(p.samples, probeSample{At: start, Latency: time.Since(start), OK: err == nil})
				p.mu.Unlock()
			}()
		}
	}()
	return p
}

// follow points the probe's client at the cluster's running members, as an application
// that follows the cluster would: it speaks TLS once every member serves it (as the
// operator dials, observe.Endpoints), with the client certificate and CAs its Secret holds
// now (framework.ReadClientTLS: an application that reads its mounted Secret again when it
// changes). A new way or a new certificate is a new client; the old one is closed once the
// writes in flight on it are done.
func (p *probe) follow(t *testing.T, ns, cluster string) {
	eps := observe.Endpoints(framework.MemberPods(t, ns, cluster))
	if len(eps) == 0 {
		return
	}
	var cfg *tls.Config
	if observe.Scheme(eps) == "https" {
		var err error
		if cfg, err = framework.ReadClientTLS(ns, cluster); err != nil || cfg == nil {
			return // its Secret is not there yet: the client stays as it is
		}
	}
	urls := slices.Sorted(maps.Values(eps))
	p.mu.Lock()
	cli, old := p.cli, p.tls
	p.mu.Unlock()
	if cli != nil && sameTLS(old, cfg) {
		cli.SetEndpoints(urls...)
		return
	}
	c := framework.EtcdConfig(urls, cfg)
	c.DialTimeout = 2 * time.Second
	fresh, err := clientv3.New(c)
	if err != nil {
		return
	}
	p.mu.Lock()
	p.cli, p.tls = fresh, cfg
	p.mu.Unlock()
	if cli != nil {
		time.AfterFunc(3*time.Second, func() { _ = cli.Close() })
	}
}

// sameTLS: both plain text, or the same certificate presented and the same CAs trusted.
func sameTLS(a, b *tls.Config) bool {
	if a == nil || b == nil {
		return a == b
	}
	return len(a.Certificates) > 0 && len(b.Certificates) > 0 &&
		bytes.Equal(a.Certificates[0].Certificate[0], b.Certificates[0].Certificate[0]) && a.RootCAs.Equal(b.RootCAs)
}

// stop ends the probe and returns its samples in the order the writes started.
func (p *probe) stop() []probeSample {
	p.cancel()
	p.wg.Wait()
	_ = p.cli.Close()
	slices.SortFunc(p.samples, func(a, b probeSample) int { return a.At.Compare(b.At) })
	return p.samples
}

// writeStats sums up a probe: failed writes, the latencies of those that succeeded, and
// the longest a client went without a write succeeding (Gap: between the ends of two that
// succeeded one after the other, or from the first write's start or to the last one's
// end).
type writeStats struct {
	Writes, Failed int
	P50, P99, Max  time.Duration
	Gap            time.Duration
}

// statsOf sums up samples in the order their writes started.
func statsOf(samples []probeSample) writeStats {
	var s writeStats
	if len(samples) == 0 {
		return s
	}
	var lat []time.Duration
	var acked []time.Time
	last := samples[0].At
	for _, x := range samples {
		s.Writes++
		end := x.At.Add(x.Latency)
		if end.After(last) {
			last = end
		}
		if !x.OK {
			s.Failed++
			continue
		}
		lat = append(lat, x.Latency)
		acked = append(acked, end)
	}
	slices.SortFunc(acked, time.Time.Compare)
	prev := samples[0].At
	for _, at := range append(acked, last) {
		s.Gap, prev = max(s.Gap, at.Sub(prev)), at
	}
	slices.Sort(lat)
	s.P50, s.P99 = quantile(lat, 0.5), quantile(lat, 0.99)
	if len(lat) > 0 {
		s.Max = lat[len(lat)-1]
	}
	return s
}

func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(q*float64(len(sorted))))]
}

// sampler looks at a cluster every few milliseconds the way the operator does (its Pods and
// claims, etcd's view), independently of the operator. With the operator's own planner it
// tells, for each step of the operator's plans, when its precondition held and when its
// effect showed: the moments the operator's reaction is measured from.
type sampler struct {
	cancel context.CancelFunc
	done   chan struct{}
	ticks  []sample
	plans  map[string]*v1alpha1.PlanStatus // the last copy of each plan status showed
	last   *v1alpha1.EtcdCluster
	kube   client.Reader
	// notes are what the cluster's status said, each time it said something new: the
	// current step and its message, or the Ready condition's reason once no plan runs.
	notes []timedNote
	// dialed is how the sampler's etcd client was dialed.
	dialed dialedAs
	// etcdAfter is when the sampler asks etcd again after a view without a quorum
	// (quorumlessEvery).
	etcdAfter time.Time
}

// dialedAs is the scheme of a client's endpoints and its TLS configuration.
type dialedAs struct {
	scheme string
	tls    *tls.Config
}

// timedNote is something seen at a moment.
type timedNote struct {
	At   time.Time
	Note string
}

type sample struct {
	At       time.Time
	Desired  planner.Desired
	Observed planner.Observed
}

// sampleEvery is the sampler's period. Each look asks every member for its status: looking
// every 20 ms took enough of the two cores to slow a scale-down of five members by a third.
const sampleEvery = 50 * time.Millisecond

// quorumlessEvery is how often the sampler asks etcd while its view shows no quorum. Such
// a view times no step (planTimings skips it), and asked every 50 ms it held a member's
// read of its list pending at all times and its client dialled the members that do not
// answer: in the quorum-loss runs it used about 70 ms of CPU a second, in the operator's
// run alone, on a machine of two cores that the recovery needs.
const quorumlessEvery = 250 * time.Millisecond

// watchCache starts an informer cache of the stack's Pods, claims and EtcdClusters. The
// bench's own looks (settled, watchReady, the sampler) read from it, as the operator reads
// its cache: looking every few milliseconds must load neither the API server nor the etcd
// behind it that the operator and the floor work against.
func watchCache(t *testing.T) cache.Cache {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kube, err := cache.New(framework.Env.Stack.RESTConfig(), cache.Options{Scheme: framework.Env.Client.Scheme()})
	require.NoError(t, err)
	go func() { _ = kube.Start(ctx) }()
	for _, obj := range []client.Object{&v1alpha1.EtcdCluster{}, &corev1.Pod{}, &corev1.PersistentVolumeClaim{}} {
		_, err := kube.GetInformer(ctx, obj)
		require.NoError(t, err)
	}
	require.True(t, kube.WaitForCacheSync(ctx))
	return kube
}

func startSampler(t *testing.T, kube cache.Cache, ns, name string) *sampler {
	t.Helper()
	s := &sampler{done: make(chan struct{}), plans: map[string]*v1alpha1.PlanStatus{}, kube: kube}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() {
		defer close(s.done)
		var cli etcd.Cluster
		defer func() {
			if cli != nil {
				_ = cli.Close()
			}
		}()
		for ctx.Err() == nil {
			at := time.Now()
			if smp, ok := s.look(ctx, ns, name, &cli); ok {
				smp.At = at
				s.ticks = append(s.ticks, smp)
			}
			time.Sleep(time.Until(at.Add(sampleEvery)))
		}
	}()
	return s
}

func (s *sampler) look(ctx context.Context, ns, name string, cli *etcd.Cluster) (sample, bool) {
	c := &v1alpha1.EtcdCluster{}
	if err := s.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
		return sample{}, false
	}
	s.last = c
	s.note(c)
	for _, p := range []*v1alpha1.PlanStatus{c.Status.Plan} {
		if p != nil && p.Blocked == nil {
			s.plans[p.ID] = p
		}
	}
	objs, err := observe.List(ctx, s.kube, c)
	if err != nil {
		return sample{}, false
	}
	smp := sample{Desired: observe.Desired(c), Observed: objs.Observed(c)}
	eps := observe.Endpoints(objs.Pods)
	if len(eps) == 0 {
		return smp, true
	}
	tlsCfg, ok := clientTLS(ns, name)
	if !ok { // a TLS cluster's Secrets are not there yet
		return smp, true
	}
	// Members switched to TLS, or the operator's certificate issued again: a new client.
	if dialed := (dialedAs{observe.Scheme(eps), tlsCfg}); *cli != nil && dialed != s.dialed {
		_ = (*cli).Close()
		*cli = nil
	}
	if *cli == nil {
		if *cli, err = etcd.Dial(eps, tlsCfg); err != nil {
			return smp, true
		}
		s.dialed = dialedAs{observe.Scheme(eps), tlsCfg}
	}
	if time.Now().Before(s.etcdAfter) {
		return smp, true
	}
	(*cli).SetCluster(c.Status.ClusterID, eps)
	// A short clock: a member that does not answer yet must not leave the sampler blind.
	vctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
	defer cancel()
	v, err := (*cli).View(vctx)
	if err == nil && len(v.Members) > 0 {
		smp.Observed.Etcd = v
	}
	if err != nil || !v.Linearizable {
		s.etcdAfter = time.Now().Add(quorumlessEvery)
	}
	return smp, true
}

// note records what the cluster's status says, if it says something new.
func (s *sampler) note(c *v1alpha1.EtcdCluster) {
	var n string
	if p := c.Status.Plan; p != nil && int(p.Current) < len(p.Steps) {
		st := p.Steps[p.Current]
		n = fmt.Sprintf("plan %s %s, step %d/%d %s %s", p.ID, p.Phase, p.Current+1, len(p.Steps), st.Action, st.Member)
		if int(p.Current) < len(p.Progress) {
			pr := p.Progress[p.Current]
			n += fmt.Sprintf(" %s: %s", pr.State, pr.Message)
		}
	} else if r := apimeta.FindStatusCondition(c.Status.Conditions, "Ready"); r != nil {
		n = fmt.Sprintf("no plan; Ready=%s %s: %s", r.Status, r.Reason, r.Message)
	}
	if len(s.notes) == 0 || s.notes[len(s.notes)-1].Note != n {
		s.notes = append(s.notes, timedNote{At: time.Now(), Note: n})
	}
}

func (s *sampler) stop() {
	s.cancel()
	<-s.done
}

// stepTiming is one step of a plan as the operator recorded it (its own clock) and as the
// sampler saw the cluster (ready: the precondition held after the step before showed its
// effect; visible: the step's own effect showed).
type stepTiming struct {
	Plan, Action, Member       string
	Precondition               string
	Started, Applied, Finished time.Time
	Ready, Visible             time.Time
}

// etcdAllows: etcd's own rule for the step holds, as far as the members' answers show. A
// learner's promotion is etcd's to allow, once the learner's log nears the leader's: the
// planner's precondition (its Pod runs) only says the operator may start asking.
func etcdAllows(o planner.Observed, s plan.Step) bool {
	if s.Action != plan.PromoteLearner {
		return true
	}
	return o.Etcd != nil && etcdfake.InSync(o.Etcd, s.MemberID)
}

// Reaction is how long the operator took to apply a step once it could.
func (st stepTiming) Reaction() (time.Duration, bool) {
	if st.Applied.IsZero() || st.Ready.IsZero() {
		return 0, false
	}
	return max(0, st.Applied.Sub(st.Ready)), true
}

// Noticed is how long the operator took to see a step's effect once it showed.
func (st stepTiming) Noticed() (time.Duration, bool) {
	if st.Finished.IsZero() || st.Visible.IsZero() {
		return 0, false
	}
	return max(0, st.Finished.Sub(st.Visible)), true
}

// timings lines up the operator's step records with the sampler's looks, plan by plan in
// the order they were made. The steps of a plan superseded before it reached them are left
// out: the operator never started them.
func (s *sampler) timings() []stepTiming {
	var recs []*v1alpha1.PlanStatus
	for _, p := range s.plans {
		recs = append(recs, p)
	}
	slices.SortFunc(recs, func(a, b *v1alpha1.PlanStatus) int { return a.CreatedAt.When().Compare(b.CreatedAt.When()) })
	var out []stepTiming
	for _, rec := range recs {
		for _, st := range s.planTimings(rec) {
			if !st.Started.IsZero() || !st.Applied.IsZero() || !st.Finished.IsZero() {
				out = append(out, st)
			}
		}
	}
	return out
}

// planTimings finds, for each step, when its effect first showed after a look since the
// plan was made saw it pending (visible), and when it could first run: the step before had
// shown its effect and its precondition held (ready). A step that went from pending to done
// between two looks was ready at the last look that saw it pending, at the latest. A step
// done before any look saw it pending is faster than the sampler and is not measured.
func (s *sampler) planTimings(rec *v1alpha1.PlanStatus) []stepTiming {
	steps := make([]stepTiming, len(rec.Steps))
	lastPending := make([]time.Time, len(rec.Steps))
	for i, st := range rec.Steps {
		steps[i] = stepTiming{Plan: rec.ID, Action: string(st.Action), Member: st.Member, Precondition: string(st.Precondition.Kind)}
		if i < len(rec.Progress) {
			pr := rec.Progress[i]
			steps[i].Started, steps[i].Applied, steps[i].Finished = pr.StartedAt.When(), pr.AppliedAt.When(), pr.FinishedAt.When()
		}
	}
	// The last status the sampler read may predate the last step's finish: the plan's
	// record in history has it.
	if s.last != nil {
		for _, h := range s.last.Status.History {
			// A plan superseded or blocked finished without its last step.
			if h.ID == rec.ID && h.Phase == v1alpha1.PlanSucceeded && len(steps) > 0 && steps[len(steps)-1].Finished.IsZero() {
				steps[len(steps)-1].Finished = h.FinishedAt.When()
			}
		}
	}
	for _, smp := range s.ticks {
		// A look without a member list read through a quorum shows no membership change
		// (the operator waits for one too).
		if smp.At.Before(rec.CreatedAt.When()) || smp.Desired.Generation != rec.Generation ||
			smp.Observed.ClusterID != "" && (smp.Observed.Etcd == nil || !smp.Observed.Etcd.Linearizable) {
			continue
		}
		fresh := planner.Plan(smp.Desired, smp.Observed)
		k, ok := planner.DoneUpTo(rec.Steps, 0, fresh)
		if !ok {
			continue
		}
		for i := range steps {
			switch {
			case i >= k:
				lastPending[i] = smp.At
			case steps[i].Visible.IsZero() && !lastPending[i].IsZero():
				steps[i].Visible = smp.At
			}
		}
		if k < len(steps) && steps[k].Ready.IsZero() && (k == 0 || !steps[k-1].Visible.IsZero()) {
			if ok, _ := planner.Check(smp.Desired, fresh.Steps[0], smp.Observed); ok && etcdAllows(smp.Observed, fresh.Steps[0]) {
				steps[k].Ready = smp.At
			}
		}
	}
	for i := range steps {
		if steps[i].Ready.IsZero() && !steps[i].Visible.IsZero() {
			steps[i].Ready = lastPending[i]
			if i > 0 && steps[i-1].Visible.After(steps[i].Ready) {
				steps[i].Ready = steps[i-1].Visible
			}
		}
	}
	return steps
}
