package bench

import (
	"context"
	"crypto/tls"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/certs"
	"github.com/etcdplan/etcdplan/test/framework"
)

// tlsSuffix ends the name of a scenario run on clusters with spec.tls mode Auto (client and
// peer TLS from the cluster's own CA); the same name without it is the plain run.
const tlsSuffix = ", TLS"

// tlsClusters are the clusters of the benchmarks that talk TLS (namespace/name), and the
// client configuration each is dialed with once its Secrets exist: the operator's own
// (certs.Keeper.Operator), for the operator's clusters and the floor's alike, read again
// every 2 s: a rotation of the CA issues it again.
var tlsClusters = struct {
	sync.Mutex
	on   map[string]bool
	cfgs map[string]operatorTLS
}{on: map[string]bool{}, cfgs: map[string]operatorTLS{}}

// operatorTLS is a configuration read, the version of the Secrets it came from, and when.
type operatorTLS struct {
	cfg     *tls.Config
	version string
	read    time.Time
}

// markTLS says a cluster talks TLS; forgetTLS that it is gone (a cluster of the same name
// made later has a new CA).
func markTLS(ns, cluster string) {
	tlsClusters.Lock()
	defer tlsClusters.Unlock()
	tlsClusters.on[ns+"/"+cluster] = true
}

func forgetTLS(ns, cluster string) {
	tlsClusters.Lock()
	defer tlsClusters.Unlock()
	delete(tlsClusters.cfgs, ns+"/"+cluster)
}

// clientTLS is the configuration a cluster's members are dialed with: nil for plain text.
// ok is false while a TLS cluster's Secrets are not there yet (no dial can succeed). The
// same configuration is returned until its Secrets change.
func clientTLS(ns, cluster string) (cfg *tls.Config, ok bool) {
	key := ns + "/" + cluster
	tlsClusters.Lock()
	defer tlsClusters.Unlock()
	if !tlsClusters.on[key] {
		return nil, true
	}
	last := tlsClusters.cfgs[key]
	if last.cfg != nil && time.Since(last.read) < 2*time.Second {
		return last.cfg, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := &v1alpha1.EtcdCluster{}
	if err := framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster}, c); err != nil {
		return last.cfg, last.cfg != nil
	}
	cfg, version, err := keeper().Operator(ctx, c)
	if err != nil || cfg == nil {
		return last.cfg, last.cfg != nil
	}
	if version == last.version {
		cfg = last.cfg
	}
	tlsClusters.cfgs[key] = operatorTLS{cfg: cfg, version: version, read: time.Now()}
	return cfg, true
}

// etcdConfig is the configuration of a client of a cluster's members at eps, with TLS when
// the cluster talks it.
func etcdConfig(ns, cluster string, eps []string) clientv3.Config {
	cfg, _ := clientTLS(ns, cluster)
	return framework.EtcdConfig(eps, cfg)
}

// keeper is the product's own keeper of a cluster's TLS Secrets: the floor issues its
// certificates through it, as the operator does.
func keeper() certs.Keeper {
	return certs.Keeper{Client: framework.Env.Client, Reader: framework.Env.Client}
}

// withTLS is a cluster with client and peer TLS from its own CA.
func withTLS(c *v1alpha1.EtcdCluster) *v1alpha1.EtcdCluster {
	c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto}
	return c
}

// floorOwner creates, in the floor's namespace, the EtcdCluster the floor's TLS Secrets
// belong to (certs.Keeper writes each Secret with its cluster as owner) and returns it. No
// operator watches that namespace: the object only owns Secrets, as the operator's cluster
// owns its own.
func floorOwner(t *testing.T, c *v1alpha1.EtcdCluster) *v1alpha1.EtcdCluster {
	ctx := context.Background()
	owner := c.DeepCopy()
	owner.ResourceVersion, owner.UID = "", ""
	if err := framework.Env.Client.Create(ctx, owner); apierrors.IsAlreadyExists(err) {
		require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKeyFromObject(owner), owner))
	} else {
		require.NoError(t, err)
	}
	markTLS(owner.Namespace, owner.Name)
	return owner
}

// deleteTLS deletes the TLS Secrets of a cluster of the operator's and of the floor's, and
// the floor's owner of them: a cluster of the same name made later issues its own.
func (b *bench) deleteTLS(name string) {
	ctx := context.Background()
	sel := client.MatchingLabels{v1alpha1.LabelCluster: name}
	require.NoError(b.t, client.IgnoreNotFound(framework.Env.Client.Delete(ctx, &v1alpha1.EtcdCluster{ObjectMeta: framework.MetaName(b.floorNS, name)})))
	// Both clusters gone first: the operator issues no Secret for a cluster that is gone.
	for _, ns := range []string{b.opNS, b.floorNS} {
		require.Eventually(b.t, func() bool {
			return apierrors.IsNotFound(framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &v1alpha1.EtcdCluster{}))
		}, time.Minute, 200*time.Millisecond, "the EtcdCluster %s/%s goes", ns, name)
	}
	for _, ns := range []string{b.opNS, b.floorNS} {
		require.NoError(b.t, framework.Env.Client.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(ns), sel))
		forgetTLS(ns, name)
	}
}

