package bench

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/test/framework"
)

// benchResult is one scenario: the operator's run and the floor's, side by side.
type benchResult struct {
	Name            string
	Run, Of         int // the run's number and how many runs of the scenario (0: one)
	Operator, Floor time.Duration
	Steps           []stepTiming
	Idle, During    writeStats
	FloorWrites     writeStats
	Samples         []probeSample
	Start           time.Time
	// Publishes and FloorPublishes count the members that waited etcd's request timeout
	// to publish themselves (see publishWaits).
	Publishes, FloorPublishes int
	Naive                     *naiveRun // the same rollout done naively, if measured
	// Marks are the moments of a recovery from quorum loss, in both runs; Ready is when
	// the operator's status first said Ready after its start (-1: not seen).
	Marks []benchMark
	Ready time.Duration
	// Notes are what the operator's status said during its run, each time it changed.
	Notes []timedNote
}

// TestBench runs each scenario twice on the local stack, once by the operator and once by
// the floor (the same Pod and etcd operations with nothing in between), and writes the
// figures and plots to docs/benchmarks.md. Skipped unless BENCH is set: `make bench`.
func TestBench(t *testing.T) {
	if os.Getenv("BENCH") == "" {
		t.Skip("BENCH is not set: make bench runs the benchmarks")
	}
	ctrllog.SetLogger(logr.Discard()) // the sampler's informers log through it
	opNS, floorNS := framework.Namespace(t), framework.Namespace(t)
	b := &bench{t: t, opNS: opNS, floorNS: floorNS, kube: watchCache(t)}
	// BENCH_ONLY=clusters measures only the operator restart and the many clusters
	// (restart: the restart alone), and writes no docs: for looking into those alone.
	if only := os.Getenv("BENCH_ONLY"); only == "clusters" || only == "restart" {
		r := b.restart(10)
		b.clear(b.restartNS)
		if only == "restart" {
			t.Logf("bench: restart: operator %v, floor %v", r.Operator, r.Floor)
			return
		}
		sr := b.scale(benchClusters())
		t.Logf("bench: restart %s; %d clusters reconciled %v after a restart", span(r.Start, r.Start.Add(r.Operator)), sr.Clusters, sr.ReconciledAfterStart)
		return
	}
	// Joins swing most between runs (etcd 3.6 sometimes holds a joining member's client
	// port for 7 s, see docs/benchmarks.md): the scenarios made of joins run several times.
	runs := 3
	if n, err := strconv.Atoi(os.Getenv("BENCH_REPEAT")); err == nil && n > 0 {
		runs = n
	}
	// BENCH_ONLY=rollout measures only the operator's rollouts, and writes no docs.
	if os.Getenv("BENCH_ONLY") == "rollout" {
		fmt.Println(rolloutReport(b.rollouts(runs)))
		return
	}
	var results []benchResult
	if os.Getenv("BENCH_ONLY") == "" {
		results = append(results, b.freshBootstrap())
	}
	// BENCH_OPERATOR_ARGS adds flags to the operator's (--zap-log-level=5 logs each
	// reconcile's start and end).
	b.op = framework.StartOperator(t, opNS, strings.Fields(os.Getenv("BENCH_OPERATOR_ARGS"))...)
	// BENCH_ONLY=day2 measures only the upgrade and the defragmentation, each against a
	// naive rollout, and writes no docs.
	if os.Getenv("BENCH_ONLY") == "day2" {
		fmt.Println(naiveReport([]benchResult{b.upgrade(), b.defrag()}))
		return
	}
	// BENCH_ONLY=quorumloss measures only the recoveries from quorum loss (two members'
	// volumes wiped, then all three), writes their plots and prints their sections of the
	// docs (the table's rows, each run's steps), without writing docs/benchmarks.md.
	if os.Getenv("BENCH_ONLY") == "quorumloss" {
		results := b.quorumLosses(runs)
		fmt.Println(table(results))
		fmt.Println(plots(t, results))
		fmt.Println(laterSteps(results))
		return
	}
	// BENCH_ONLY=tlschange measures only TLS switched on for a running cluster and the
	// rotation of a cluster's CA, each against the naive way, writes their plots and prints
	// their sections of the docs, without writing docs/benchmarks.md.
	if os.Getenv("BENCH_ONLY") == "tlschange" {
		results := b.tlsChanges(runs)
		fmt.Println(table(results) + tlsChangesIntro)
		fmt.Println(plots(t, results))
		fmt.Println(laterSteps(results))
		return
	}
	var fl *floor // the floor's three members, for the scenarios that follow
	// BENCH_ONLY=scale measures only the scaling 3 -> 5 and back, and writes no docs.
	if os.Getenv("BENCH_ONLY") == "scale" {
		_, fl := b.bootstrap("demo", 3)
		fmt.Println(table(b.scaling(fl, runs, "")))
		return
	}
	// BENCH_ONLY=tls measures only the bootstrap of 3 and the scaling 3 -> 5 and back, plain
	// and with TLS, and the write latency of both, and writes no docs.
	if os.Getenv("BENCH_ONLY") == "tls" {
		results, lat := b.tlsScenarios(runs)
		fmt.Println(table(results) + tlsReport(results, &lat))
		var secure []benchResult // the plain runs' plots stay those of the last full run
		for _, r := range results {
			if strings.HasSuffix(r.Name, tlsSuffix) {
				secure = append(secure, r)
			}
		}
		fmt.Println(plots(t, secure))
		fmt.Println(laterSteps(secure))
		return
	}
	var tlsFl *floor // the floor's three members of the cluster with TLS
	for i := 1; i <= runs; i++ {
		five, _ := b.bootstrap("five", 5)
		b.deleteCluster("five")
		var three, secure benchResult
		secure, tlsFl = b.bootstrapTLS(tlsName(i), 3)
		if i < runs {
			b.deleteCluster(tlsName(i))
			b.deleteTLS(tlsName(i))
		}
		three, fl = b.bootstrap("demo", 3)
		if i < runs {
			b.deleteCluster("demo")
		}
		three.Run, three.Of, five.Run, five.Of, secure.Run, secure.Of = i, runs, i, runs, i, runs
		results = append(results, three, secure, five)
	}

	results = append(results, b.scaling(fl, runs, "")...)
	results = append(results, b.scaling(tlsFl, runs, tlsSuffix)...)
	lat := b.latency("demo", tlsFl.c.Name)
	b.deleteCluster(tlsFl.c.Name) // the scenarios that follow use demo alone
	b.deleteTLS(tlsFl.c.Name)

	results = append(results, b.podDeleted(fl, "demo-1"))
	results = append(results, b.run("member replaced after data loss", "demo", 3, "3.6.16", func() {
		b.loseData(opNS, "demo-1")
	}, func() {
		b.loseData(floorNS, "demo-1")
		fl.through("demo-0", func(ctx context.Context, cli *clientv3.Client) error {
			_, err := cli.MemberRemove(ctx, fl.members["demo-1"])
			return err
		})
		delete(fl.members, "demo-1")
		require.NoError(t, client.IgnoreNotFound(framework.Env.Client.Delete(context.Background(), resources.MemberPVC(fl.c, "demo-1"))))
		fl.join("demo-0", fl.fresh(), "3.6.16")
	}, func(ns string) bool { return !b.podSeen(ns, "demo-1") }))
	results = append(results, b.quorumLosses(runs)...)

	results = append(results, b.upgrade(), b.defrag())
	results = append(results, b.tlsChanges(runs)...)
	results = append(results, b.restart(10))
	b.clear(opNS, floorNS, b.restartNS) // the other scenarios' clusters go first
	rollouts := b.rollouts(runs)
	report(t, results, &lat, b.scale(benchClusters()), rollouts)
}

