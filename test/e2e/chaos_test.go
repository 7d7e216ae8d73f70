package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/test/framework"
)

// chaosSeeds are the seeds TestChaos runs: CHAOS_SEEDS as "N" (seeds 1 to N) or "a,b,c".
// Without it TestChaos is skipped: `make test` runs a small fixed set after the other tests,
// so chaos does not load the machine they share, and `make chaos SEEDS=N` more.
func chaosSeeds(t *testing.T) []uint64 {
	spec := os.Getenv("CHAOS_SEEDS")
	if spec == "" {
		t.Skip("CHAOS_SEEDS is not set: make test and make chaos set it")
	}
	var out []uint64
	if n, err := strconv.Atoi(spec); err == nil && !strings.Contains(spec, ",") {
		for i := 1; i <= n; i++ {
			out = append(out, uint64(i))
		}
		return out
	}
	for _, s := range strings.Split(spec, ",") {
		n, err := strconv.ParseUint(strings.TrimSpace(s), 10, 64)
		require.NoError(t, err, "CHAOS_SEEDS=%q", spec)
		out = append(out, n)
	}
	return out
}

// TestChaos runs, per seed, a random schedule of operations on a three-member cluster
// (scale up and down, a rolling configuration change, replacing a member whose volume was
// wiped) with a fault injected during each (a member or the leader killed, a member cut off
// and healed, the operator killed; with CHAOS_NODE_STOPS, a member's node stopped for 10 s),
// while clients write and read. Each run checks that the
// clients' history is linearizable (porcupine), that the cluster converges to the spec, that
// no acknowledged write is lost, and that quorum is never lost but for a fault's own effect.
// A seed's schedule is reproducible from its number; its report is in .stack/chaos.
func TestChaos(t *testing.T) {
	for _, seed := range chaosSeeds(t) {
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) {
			t.Parallel()
			runChaos(t, seed)
		})
	}
}

type chaosRun struct {
	t      *testing.T
	ns     string
	op     *framework.Operator
	rng    *rand.Rand
	start  time.Time
	mu     sync.Mutex
	events []chaosEvent
	faults []time.Time // when each fault was injected
}

type chaosEvent struct {
	At   string `json:"at"`
	What string `json:"what"`
}

func (r *chaosRun) log(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := chaosEvent{At: time.Since(r.start).Round(time.Millisecond).String(), What: fmt.Sprintf(format, args...)}
	r.events = append(r.events, e)
	r.t.Logf("%s %s", e.At, e.What)
}

func runChaos(t *testing.T, seed uint64) {
	r := &chaosRun{t: t, ns: framework.Namespace(t), rng: rand.New(rand.NewPCG(seed, 0x65746364)), start: time.Now()}
	r.op = framework.StartOperator(t, r.ns)
	framework.CreateReady(t, r.ns, 3)
	w := startWriter(t, r.ns, "demo")
	kv := startClients(t, r.ns, "demo", 3, seed)
	q := watchQuorum(t, r.ns, "demo")
	replicas := 3
	for i := 0; i < 4; i++ {
		var change func(c *v1alpha1.EtcdCluster)
		wiped := ""
		switch r.rng.IntN(4) {
		case 0:
			replicas = 8 - replicas // 3 <-> 5
			n := int32(replicas)
			r.log("scale to %d", n)
			change = func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = n }
		case 1:
			quota := int64(64+r.rng.IntN(64)) << 20
			r.log("rolling configuration change: quota %d MiB", quota>>20)
			change = func(c *v1alpha1.EtcdCluster) { c.Spec.Options.QuotaBackendBytes = &quota }
		default:
			wiped = r.replace()
		}
		if change != nil {
			framework.Update(t, r.ns, "demo", change)
		}
		time.Sleep(time.Duration(r.rng.IntN(3000)) * time.Millisecond)
		r.fault()
		// After a wipe, status may still read Ready from before: converged is when the
		// wiped member was replaced (a member that lost its data never comes back under
		// its name), else the next wipe could take a second member's data from three.
		framework.WaitFor(t, r.ns, "demo", 4*time.Minute, "converged", func(c *v1alpha1.EtcdCluster) bool {
			return framework.Ready(c) && !slices.ContainsFunc(c.Status.Members, func(m v1alpha1.MemberStatus) bool { return m.Name == wiped })
		})
		r.log("converged")
	}
	history := kv.stop()
	gaps := q.stop()
	w.stopAndVerify()
	_, err := framework.Membership(t, r.ns, "demo")
	for deadline := time.Now().Add(2 * time.Minute); err != nil && time.Now().Before(deadline); {
		time.Sleep(time.Second) // a member killed last may still be coming back
		_, err = framework.Membership(t, r.ns, "demo")
	}
	require.NoError(t, err, "the cluster matches the spec")
	r.verdict(seed, history, gaps)
}