// moveLeader makes the member of ID target lead the cluster (framework.MoveLeader, through
// TLS when the cluster talks it).
func moveLeader(t *testing.T, ns, cluster string, target uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, ep := range framework.Endpoints(t, ns, cluster) {
		cli, err := clientv3.New(etcdConfig(ns, cluster, []string{ep}))
		require.NoError(t, err)
		st, err := cli.Status(ctx, ep)
		require.NoError(t, err)
		if st.Header.MemberId == st.Leader {
			if st.Leader != target {
				_, err = cli.MoveLeader(ctx, target)
				require.NoError(t, err)
			}
			_ = cli.Close()
			return
		}
		_ = cli.Close()
	}
	t.Fatal("no leader found")
}

// latencyResult is the write latency of a plain cluster and of a TLS one, measured in one
// run, block after block in turn so that both see the same load of the machine.
type latencyResult struct {
	Blocks, PerBlock int
	// Plain and TLS: puts one after the other on one client already connected.
	Plain, TLS writeStats
	// PlainDial and TLSDial: a new client's first put, its connection (and handshake)
	// included.
	PlainDial, TLSDial writeStats
}

// latency measures sequential puts on two clusters of three members, plain and TLS, in
// alternating blocks, then a new client's first put on each, alternating too.
func (b *bench) latency(plain, secure string) latencyResult {
	t := b.t
	t.Logf("bench: write latency, %s and %s", plain, secure)
	r := latencyResult{Blocks: 6, PerBlock: 250}
	value := strings.Repeat("x", 256)
	connect := func(cluster string) *clientv3.Client {
		cli, err := clientv3.New(etcdConfig(b.opNS, cluster, framework.Endpoints(t, b.opNS, cluster)))
		require.NoError(t, err)
		return cli
	}
	put := func(cli *clientv3.Client, key string) probeSample {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_, err := cli.Put(ctx, key, value)
		cancel()
		return probeSample{At: start, Latency: time.Since(start), OK: err == nil}
	}
	clis := map[string]*clientv3.Client{plain: connect(plain), secure: connect(secure)}
	defer func() {
		for _, cli := range clis {
			_ = cli.Close()
		}
	}()
	samples := map[string][]probeSample{}
	for _, cluster := range []string{plain, secure} { // warm up: connections made, first puts done
		for i := range 20 {
			put(clis[cluster], fmt.Sprintf("/latency/warm/%03d", i))
		}
	}
	for blk := range r.Blocks {
		order := []string{plain, secure}
		if blk%2 == 1 {
			slices.Reverse(order)
		}
		for _, cluster := range order {
			for i := range r.PerBlock {
				samples[cluster] = append(samples[cluster], put(clis[cluster], fmt.Sprintf("/latency/%02d/%04d", blk, i)))
			}
		}
	}
	dials := map[string][]probeSample{}
	for i := range 20 {
		for _, cluster := range []string{plain, secure} {
			start := time.Now()
			cli := connect(cluster)
			s := put(cli, fmt.Sprintf("/latency/dial/%03d", i))
			_ = cli.Close()
			s.At, s.Latency = start, time.Since(start)
			dials[cluster] = append(dials[cluster], s)
		}
	}
	r.Plain, r.TLS = statsOf(samples[plain]), statsOf(samples[secure])
	r.PlainDial, r.TLSDial = statsOf(dials[plain]), statsOf(dials[secure])
	t.Logf("bench: write latency: plain p50 %v p99 %v max %v; TLS p50 %v p99 %v max %v; a new client's first put: plain p50 %v, TLS p50 %v",
		r.Plain.P50, r.Plain.P99, r.Plain.Max, r.TLS.P50, r.TLS.P99, r.TLS.Max, r.PlainDial.P50, r.TLSDial.P50)
	return r
}