// tlsScenarios measures the bootstrap of 3 members and the scaling 3 -> 5 and back, each
// plain and with TLS, runs times, and then the write latency of both clusters.
func (b *bench) tlsScenarios(runs int) ([]benchResult, latencyResult) {
	var results []benchResult
	var fl, tlsFl *floor
	for i := 1; i <= runs; i++ {
		var three, secure benchResult
		secure, tlsFl = b.bootstrapTLS(tlsName(i), 3)
		three, fl = b.bootstrap("demo", 3)
		if i < runs {
			b.deleteCluster(tlsName(i))
			b.deleteTLS(tlsName(i))
			b.deleteCluster("demo")
		}
		three.Run, three.Of, secure.Run, secure.Of = i, runs, i, runs
		results = append(results, three, secure)
	}
	results = append(results, b.scaling(fl, runs, "")...)
	results = append(results, b.scaling(tlsFl, runs, tlsSuffix)...)
	return results, b.latency("demo", tlsFl.c.Name)
}

// tlsName names the cluster with TLS of the i-th run: each run's is new, so that no
// member's DNS name still resolves to a Pod of the run before when its peers check its
// certificate against its address.
func tlsName(i int) string { return fmt.Sprintf("tls%d", i) }

// benchClusters is how many clusters one operator runs at once: BENCH_CLUSTERS, 50 by
// default.
func benchClusters() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_CLUSTERS")); err == nil {
		return n
	}
	return 50
}

// bootstrap measures creating a cluster of n members, and returns the floor's for the
// scenarios that follow.
func (b *bench) bootstrap(name string, n int32) (benchResult, *floor) {
	return b.bootstrapOf(framework.NewCluster(b.opNS, name, n), "")
}

// bootstrapTLS measures creating a cluster of n members with client and peer TLS from its
// own CA; the floor issues the same Secrets first, through the same code.
func (b *bench) bootstrapTLS(name string, n int32) (benchResult, *floor) {
	markTLS(b.opNS, name)
	return b.bootstrapOf(withTLS(framework.NewCluster(b.opNS, name, n)), tlsSuffix)
}

func (b *bench) bootstrapOf(c *v1alpha1.EtcdCluster, suffix string) (benchResult, *floor) {
	name, n := c.Name, c.Spec.Replicas
	fl := newFloor(b.t, b.floorNS, c)
	r := b.run(fmt.Sprintf("bootstrap %d%s", n, suffix), name, int(n), "3.6.16", func() {
		require.NoError(b.t, framework.Env.Client.Create(context.Background(), c))
	}, func() { fl.bootstrap(int(n), "3.6.16") }, nil)
	return r, fl
}