// replace wipes the volume of a member and deletes its Pod: the member comes back without
// its data and must be replaced, never restarted under its old ID. It returns the member.
func (r *chaosRun) replace() string {
	members := r.runningMembers(false)
	m := members[r.rng.IntN(len(members))]
	r.log("wipe the volume of %s and delete its Pod", m)
	ctx := context.Background()
	require.NoError(r.t, framework.Env.Stack.WipePVC(ctx, r.ns, m))
	require.NoError(r.t, client.IgnoreNotFound(framework.Env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: framework.MetaName(r.ns, m)})))
	return m
}

// runningMembers are the members with a Pod, as status last recorded them: all of them, or
// the leader only.
func (r *chaosRun) runningMembers(leader bool) []string {
	var out []string
	for _, m := range framework.Get(r.t, r.ns, "demo").Status.Members {
		if m.Pod != "" && (m.Leader || !leader) {
			out = append(out, m.Pod)
		}
	}
	return out
}

// fault injects one fault while the operation runs.
func (r *chaosRun) fault() {
	ctx := context.Background()
	members, leader := r.runningMembers(false), r.runningMembers(true)
	kinds := 5
	if os.Getenv("CHAOS_NODE_STOPS") != "" {
		kinds = 6 // stopping a node takes a member of every cluster down: seeds run one at a time
	}
	kind := r.rng.IntN(kinds)
	if len(members) == 0 || (kind == 1 && len(leader) == 0) {
		kind = 4
	}
	r.mu.Lock()
	r.faults = append(r.faults, time.Now())
	r.mu.Unlock()
	switch kind {
	case 0:
		m := members[r.rng.IntN(len(members))]
		r.log("fault: kill member %s", m)
		r.ignore(framework.Env.Stack.KillContainer(ctx, r.ns, m, "etcd"))
	case 1:
		r.log("fault: kill the leader %s", leader[0])
		r.ignore(framework.Env.Stack.KillContainer(ctx, r.ns, leader[0], "etcd"))
	case 2:
		m := members[r.rng.IntN(len(members))]
		r.log("fault: cut %s off the network for 5s", m)
		r.ignore(framework.Env.Stack.CutPod(ctx, r.ns, m))
		time.Sleep(5 * time.Second)
		r.ignore(framework.Env.Stack.HealPod(ctx, r.ns, m))
	case 3:
		r.log("fault: kill the operator")
		r.op.Kill()
	case 5:
		m := members[r.rng.IntN(len(members))]
		var p corev1.Pod
		if err := framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: m}, &p); err != nil || p.Spec.NodeName == "" {
			r.ignore(fmt.Errorf("the node of %s: %v", m, err))
			return
		}
		r.log("fault: stop node %s (member %s) for 10s", p.Spec.NodeName, m)
		r.ignore(framework.Env.Stack.StopNode(ctx, p.Spec.NodeName))
		time.Sleep(10 * time.Second)
		r.ignore(framework.Env.Stack.StartNode(ctx, p.Spec.NodeName))
		r.log("node %s started again", p.Spec.NodeName)
	default:
		r.log("no fault")
	}
}

// ignore logs a fault that could not be injected: its Pod may be gone already.
func (r *chaosRun) ignore(err error) {
	if err != nil {
		r.log("  (not injected: %v)", err)
	}
}