// tlsReport is the docs' section on TLS: each scenario run plain and with TLS, the median
// of its runs side by side, and the write latency of both.
func tlsReport(results []benchResult, lat *latencyResult) string {
	var b strings.Builder
	op, fl := map[string][]time.Duration{}, map[string][]time.Duration{}
	var names []string
	for _, r := range results {
		if _, ok := op[r.Name]; !ok {
			names = append(names, r.Name)
		}
		op[r.Name], fl[r.Name] = append(op[r.Name], r.Operator), append(fl[r.Name], r.Floor)
	}
	med := func(ds []time.Duration) time.Duration {
		ds = slices.Clone(ds)
		slices.Sort(ds)
		return quantile(ds, 0.5)
	}
	rows := 0
	for _, n := range names {
		plain, ok := strings.CutSuffix(n, tlsSuffix)
		if !ok || len(op[plain]) == 0 {
			continue
		}
		if rows == 0 {
			fmt.Fprintf(&b, "\n## TLS\n\n%s\n", tlsIntro)
			fmt.Fprintf(&b, "| scenario, median of its runs | operator plain / TLS | floor plain / TLS | operator / floor plain | operator / floor TLS | TLS / plain, operator (floor) |\n|---|---|---|---|---|---|\n")
		}
		rows++
		po, pf, to, tf := med(op[plain]), med(fl[plain]), med(op[n]), med(fl[n])
		fmt.Fprintf(&b, "| %s (%d and %d runs) | %.2f s / %.2f s | %.2f s / %.2f s | %.2f | %.2f | %.2f (%.2f) |\n", plain, len(op[plain]), len(op[n]),
			po.Seconds(), to.Seconds(), pf.Seconds(), tf.Seconds(), po.Seconds()/pf.Seconds(), to.Seconds()/tf.Seconds(),
			to.Seconds()/po.Seconds(), tf.Seconds()/pf.Seconds())
	}
	if lat == nil {
		return b.String()
	}
	if rows == 0 {
		fmt.Fprintf(&b, "\n## TLS\n\n%s", tlsIntro)
	}
	fmt.Fprintf(&b, "\nWrite latency, plain and TLS clusters of 3 members side by side: %d blocks of %d puts of 256 bytes one after the other on each, in turn; then a new client's first put (its connection and TLS handshake included), 20 on each, in turn.\n\n",
		lat.Blocks, lat.PerBlock)
	fmt.Fprintf(&b, "| writes | plain p50 / p99 / max | TLS p50 / p99 / max | TLS / plain p50 / p99 / max | failed plain / TLS |\n|---|---|---|---|---|\n")
	row := func(what string, p, s writeStats) {
		fmt.Fprintf(&b, "| %s | %s / %s / %s | %s / %s / %s | %.2f / %.2f / %.2f | %d of %d / %d of %d |\n", what,
			msf(p.P50), msf(p.P99), msf(p.Max), msf(s.P50), msf(s.P99), msf(s.Max),
			ratio(s.P50, p.P50), ratio(s.P99, p.P99), ratio(s.Max, p.Max), p.Failed, p.Writes, s.Failed, s.Writes)
	}
	row("sequential puts, one client", lat.Plain, lat.TLS)
	row("a new client's first put", lat.PlainDial, lat.TLSDial)
	b.WriteString(tlsChangesIntro)
	return b.String()
}

const tlsIntro = `The bootstrap of 3 members and the scaling 3 -> 5 and back run a second time on clusters
with ` + "`spec.tls: {mode: Auto}`" + ` (the rows ending in *TLS*): members serve clients and peers
over mutual TLS from the cluster's own CA. The floor's clusters talk TLS too: the floor
issues the same Secrets through the operator's own code (executor/certs: the CA, the trust
bundle, the server, operator and application certificates before the seed, each member's
peer certificate just before its Pod), owned by an EtcdCluster of the same spec in the
floor's namespace that no operator watches; it renders the same Pods (the same TLS flags
and Secret volumes) and dials members with the operator's client certificate. The writer,
the sampler and the check that ends a run dial TLS clusters with that certificate too.
Each side's figure is the median of its runs; *TLS / plain* compares the two within one
run.
`

const tlsChangesIntro = `
**TLS changed on a running cluster** (the rows *TLS switched on*, *CA rotated* and
*certificates renewed*; ` + "`BENCH_ONLY=tlschange`" + ` runs them alone): each on a cluster of 3
with a writer throughout, against the naive way on the floor's cluster of the same spec,
as operators that restart every member with the new configuration do: the Secrets and
flags of the new configuration put in place, then every member Pod deleted at once and
started again on its volume. The writer follows the cluster as an application that
reads its client Secret again does: it speaks TLS once every member serves it, and
presents the certificate its Secret holds now (read every half second).

- **TLS switched on**: ` + "`spec.tls: {mode: Auto}`" + ` set on a running plain cluster; the
  operator's plan (each member restarted serving TLS beside plain text, the peer URLs moved
  to TLS, each member restarted serving TLS alone) is approved by the benchmark the moment
  it waits for approval. The naive way moves every peer URL to https in one go (etcd's
  MemberUpdate, through the leader: the last one leaves no two members that can reach
  each other) and restarts every member at once serving TLS alone.
- **CA rotated**: the annotation ` + "`kubectl etcd rotate-ca`" + ` sets; the operator's three
  passes, against every certificate issued again from a new CA that members trust alone
  and every member restarted at once.
- **certificates renewed**: certificates valid 3 minutes (the least the API allows), timed
  from the moment the first is due; the operator's RenewCertificate steps (no restart:
  etcd reads its certificate at every handshake, and each step waits until every member
  serves the new one), against the same certificates issued again and every member
  restarted at once.
`

// msf is a short latency in milliseconds with a decimal: sequential puts take a few.
func msf(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000)
}

func ratio(a, b time.Duration) float64 {
	if b == 0 {
		return 0
	}
	return a.Seconds() / b.Seconds()
}