// freshBootstrap measures creating a cluster of 3 the moment its operator starts (as
// deployed, with leader election), as after an install or with a rollout under way.
func (b *bench) freshBootstrap() benchResult {
	c := framework.NewCluster(b.opNS, "fresh", 3)
	fl := newFloor(b.t, b.floorNS, c)
	var op *benchOperator
	r := b.run("bootstrap 3, operator started with it", "fresh", 3, "3.6.16", func() {
		op = b.managerWith(b.opNS, "0")
		require.NoError(b.t, framework.Env.Client.Create(context.Background(), c))
	}, func() { fl.bootstrap(3, "3.6.16") }, nil)
	b.deleteCluster("fresh")
	op.stop()
	return r
}

// podDeleted measures a member's Pod deleted (its claim kept) until the member is back;
// the floor waits for the old Pod to go and creates it again.
func (b *bench) podDeleted(fl *floor, member string) benchResult {
	old := map[string]types.UID{}
	for _, ns := range []string{b.opNS, b.floorNS} {
		var p corev1.Pod
		require.NoError(b.t, framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: member}, &p))
		old[ns] = p.UID
	}
	del := func(ns string) {
		require.NoError(b.t, framework.Env.Client.Delete(context.Background(), &corev1.Pod{ObjectMeta: framework.MetaName(ns, member)}))
	}
	return b.run("a member's Pod deleted", fl.c.Name, 3, "3.6.16", func() { del(b.opNS) }, func() {
		del(b.floorNS)
		require.Eventually(b.t, func() bool { return !b.podExists(b.floorNS, member) }, time.Minute, floorPoll)
		fl.start(member, "3.6.16", false, true)
	}, func(ns string) bool {
		var p corev1.Pod
		return framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: member}, &p) == nil && p.UID != old[ns]
	})
}

// restart measures an operator restarted (as a rollout does: the old one stops and releases
// its lease, a new one starts and is elected) while one member Pod of each of n clusters is
// gone, until every cluster is whole again; the floor re-creates the same Pods itself.
func (b *bench) restart(n int) benchResult {
	t := b.t
	name := fmt.Sprintf("operator restart, %d clusters with a member Pod gone", n)
	t.Logf("bench: %s", name)
	ns := framework.Namespace(t)
	b.restartNS = ns
	stop := b.manager(ns)
	var clusters []*v1alpha1.EtcdCluster
	for i := range n {
		c := framework.NewCluster(ns, fmt.Sprintf("r%d", i), 3)
		require.NoError(t, framework.Env.Client.Create(context.Background(), c))
		clusters = append(clusters, c)
	}
	for _, c := range clusters {
		framework.WaitReady(t, ns, c.Name)
	}
	allSettled := func() bool {
		for _, c := range clusters {
			if !b.settled(ns, c.Name, 3, c.Spec.Version) {
				return false
			}
		}
		return true
	}
	loseOne := func() {
		for _, c := range clusters {
			require.NoError(t, framework.Env.Client.Delete(context.Background(), &corev1.Pod{ObjectMeta: framework.MetaName(ns, c.Name+"-1")}))
		}
		for _, c := range clusters {
			require.Eventually(t, func() bool { return !b.podExists(ns, c.Name+"-1") }, time.Minute, 20*time.Millisecond)
		}
	}
	r := benchResult{Name: name}
	stop()
	loseOne()
	pods := watchPods(t, ns)
	r.Start = time.Now()
	op := b.managerWith(ns, "0")
	r.Operator = b.until(r.Start, allSettled)
	t.Logf("bench: %s, operator's Pods: %s; the operator used %d ms of CPU", name, pods.stop(r.Start), cpuTicks(t, op.pid())*10)
	op.stop()
	loseOne()
	pods = watchPods(t, ns)
	start := time.Now()
	for _, c := range clusters {
		fl := &floor{t: t, c: c, members: map[string]uint64{}}
		for _, m := range framework.Get(t, ns, c.Name).Status.Members {
			fl.members[m.Name] = framework.ParseID(t, m.ID)
		}
		fl.start(c.Name+"-1", c.Spec.Version, false, true)
	}
	r.Floor = b.until(start, allSettled)
	t.Logf("bench: %s, floor's Pods: %s", name, pods.stop(start))
	t.Logf("bench: %s: operator %v, floor %v", name, r.Operator.Round(time.Millisecond), r.Floor.Round(time.Millisecond))
	return r
}

// clear deletes namespaces and waits until none of their Pods runs.
func (b *bench) clear(namespaces ...string) {
	for _, ns := range namespaces {
		require.NoError(b.t, client.IgnoreNotFound(framework.Env.Client.Delete(context.Background(), &corev1.Namespace{ObjectMeta: framework.MetaName("", ns)})))
	}
	for _, ns := range namespaces {
		b.noPods(5*time.Minute, "the Pods of "+ns, client.InNamespace(ns))
	}
}

// noPods waits until no Pod matches.
func (b *bench) noPods(within time.Duration, what string, opts ...client.ListOption) {
	require.Eventually(b.t, func() bool {
		var pods corev1.PodList
		return framework.Env.Client.List(context.Background(), &pods, opts...) == nil && len(pods.Items) == 0
	}, within, 200*time.Millisecond, "%s go", what)
}

// manager runs an operator for ns with leader election, as deployed, and returns a stop
// that ends it as a rollout does (SIGTERM: it releases its lease and exits).
func (b *bench) manager(ns string) (stop func()) {
	return b.managerWith(ns, "0").stop
}

