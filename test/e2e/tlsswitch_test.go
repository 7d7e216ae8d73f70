package e2e

import (
	"context"
	"crypto/tls"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/test/framework"
)

// TLS switched on for a running cluster, a writer speaking plain text throughout the first
// part: each member restarts serving TLS beside plain text, the peer URLs move to TLS on
// the second peer port, and the plan waits for approval before any member refuses plain
// text. By then every member is healthy on TLS peer URLs, and plain-text and TLS clients are
// both served. A writer speaking TLS takes over; approved, members restart serving TLS
// alone: plain text is refused, members advertise https, and every acknowledged write of
// both writers is there. Then TLS is switched off the same way back.
func TestTLSSwitchedOnAndOffLive(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	framework.CreateReady(t, ns, 3)
	phase := phases(t)
	plainEPs := func() []string { return framework.EndpointsAs(t, ns, "demo", false) }
	w := startWriter(t, ns, "demo")
	w.waitAcked()
	cutOff := watchPeers(t, ns, "demo")

	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto} })
	c := framework.WaitFor(t, ns, "demo", 5*time.Minute, "the plan at its first step without plain text, awaiting approval", func(c *v1alpha1.EtcdCluster) bool {
		p := c.Status.Plan
		return p != nil && p.Phase == v1alpha1.PlanAwaitingApproval && p.Steps[p.Current].Why == plan.WhyClientPlainTextOff
	})
	phase("every member serves TLS beside plain text, peer URLs on TLS")
	both := plan.Listen{Client: plan.ListenBoth, Peer: plan.ListenBoth}
	for _, p := range framework.MemberPods(t, ns, "demo") {
		require.Equal(t, both, resources.Served(&p), p.Name)
	}
	for _, m := range framework.CheckMembership(t, ns, "demo").Members {
		require.Equal(t, []string{vocab.PeerURLAt("demo", ns, m.Name, true, vocab.PeerTLSPort)}, m.PeerURLs, "members reach %s over TLS", m.Name)
	}
	put(t, framework.EtcdClient(t, plainEPs()), "/plain", "still served")
	put(t, framework.ClusterClient(t, ns, "demo"), "/tls", "served too")
	w.stopAndVerify()
	t.Logf("the plain-text writer: %d writes failed, the slowest took %v", w.failed, w.maxLat)

	tw := startWriter(t, ns, "demo") // the application moved to TLS
	tw.waitAcked()
	framework.Update(t, ns, "demo", func(x *v1alpha1.EtcdCluster) {
		x.Annotations = map[string]string{v1alpha1.AnnotationApprove: c.Status.Plan.ID}
	})
	framework.WaitFor(t, ns, "demo", 5*time.Minute, "Ready with TLS alone", func(c *v1alpha1.EtcdCluster) bool {
		return framework.Ready(c) && c.Status.Plan == nil && c.Status.ReadyReplicas == 3
	})
	phase("approved: plain text gone")
	tw.stopAndVerify()
	t.Logf("the TLS writer: %d writes failed, the slowest took %v", tw.failed, tw.maxLat)
	for _, p := range framework.MemberPods(t, ns, "demo") {
		require.Equal(t, plan.Listen{Client: plan.ListenTLS, Peer: plan.ListenTLS}, resources.Served(&p), p.Name)
	}
	for _, m := range framework.CheckMembership(t, ns, "demo").Members {
		require.Equal(t, []string{vocab.ClientURL("demo", ns, m.Name, true)}, m.ClientURLs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := framework.EtcdClient(t, plainEPs()).Put(ctx, "/plain", "refused")
	require.Error(t, err, "plain text is refused")
	tlsClient := framework.ClusterClient(t, ns, "demo")
	got, err := tlsClient.Get(context.Background(), "/plain")
	require.NoError(t, err)
	require.Equal(t, "still served", string(got.Kvs[0].Value))
	require.Empty(t, cutOff(), "no member answered without a leader for long: none was cut off from its peers")

	// Off again, the TLS writer writing until the plan waits before members refuse TLS.
	switchedOff(t, ns, "demo", phase)
	requireNoSecretLeak(t, ns)
}

// switchedOff switches TLS off for the cluster, a TLS writer writing until the plan waits
// for approval before the first member refuses TLS clients, a plain-text one after; peer
// URLs are plain text by then, and members answer their peers throughout.
func switchedOff(t *testing.T, ns, cluster string, phase func(string)) {
	cutOff := watchPeers(t, ns, cluster)
	tw := startWriter(t, ns, cluster)
	tw.waitAcked()
	tlsCfg := framework.ClientTLS(t, ns, cluster)
	framework.Update(t, ns, cluster, func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = nil })
	c := framework.WaitFor(t, ns, cluster, 5*time.Minute, "the plan at its first member refusing TLS clients, awaiting approval", func(c *v1alpha1.EtcdCluster) bool {
		p := c.Status.Plan
		return p != nil && p.Phase == v1alpha1.PlanAwaitingApproval && p.Steps[p.Current].Why == plan.WhyTLSOff
	})
	phase("switched off: every member serves plain text beside TLS, peer URLs plain")
	for _, m := range framework.CheckMembership(t, ns, cluster).Members {
		require.Equal(t, []string{vocab.PeerURL(cluster, ns, m.Name, false)}, m.PeerURLs)
	}
	put(t, framework.EtcdClientTLS(t, framework.EndpointsAs(t, ns, cluster, true), tlsCfg), "/tls-off", "TLS still served")
	tw.stopAndVerify()
	t.Logf("the TLS writer: %d writes failed, the slowest took %v", tw.failed, tw.maxLat)
	pw := startWriter(t, ns, cluster)
	pw.waitAcked()
	framework.Update(t, ns, cluster, func(x *v1alpha1.EtcdCluster) {
		x.Annotations = map[string]string{v1alpha1.AnnotationApprove: c.Status.Plan.ID}
	})
	framework.WaitFor(t, ns, cluster, 5*time.Minute, "Ready with plain text alone", func(c *v1alpha1.EtcdCluster) bool {
		return framework.Ready(c) && c.Status.Plan == nil && c.Status.ReadyReplicas == 3 && c.Status.TLS == nil
	})
	phase("approved: TLS gone")
	pw.stopAndVerify()
	t.Logf("the plain-text writer: %d writes failed, the slowest took %v", pw.failed, pw.maxLat)
	for _, p := range framework.MemberPods(t, ns, cluster) {
		require.Equal(t, plan.Listen{Client: plan.ListenPlain, Peer: plan.ListenPlain}, resources.Served(&p), p.Name)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := framework.EtcdClientTLS(t, framework.EndpointsAs(t, ns, cluster, true), tlsCfg).Put(ctx, "/tls-off", "refused")
	require.Error(t, err, "TLS is refused")
	require.Empty(t, cutOff(), "no member was cut off from its peers")
}

// watchPeers asks every running member for its status four times a second, the way the
// Pod serves it, until the function it returns is called; that returns the members that
// answered without knowing a leader, while another member knew one, for more than two
// seconds in a row: cut off from their peers. A member that just started hears from the
// leader within a heartbeat or two. An election that every member waits on (a leader that a
// loaded machine held up past the election timeout) cuts no one off.
func watchPeers(t *testing.T, ns, cluster string) func() []string {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan []string)
	go func() {
		// No require here: t.FailNow would end this goroutine, and the test would wait for
		// it for ever. An API read that fails (now and then, on a busy machine) skips a look.
		since, cut := map[string]time.Time{}, map[string]bool{}
		for ; ctx.Err() == nil; time.Sleep(250 * time.Millisecond) {
			cfg, err := framework.ReadClientTLS(ns, cluster)
			var pods corev1.PodList
			if err == nil {
				err = framework.Env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelCluster: cluster})
			}
			if err != nil {
				if ctx.Err() == nil {
					t.Logf("watching the peers: %v", err)
				}
				continue
			}
			alone := map[string]bool{}
			led := false
			for _, p := range pods.Items {
				answered, knows := leaderOf(ctx, &p, cfg)
				alone[p.Name] = answered && !knows
				led = led || knows
			}
			for _, p := range pods.Items {
				if alone[p.Name] && led {
					if since[p.Name].IsZero() {
						since[p.Name] = time.Now()
					}
					cut[p.Name] = cut[p.Name] || time.Since(since[p.Name]) > 2*time.Second
				} else {
					delete(since, p.Name)
				}
			}
		}
		done <- slices.Sorted(maps.Keys(cut))
	}()
	var once sync.Once
	var cut []string
	stop := func() []string {
		once.Do(func() { cancel(); cut = <-done })
		return cut
	}
	t.Cleanup(func() { stop() }) // a test that failed before it asked
	return stop
}

// leaderOf: whether the member answers, and whether it knows a leader.
func leaderOf(ctx context.Context, p *corev1.Pod, cfg *tls.Config) (answered, knows bool) {
	if p.Status.PodIP == "" || p.DeletionTimestamp != nil {
		return false, false
	}
	ep := observe.ClientURL(p) // https when the Pod serves TLS
	if cfg == nil {
		ep = "http" + strings.TrimPrefix(ep, "https") // the Pod serves plain text too, or alone
	} else if !strings.HasPrefix(ep, "https://") {
		cfg = nil
	}
	cli, err := clientv3.New(framework.EtcdConfig([]string{ep}, cfg))
	if err != nil {
		return false, false
	}
	defer cli.Close()
	sctx, scancel := context.WithTimeout(ctx, time.Second)
	defer scancel()
	st, err := cli.Status(sctx, ep)
	return err == nil, err == nil && st.Leader != 0
}

// put writes a key and requires etcd to acknowledge it.
func put(t *testing.T, cli *clientv3.Client, key, value string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := cli.Put(ctx, key, value)
	require.NoError(t, err, "put %s", key)
}