// verdict checks the history and quorum, and writes the seed's report.
func (r *chaosRun) verdict(seed uint64, history []porcupine.Operation, gaps []quorumGap) {
	model := kvModel.ToModel()
	result, info := porcupine.CheckOperationsVerbose(model, history, 2*time.Minute)
	var unexplained []quorumGap
	for _, g := range gaps {
		if !r.explained(g) {
			unexplained = append(unexplained, g)
		}
	}
	report := map[string]any{
		"seed": seed, "namespace": r.ns, "events": r.events, "operations": len(history),
		"linearizable": string(result), "quorumGaps": gaps, "unexplainedQuorumGaps": unexplained,
		"operatorRestarts": r.op.Restarts(), "duration": time.Since(r.start).Round(time.Second).String(),
	}
	path := r.report(fmt.Sprintf("seed-%d", seed), report)
	r.t.Logf("seed %d: %d operations, %s, %d quorum gaps (%d unexplained); report %s", seed, len(history), result, len(gaps), len(unexplained), path)
	if result != porcupine.Ok {
		html := filepath.Join(filepath.Dir(path), fmt.Sprintf("seed-%d.html", seed))
		_ = porcupine.VisualizePath(model, info, html)
		r.t.Errorf("seed %d: the clients' history is %s (visualisation: %s)", seed, result, html)
	}
	require.Empty(r.t, unexplained, "seed %d: quorum was lost with no fault to explain it", seed)
}

// report writes a run's report as .stack/chaos/<name>.json and returns its path.
func (r *chaosRun) report(name string, report map[string]any) string {
	dir := filepath.Join(framework.Env.Root, ".stack", "chaos")
	require.NoError(r.t, os.MkdirAll(dir, 0o755))
	data, _ := json.MarshalIndent(report, "", "  ")
	path := filepath.Join(dir, name+".json")
	require.NoError(r.t, os.WriteFile(path, append(data, '\n'), 0o644))
	return path
}

// explained: a gap in quorum that starts within 30 s of an injected fault may be the fault's
// own doing (a second member down while the operator restarts one it had to).
func (r *chaosRun) explained(g quorumGap) bool {
	for _, f := range r.faults {
		if d := g.From.Sub(f); d >= -time.Second && d <= 30*time.Second {
			return true
		}
	}
	return false
}

// quorumGap is a period in which no linearizable read went through.
type quorumGap struct {
	From time.Time     `json:"from"`
	For  time.Duration `json:"for"`
}

type quorumWatch struct {
	cancel context.CancelFunc
	done   chan struct{}
	gaps   []quorumGap
}

// watchQuorum tries a linearizable member list every second; three failures in a row are a
// gap in quorum (a single failure may be a client that picked a member just killed).
func watchQuorum(t *testing.T, ns, name string) *quorumWatch {
	ctx, cancel := context.WithCancel(context.Background())
	qw := &quorumWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(qw.done)
		var since time.Time
		fails := 0
		for ctx.Err() == nil {
			ok := linearizableRead(ctx, framework.Endpoints(t, ns, name), framework.Get(t, ns, name).Status.ClusterID)
			switch {
			case ok && fails >= 3:
				qw.gaps = append(qw.gaps, quorumGap{From: since, For: time.Since(since)})
				fails = 0
			case ok:
				fails = 0
			case fails == 0:
				since, fails = time.Now(), 1
			default:
				fails++
			}
			time.Sleep(time.Second)
		}
	}()
	return qw
}

func linearizableRead(ctx context.Context, eps []string, clusterID string) bool {
	if len(eps) == 0 {
		return false
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: time.Second, Logger: zap.NewNop()})
	if err != nil {
		return false
	}
	defer cli.Close()
	rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	resp, err := cli.MemberList(rctx)
	return err == nil && framework.SameCluster(resp.Header, clusterID) == nil
}

func (qw *quorumWatch) stop() []quorumGap {
	qw.cancel()
	<-qw.done
	return qw.gaps
}