// benchOperator is an operator process that is started again when it exits on its own
// (its leader lease lost while the machine is overloaded), as its Deployment would.
type benchOperator struct {
	mu       sync.Mutex
	cmd      *exec.Cmd
	stopped  bool
	restarts int
	done     chan struct{}
}

// managerWith is manager with the operator's metrics served at metricsAddr ("0": none)
// and extra flags.
func (b *bench) managerWith(ns, metricsAddr string, extra ...string) *benchOperator {
	log, err := os.OpenFile(filepath.Join(framework.Env.Root, ".stack", "logs", "operator-"+ns+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(b.t, err)
	start := func() (*exec.Cmd, error) {
		args := append([]string{"--namespaces=" + ns, "--operator-image=" + framework.OperatorImage, "--metrics-bind-address=" + metricsAddr,
			"--health-probe-bind-address=0", "--leader-elect", "--leader-election-namespace=" + ns}, extra...)
		cmd := exec.Command(framework.Env.Manager, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+framework.Env.Stack.Kubeconfig())
		cmd.Stdout, cmd.Stderr = log, log
		return cmd, cmd.Start()
	}
	cmd, err := start()
	require.NoError(b.t, err)
	op := &benchOperator{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(op.done)
		for {
			err := cmd.Wait()
			op.mu.Lock()
			if op.stopped {
				op.mu.Unlock()
				return
			}
			b.t.Logf("bench: the operator exited (%v): started again", err)
			op.restarts++
			if cmd, err = start(); err != nil {
				op.mu.Unlock()
				b.t.Errorf("bench: the operator could not start again: %v", err)
				return
			}
			op.cmd = cmd
			op.mu.Unlock()
		}
	}()
	b.t.Cleanup(op.stop)
	return op
}

func (o *benchOperator) pid() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cmd.Process.Pid
}

func (o *benchOperator) stop() {
	o.mu.Lock()
	if o.stopped {
		o.mu.Unlock()
		return
	}
	o.stopped = true
	_ = o.cmd.Process.Signal(syscall.SIGTERM)
	o.mu.Unlock()
	<-o.done
}

type bench struct {
	restartNS     string
	t             *testing.T
	opNS, floorNS string
	op            *framework.Operator // the operator of opNS
	kube          cache.Cache         // what the bench's own looks read (watchCache)
}

// run measures one scenario: change starts it for the operator, byFloor (if not nil) does
// it with no operator; each ends when settled sees the cluster as the scenario wants it.
func (b *bench) run(name, cluster string, replicas int, version string, change, byFloor func(), extra func(ns string) bool) benchResult {
	t := b.t
	t.Logf("bench: %s", name)
	r := benchResult{Name: name}
	done := func(ns string) func() bool {
		return func() bool { return b.settled(ns, cluster, replicas, version) && (extra == nil || extra(ns)) }
	}
	// Both runs start more than 5 s after their cluster's last membership change: etcd
	// refuses a new one until its leader has been connected to every voter that long.
	var p *probe
	if len(framework.Endpoints(t, b.opNS, cluster)) > 0 {
		idle := startProbe(t, b.opNS, cluster)
		time.Sleep(6 * time.Second)
		r.Idle = statsOf(idle.stop())
		p = startProbe(t, b.opNS, cluster)
	}
	s := startSampler(t, b.kube, b.opNS, cluster)
	opBefore, floorBefore := framework.PodUIDs(t, b.opNS, cluster), framework.PodUIDs(t, b.floorNS, cluster)
	cpu := machineCPU(t) // before the clock starts: it reads every process's times
	r.Start = time.Now()
	change()
	r.Operator = b.until(r.Start, done(b.opNS))
	opBusy := cpu.busySince(t)
	framework.WaitReady(t, b.opNS, cluster)
	time.Sleep(time.Second) // the sampler reads the last status
	s.stop()
	r.Steps, r.Notes = s.timings(), s.notes
	for _, st := range r.Steps {
		t.Logf("bench: %s: %s %s: ready %s, started %s, applied %s, visible %s, finished %s", name, st.Action, st.Member,
			span(r.Start, st.Ready), span(r.Start, st.Started), span(r.Start, st.Applied), span(r.Start, st.Visible), span(r.Start, st.Finished))
	}
	r.Publishes = b.publishWaits(b.opNS, cluster, opBefore)
	if p != nil {
		r.Samples = p.stop()
		r.During = statsOf(r.Samples)
	}
	floorBusy := "-"
	if byFloor != nil { // the floor works under the same client load
		r.Floor, r.FloorWrites, floorBusy = b.probed(b.floorNS, cluster, byFloor, done(b.floorNS))
		r.FloorPublishes = b.publishWaits(b.floorNS, cluster, floorBefore)
	}
	t.Logf("bench: %s: the machine's CPUs were busy %s of the time during the operator's run, %s during the floor's", name, opBusy, floorBusy)
	t.Logf("bench: %s: operator %v, floor %v; publish waits %d (%d)", name, r.Operator.Round(time.Millisecond), r.Floor.Round(time.Millisecond),
		r.Publishes, r.FloorPublishes)
	return r
}

// probed runs do on a cluster of ns under the probe (unless it has no member yet) and
// returns how long until done held, and what the probe saw. It starts 6 s after the
// cluster's last membership change, as run says.
func (b *bench) probed(ns, cluster string, do func(), done func() bool) (time.Duration, writeStats, string) {
	var p *probe
	if len(framework.Endpoints(b.t, ns, cluster)) > 0 {
		time.Sleep(6 * time.Second)
		p = startProbe(b.t, ns, cluster)
	}
	cpu := machineCPU(b.t)
	start := time.Now()
	do()
	d := b.until(start, done)
	busy := cpu.busySince(b.t)
	if p == nil {
		return d, writeStats{}, busy
	}
	return d, statsOf(p.stop()), busy
}

// cpuTimes are the machine's CPU times (/proc/stat), in clock ticks: all, and idle; each
// process's; and the API server's request counts.
type cpuTimes struct {
	all, idle int64
	procs     map[int]procTime
	api       map[string]float64
}

// procTime is one process's CPU time, in clock ticks, and a name to tell it by.
type procTime struct {
	name  string
	ticks int64
}

func machineCPU(t require.TestingT) cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	require.NoError(t, err)
	line, _, _ := strings.Cut(string(b), "\n")
	ct := cpuTimes{procs: map[int]procTime{}}
	for i, f := range strings.Fields(line)[1:] {
		v, _ := strconv.ParseInt(f, 10, 64)
		ct.all += v
		if i == 3 || i == 4 { // idle, iowait
			ct.idle += v
		}
	}
	ct.api = apiRequests(t)
	dirs, _ := os.ReadDir("/proc")
	for _, d := range dirs {
		if pid, err := strconv.Atoi(d.Name()); err == nil {
			if pt, ok := readProc(pid); ok {
				ct.procs[pid] = pt
			}
		}
	}
	return ct
}

// readProc reads a process's CPU time; an etcd is named with its --name, to tell members apart.
func readProc(pid int) (procTime, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procTime{}, false
	}
	open, end := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
	if open < 0 || end < open {
		return procTime{}, false
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 13 {
		return procTime{}, false
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	pt := procTime{name: string(b[open+1 : end]), ticks: utime + stime}
	if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil && pt.name == "etcd" {
		args := strings.Split(string(cmd), "\x00")
		for i, a := range args { // the member's advertised client URL names its namespace too
			for _, flag := range []string{"--name", "--advertise-client-urls"} {
				if v, ok := strings.CutPrefix(a, flag+"="); ok {
					pt.name += " " + v
				} else if a == flag && i+1 < len(args) {
					pt.name += " " + args[i+1]
				}
			}
		}
	}
	return pt, true
}

// busySince is the share of CPU time the machine was busy since ct, as a percentage, and
// the processes that used the most of it (those that ended meanwhile are not counted).
func (ct cpuTimes) busySince(t require.TestingT) string {
	now := machineCPU(t)
	all := now.all - ct.all
	if all <= 0 {
		return "-"
	}
	used := map[string]int64{}
	for pid, pt := range now.procs {
		used[pt.name] += pt.ticks - ct.procs[pid].ticks // a process started meanwhile counts whole
	}
	names := slices.Collect(maps.Keys(used))
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(used[b], used[a]) })
	var top []string
	for _, n := range names[:min(8, len(names))] {
		top = append(top, fmt.Sprintf("%s %d ms", n, used[n]*10))
	}
	var reqs []string
	for _, k := range topKeys(now.api, ct.api, 6) {
		reqs = append(reqs, fmt.Sprintf("%s %.0f", k, now.api[k]-ct.api[k]))
	}
	return fmt.Sprintf("%d%% (%s; API requests: %s)", 100*(all-(now.idle-ct.idle))/all, strings.Join(top, ", "), strings.Join(reqs, ", "))
}

// apiRequests counts the API server's requests by verb and resource.
func apiRequests(t require.TestingT) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(apiMetrics(t), "\n") {
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		label := func(l string) string {
			_, v, _ := strings.Cut(line, l+`="`)
			v, _, _ = strings.Cut(v, `"`)
			return v
		}
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			v, _ := strconv.ParseFloat(line[i+1:], 64)
			out[label("verb")+" "+label("resource")+"/"+label("subresource")] += v
		}
	}
	return out
}

// topKeys are the n keys whose values grew most from before to now.
func topKeys(now, before map[string]float64, n int) []string {
	keys := slices.Collect(maps.Keys(now))
	slices.SortFunc(keys, func(a, b string) int { return cmp.Compare(now[b]-before[b], now[a]-before[a]) })
	return keys[:min(n, len(keys))]
}

// until polls cond and returns how long after start it first held.
func (b *bench) until(start time.Time, cond func() bool) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var at time.Time
	require.NoError(b.t, wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) {
		at = time.Now()
		return cond(), nil
	}))
	return at.Sub(start)
}

// settled: as many member Pods as replicas, all ready at version, as many claims, and etcd
// lists that many voters, each answering with a leader. The same test ends the operator's
// run and the floor's.
func (b *bench) settled(ns, cluster string, replicas int, version string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	sel := client.MatchingLabels{v1alpha1.LabelCluster: cluster}
	var pods corev1.PodList
	var pvcs corev1.PersistentVolumeClaimList
	if b.kube.List(ctx, &pods, client.InNamespace(ns), sel) != nil || b.kube.List(ctx, &pvcs, client.InNamespace(ns), sel) != nil {
		return false
	}
	// A retained claim (a survivor's, kept in a recovery) is no longer the cluster's.
	claims := slices.DeleteFunc(pvcs.Items, func(c corev1.PersistentVolumeClaim) bool { return c.Labels[v1alpha1.LabelRetained] != "" })
	if len(pods.Items) != replicas || len(claims) != replicas {
		return false
	}
	var eps []string
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil || !framework.PodReady(&p) || p.Annotations[vocab.AnnotationVersion] != version {
			return false
		}
		eps = append(eps, observe.ClientURL(&p))
	}
	cli, err := clientv3.New(etcdConfig(ns, cluster, eps[:1]))
	if err != nil {
		return false
	}
	defer cli.Close() // polled every 20 ms: not left to the test's end
	list, err := cli.MemberList(ctx)
	if err != nil || len(list.Members) != replicas {
		return false
	}
	for _, m := range list.Members {
		if m.IsLearner {
			return false
		}
	}
	for _, ep := range eps {
		if st, err := cli.Status(ctx, ep); err != nil || st.Leader == 0 {
			return false
		}
	}
	return true
}

func (b *bench) podExists(ns, name string) bool {
	return framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{}) == nil
}

// podSeen: the bench's cache holds the Pod (a look of settled's, not the floor's own).
func (b *bench) podSeen(ns, name string) bool {
	return b.kube.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{}) == nil
}

// publishWaits counts the times etcd, in the cluster's member Pods not in before, waited
// its request timeout (7 s) to publish a member: a joining member sent a snapshot that
// already holds its own publish request never sees that request applied, and publishes
// again only after the timeout, serving no client until then.
func (b *bench) publishWaits(ns, cluster string, before map[types.UID]bool) int {
	n := 0
	for _, p := range framework.MemberPods(b.t, ns, cluster) {
		if before[p.UID] {
			continue
		}
		log, err := framework.Env.Stack.ContainerLog(context.Background(), ns, p.Name, "etcd")
		require.NoError(b.t, err)
		n += strings.Count(log, "failed to publish local member to cluster through raft")
	}
	return n
}

// loseData wipes a member's volume and deletes its Pod: its disk was replaced.
func (b *bench) loseData(ns, member string) {
	require.NoError(b.t, framework.Env.Stack.WipePVC(context.Background(), ns, member))
	require.NoError(b.t, client.IgnoreNotFound(framework.Env.Client.Delete(context.Background(), &corev1.Pod{ObjectMeta: framework.MetaName(ns, member)})))
}

// newest is the member of the operator's cluster with the highest ordinal.
func (b *bench) newest(cluster string) string {
	newest := ""
	for _, m := range framework.Get(b.t, b.opNS, cluster).Status.Members {
		if newest == "" || vocab.Ordinal(cluster, m.Name) > vocab.Ordinal(cluster, newest) {
			newest = m.Name
		}
	}
	return newest
}

// deleteCluster deletes a cluster of the operator's and the floor's Pods and claims of the
// same name, and waits until their Pods and claims are gone.
func (b *bench) deleteCluster(name string) {
	ctx := context.Background()
	require.NoError(b.t, framework.Env.Client.Delete(ctx, &v1alpha1.EtcdCluster{ObjectMeta: framework.MetaName(b.opNS, name)}))
	sel := client.MatchingLabels{v1alpha1.LabelCluster: name}
	for _, ns := range []string{b.opNS, b.floorNS} {
		require.NoError(b.t, framework.Env.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), sel))
		require.NoError(b.t, framework.Env.Client.DeleteAllOf(ctx, &corev1.PersistentVolumeClaim{}, client.InNamespace(ns), sel))
		b.noPods(2*time.Minute, "the Pods of "+ns+"/"+name, client.InNamespace(ns), sel)
		require.Eventually(b.t, func() bool {
			var pvcs corev1.PersistentVolumeClaimList
			return framework.Env.Client.List(ctx, &pvcs, client.InNamespace(ns), sel) == nil && len(pvcs.Items) == 0
		}, time.Minute, 200*time.Millisecond, "the claims of %s/%s go", ns, name)
	}
}

// operatorLeader makes member lead the operator's cluster.
func (b *bench) operatorLeader(cluster, member string) {
	for _, m := range framework.Get(b.t, b.opNS, cluster).Status.Members {
		if m.Name == member {
			moveLeader(b.t, b.opNS, cluster, framework.ParseID(b.t, m.ID))
		}
	}
}

// leader is the member the floor's cluster is led by.
func (f *floor) leader() string {
	for name := range f.members {
		cli := f.client(name)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := cli.Status(ctx, cli.Endpoints()[0])
		cancel()
		_ = cli.Close()
		if err == nil && st.Leader == st.Header.MemberId {
			return name
		}
	}
	f.t.Fatal("the floor's cluster has no leader")
	return ""
}

// report prints the table and writes docs/benchmarks.md with a plot per scenario.
func report(t *testing.T, results []benchResult, lat *latencyResult, sr scaleResult, rollouts []rolloutResult) {
	figures := table(results) + tlsReport(results, lat) + scaleReport(sr) + rolloutReport(rollouts)
	fmt.Println(figures)
	root := framework.Env.Root
	doc := fmt.Sprintf(benchDoc, machine(), time.Now().UTC().Format("2006-01-02 15:04 MST"), gitCommit(root), figures, plots(t, results))
	require.NoError(t, os.WriteFile(filepath.Join(root, "docs", "benchmarks.md"), []byte(doc), 0o644))
}

// plots writes the plot of each scenario's first run to docs/benchmarks/ and returns the
// docs' section on each: its plot and its steps.
func plots(t *testing.T, results []benchResult) string {
	dir := filepath.Join(framework.Env.Root, "docs", "benchmarks")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	var steps strings.Builder
	for _, r := range results {
		if r.Run > 1 {
			continue // the first run's steps stand for the others'
		}
		file := strings.NewReplacer(" ", "-", ">", "", ",", "", ".", "").Replace(strings.ToLower(r.Name)) + ".svg"
		require.NoError(t, plotScenario(filepath.Join(dir, file), r))
		fmt.Fprintf(&steps, "\n### %s\n\n![%s](benchmarks/%s)\n\n%s", r.Name, r.Name, file, stepTable(r))
	}
	return steps.String()
}

// stepTable is a scenario's steps: how long each waited for its precondition, how long
// the operator took to apply it once it could, how long its effect took to show, and how
// long the operator took to see it.
func stepTable(r benchResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| step | precondition | waited for it | reaction | effect after | noticed |\n|---|---|---|---|---|---|\n")
	for _, st := range r.Steps {
		fmt.Fprintf(&b, "| %s %s | %s | %s | %s | %s | %s |\n", st.Action, st.Member, st.Precondition,
			span(st.Started, st.Applied), opt(st.Reaction()), span(st.Applied, st.Finished), opt(st.Noticed()))
	}
	return b.String()
}

// laterSteps is the step table of each run after a scenario's first, titled.
func laterSteps(results []benchResult) string {
	var b strings.Builder
	for _, r := range results {
		if r.Run > 1 {
			fmt.Fprintf(&b, "\n### %s\n\n%s", r.title(), stepTable(r))
		}
	}
	return b.String()
}

// table is the scenarios' figures, their medians and the naive rollouts beside them.
func table(results []benchResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| scenario | operator | floor | ratio | publish waits (floor) | steps | reaction p50 / max | noticed p50 / max | waiting on Pods / etcd | writes failed (floor) | write p99 idle -> during (floor) | write max (floor) |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		react, seen := durations(r.Steps, stepTiming.Reaction), durations(r.Steps, stepTiming.Noticed)
		pods, etcdWait := waits(r.Steps)
		writes, p99, mx := "-", "-", "-"
		if r.During.Writes > 0 {
			writes = fmt.Sprintf("%d of %d", r.During.Failed, r.During.Writes)
			p99 = fmt.Sprintf("%s -> %s", ms(r.Idle.P99), ms(r.During.P99))
			mx = ms(r.During.Max)
		}
		if r.FloorWrites.Writes > 0 {
			writes += fmt.Sprintf(" (%d of %d)", r.FloorWrites.Failed, r.FloorWrites.Writes)
			p99 += fmt.Sprintf(" (%s)", ms(r.FloorWrites.P99))
			mx += fmt.Sprintf(" (%s)", ms(r.FloorWrites.Max))
		}
		fl, rt := vsFloor(r.Operator, r.Floor)
		fmt.Fprintf(&b, "| %s | %.2f s | %s | %s | %d (%d) | %d (%d timed) | %s / %s | %s / %s | %.1f s / %.1f s | %s | %s | %s |\n",
			r.title(), r.Operator.Seconds(), fl, rt, r.Publishes, r.FloorPublishes, len(r.Steps), len(react),
			qms(react, 0.5), qms(react, 1), qms(seen, 0.5), qms(seen, 1), pods.Seconds(), etcdWait.Seconds(), writes, p99, mx)
	}
	b.WriteString(medians(results))
	b.WriteString(quorumReport(results))
	b.WriteString(naiveReport(results))
	return b.String()
}

// vsFloor is the floor's time and the ratio of the operator's to it; "-" for a scenario
// the floor does not run.
func vsFloor(op, fl time.Duration) (floor, ratio string) {
	if fl == 0 {
		return "-", "-"
	}
	return fmt.Sprintf("%.2f s", fl.Seconds()), fmt.Sprintf("%.2f", op.Seconds()/fl.Seconds())
}

func (r benchResult) title() string {
	if r.Of > 1 {
		return fmt.Sprintf("%s (run %d of %d)", r.Name, r.Run, r.Of)
	}
	return r.Name
}

// medians is the table of the scenarios run more than once: the median operator and floor
// times and their ratio.
func medians(results []benchResult) string {
	var b strings.Builder
	var names []string
	op, fl := map[string][]time.Duration{}, map[string][]time.Duration{}
	for _, r := range results {
		if r.Of > 1 {
			if _, ok := op[r.Name]; !ok {
				names = append(names, r.Name)
			}
			op[r.Name], fl[r.Name] = append(op[r.Name], r.Operator), append(fl[r.Name], r.Floor)
		}
	}
	if len(names) == 0 {
		return ""
	}
	fmt.Fprintf(&b, "\n| scenario, median of its runs | operator | floor | ratio |\n|---|---|---|---|\n")
	for _, n := range names {
		slices.Sort(op[n])
		slices.Sort(fl[n])
		o := quantile(op[n], 0.5)
		f, rt := vsFloor(o, quantile(fl[n], 0.5))
		fmt.Fprintf(&b, "| %s (%d runs) | %.2f s | %s | %s |\n", n, len(op[n]), o.Seconds(), f, rt)
	}
	return b.String()
}

func durations(steps []stepTiming, f func(stepTiming) (time.Duration, bool)) []time.Duration {
	var out []time.Duration
	for _, st := range steps {
		if d, ok := f(st); ok {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// qms is the q-quantile of sorted durations, "-" for none.
func qms(d []time.Duration, q float64) string {
	if len(d) == 0 {
		return "-"
	}
	return ms(quantile(d, q))
}

func opt(d time.Duration, ok bool) string {
	if !ok {
		return "-"
	}
	return ms(d)
}

// waits splits the time steps waited (on preconditions, then on effects) between member
// Pods starting or going and etcd itself.
func waits(steps []stepTiming) (pods, etcdWait time.Duration) {
	for _, st := range steps {
		pre, eff := nonNeg(st.Applied.Sub(st.Started)), nonNeg(st.Finished.Sub(st.Applied))
		if st.Applied.IsZero() {
			pre, eff = nonNeg(st.Finished.Sub(st.Started)), 0
		}
		switch plan.PreconditionKind(st.Precondition) {
		case plan.PreMemberHealthy, plan.PreClusterHealthy, plan.PreQuorumHealthy:
			pods += pre
		default:
			etcdWait += pre
		}
		switch plan.Action(st.Action) {
		case plan.CreateSeed, plan.StartMember, plan.StopMember, plan.DeleteMember, plan.UpgradeMember, plan.RestartMember,
			plan.ForceNewCluster, plan.RestoreFromBackup: // a member's Pod replaced, or a seed's made (and restored)
			pods += eff
		default:
			etcdWait += eff
		}
	}
	return pods, etcdWait
}

func nonNeg(d time.Duration) time.Duration {
	if d < 0 || d > time.Hour { // an unset end
		return 0
	}
	return d
}

func span(from, to time.Time) string {
	if from.IsZero() || to.IsZero() {
		return "-"
	}
	return ms(to.Sub(from))
}

func ms(d time.Duration) string {
	if d < 10*time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.1f s", d.Seconds())
}

// podTimes records when the API server's watch first showed each Pod of a namespace, and
// when it first showed it ready.
type podTimes struct {
	mu             sync.Mutex
	created, ready map[string]time.Time
	cancel         context.CancelFunc
	done           chan struct{}
}

func watchPods(t *testing.T, ns string) *podTimes {
	ctx, cancel := context.WithCancel(context.Background())
	pods := kubernetes.NewForConfigOrDie(framework.Env.Stack.RESTConfig()).CoreV1().Pods(ns)
	list, err := pods.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion}) // new Pods only
	require.NoError(t, err)
	pt := &podTimes{created: map[string]time.Time{}, ready: map[string]time.Time{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(pt.done)
		defer w.Stop()
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || p.DeletionTimestamp != nil {
				continue
			}
			pt.mu.Lock()
			if _, seen := pt.created[p.Name]; !seen {
				pt.created[p.Name] = time.Now()
			}
			if _, seen := pt.ready[p.Name]; !seen && framework.PodReady(p) {
				pt.ready[p.Name] = time.Now()
			}
			pt.mu.Unlock()
		}
	}()
	return pt
}

// stop ends the watch and says when the Pods came after start (first, median, last) and
// how long each took to be ready after it came.
func (pt *podTimes) stop(start time.Time) string {
	pt.cancel()
	<-pt.done
	var came, readyAfter []time.Duration
	for name, at := range pt.created {
		came = append(came, at.Sub(start))
		if r, ok := pt.ready[name]; ok {
			readyAfter = append(readyAfter, r.Sub(at))
		}
	}
	spread := func(ds []time.Duration) string {
		if len(ds) == 0 {
			return "-"
		}
		slices.Sort(ds)
		return fmt.Sprintf("%v / %v / %v", ds[0].Round(time.Millisecond), ds[len(ds)/2].Round(time.Millisecond), ds[len(ds)-1].Round(time.Millisecond))
	}
	return fmt.Sprintf("%d came after %s (first / median / last), ready %s after they came", len(came), spread(came), spread(readyAfter))
}

// scaling scales the cluster of fl (of three members) to five and back, runs times; the
// member scale-down removes leads when it starts. The scenarios' names end in suffix.
func (b *bench) scaling(fl *floor, runs int, suffix string) []benchResult {
	t, opNS, name := b.t, b.opNS, fl.c.Name
	var results []benchResult
	for i := 1; i <= runs; i++ {
		var third, fourth string // the floor's new members, named as the operator names its
		up := b.run("scale 3 -> 5"+suffix, name, 5, "3.6.16", func() {
			framework.Update(t, opNS, name, func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 5 })
		}, func() {
			third = fl.fresh()
			fl.join(fl.name(0), third, "3.6.16")
			fourth = fl.fresh()
			fl.join(fl.name(0), fourth, "3.6.16")
		}, nil)
		b.operatorLeader(name, b.newest(name))
		fl.lead(fourth)
		down := b.run("scale 5 -> 3, the leader removed"+suffix, name, 3, "3.6.16", func() {
			framework.Update(t, opNS, name, func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 3 })
		}, func() {
			fl.leave(fl.name(0), fourth)
			fl.leave(fl.name(0), third)
		}, nil)
		up.Run, up.Of, down.Run, down.Of = i, runs, i, runs
		results = append(results, up, down)
	}
	return results
}
