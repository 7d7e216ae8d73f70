package controller

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/internal/kubetest"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/executor/resources"
)

// A cluster whose client TLS comes from the operator is dialed with the operator's
// certificate, and a member Pod the plan creates finds its peer certificate there.
func TestAutoTLSDialsAsTheOperator(t *testing.T) {
	f := newFixture(t, 3, func(c *v1alpha1.EtcdCluster) {
		c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto}
		c.Spec.Replicas = 4
	})
	// The certificates as the cluster's bootstrap issued them, before it had an ID.
	boot := f.cluster()
	boot.Status.ClusterID = ""
	_, err := f.r.certs().Ensure(context.Background(), boot, nil, f.now)
	require.NoError(t, err)
	var dialed *tls.Config
	f.r.Dial = func(eps map[string]string, cfg *tls.Config) (etcd.Cluster, error) {
		dialed = cfg
		return f.etcd.Dial(eps, cfg)
	}
	c, _ := f.reconcile()
	require.NotNil(t, dialed, "the operator dials with its client certificate")
	require.Equal(t, "demo-client.ns.svc", dialed.ServerName)
	require.Len(t, dialed.Certificates, 1)
	require.Equal(t, vocab.ClientSecret("demo"), c.Status.TLS.ClientSecretName)
	// The learner added, its Pod started in the same reconcile (it shows in the cache at
	// once), with its peer certificate: the status lists that one too.
	var listed []string
	for _, cert := range c.Status.TLS.Certificates {
		listed = append(listed, cert.SecretName)
	}
	want := []string{vocab.CASecret("demo"), vocab.ServerSecret("demo"), vocab.OperatorSecret("demo"), vocab.ClientSecret("demo"), vocab.PeerSecret("demo-3")}
	require.ElementsMatch(t, want, listed)
	for _, name := range want {
		require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, &corev1.Secret{}), name)
	}
	var p corev1.Pod
	require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "demo-3"}, &p), "the learner's Pod is created")
}

// A Secret spec.tls names that does not exist stalls the cluster before anything is
// dialed or changed, and says which Secret.
func TestMissingProvidedSecretStalls(t *testing.T) {
	f := newFixture(t, 3, func(c *v1alpha1.EtcdCluster) {
		c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSProvided, ServerSecretName: "srv", PeerSecretName: "peer", ClientSecretName: "op"}
		c.Spec.Replicas = 4
	})
	f.r.Dial = func(map[string]string, *tls.Config) (etcd.Cluster, error) {
		t.Fatal("nothing is dialed")
		return nil, nil
	}
	c, _ := f.reconcile()
	require.True(t, conditions.IsStalled(c))
	require.Equal(t, string(v1alpha1.ReasonTLSSecretNotFound), conditions.GetReason(c, meta.StalledCondition))
	require.Contains(t, conditions.GetMessage(c, meta.StalledCondition), "Secret srv does not exist")
	require.Nil(t, c.Status.Plan, "nothing is planned")
}

// A certificate whose renewal did not happen says so in a condition once a tenth of its
// life is left; one the operator does not renew, a week before its end.
func TestExpiringCertificateIsACondition(t *testing.T) {
	f := autoTLS(t)
	c, _ := f.reconcile()
	require.Equal(t, v1alpha1.ReasonCertificatesValid, conditions.GetReason(c, v1alpha1.ConditionCertificateExpiring))
	require.False(t, conditions.IsTrue(c, v1alpha1.ConditionCertificateExpiring))

	day := 24 * time.Hour
	end := metav1.NewTime(f.now.Add(90 * day))
	c.Status.TLS.Certificates = []v1alpha1.CertificateStatus{{SecretName: "demo-server-tls", NotAfter: end, RenewAt: &metav1.Time{Time: f.now.Add(60 * day)}}}
	markCertificates(c, f.now.Add(80*day))
	require.False(t, conditions.IsTrue(c, v1alpha1.ConditionCertificateExpiring), "10 days of 90 are left")
	markCertificates(c, f.now.Add(82*day))
	require.True(t, conditions.IsTrue(c, v1alpha1.ConditionCertificateExpiring), "8 days of 90 are left")
	require.Contains(t, conditions.GetMessage(c, v1alpha1.ConditionCertificateExpiring), "Secret demo-server-tls expires at")

	c.Status.TLS.Certificates = []v1alpha1.CertificateStatus{{SecretName: "users", NotAfter: end}}
	markCertificates(c, f.now.Add(82*day))
	require.False(t, conditions.IsTrue(c, v1alpha1.ConditionCertificateExpiring), "8 days before the end of a certificate the operator does not renew")
	markCertificates(c, f.now.Add(84*day))
	require.True(t, conditions.IsTrue(c, v1alpha1.ConditionCertificateExpiring), "6 days before")

	c.Status.TLS = nil
	markCertificates(c, f.now)
	require.Nil(t, conditions.Get(c, v1alpha1.ConditionCertificateExpiring), "no TLS, no condition")
}

// TLS switched on for a running cluster: a member restarts serving TLS beside plain text
// (the operator keeps dialing plain text until every member serves TLS), and the cluster
// gets its CA though it formed long ago, since no certificate of one was ever issued.
func TestTLSSwitchedOnRestartsMembersBesidePlainText(t *testing.T) {
	f := newFixture(t, 3, nil)
	var dialed []string
	f.r.Dial = func(eps map[string]string, cfg *tls.Config) (etcd.Cluster, error) {
		dialed = append(dialed, observe.Scheme(eps))
		return f.etcd.Dial(eps, cfg)
	}
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto} })
	c, _ := f.reconcile()
	require.Equal(t, plan.WhyTLSBeside, c.Status.Plan.Steps[0].Why)
	require.Equal(t, plan.Listen{Client: plan.ListenBoth, Peer: plan.ListenBoth}, c.Status.Plan.Steps[0].Listen)
	require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: vocab.CASecret("demo")}, &corev1.Secret{}))
	require.Equal(t, []string{"http"}, dialed, "members serve plain text alone: the operator dials plain text (etcd.Dial then leaves its TLS configuration unused)")
	var p corev1.Pod
	require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: c.Status.Plan.Steps[0].Member}, &p))
	require.Equal(t, plan.Listen{Client: plan.ListenBoth, Peer: plan.ListenBoth}, resources.Served(&p), "re-created serving both")
}

// Once every member serves TLS beside plain text, the peer URLs move to TLS on the second
// peer port, by member ID, and the first restart without plain text waits for approval.
func TestTLSSwitchedOnMovesPeerURLsAndWaitsForApprovalBeforeRefusingPlainText(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto} })
	both := plan.Listen{Client: plan.ListenBoth, Peer: plan.ListenBoth}
	for i := 0; i < 3; i++ {
		name := vocab.MemberName("demo", i)
		old := &corev1.Pod{}
		require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, old))
		require.NoError(t, f.kube.Delete(context.Background(), old))
		require.NoError(t, f.kube.Create(context.Background(), kubetest.MemberPodServing(f.cluster(), name, both)))
	}
	var dialed []string
	f.r.Dial = func(eps map[string]string, cfg *tls.Config) (etcd.Cluster, error) {
		dialed = append(dialed, observe.Scheme(eps))
		require.NotNil(t, cfg)
		return f.etcd.Dial(eps, cfg)
	}
	c, _ := f.reconcile()
	require.Equal(t, []string{"https"}, dialed, "every member serves TLS: the operator dials it")
	require.Equal(t, []string{"UpdatePeerURL 1 https://demo-0.demo.ns.svc:2382", "UpdatePeerURL 2 https://demo-1.demo.ns.svc:2382",
		"UpdatePeerURL 3 https://demo-2.demo.ns.svc:2382"}, f.etcd.Calls())
	require.Equal(t, v1alpha1.PlanAwaitingApproval, c.Status.Plan.Phase)
	cur := c.Status.Plan.Steps[c.Status.Plan.Current]
	require.Equal(t, plan.WhyClientPlainTextOff, cur.Why)
	require.Contains(t, conditions.GetMessage(c, meta.ReconcilingCondition), "members refuse clients that do not speak TLS")
	var p corev1.Pod
	require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: cur.Member}, &p))
	require.Equal(t, both, resources.Served(&p), "nothing restarts before the approval")

	f.approve(c.Status.Plan.ID)
	f.reconcile()
	require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: cur.Member}, &p))
	require.Equal(t, plan.Listen{Client: plan.ListenTLS, Peer: plan.ListenTLS}, resources.Served(&p))
}

// TLS switched off: the members keep serving the certificates of the TLS last in use
// (status.tls.inUse) until they serve plain text alone, and the operator dials them with its
// own; without that record, a member is never started to serve TLS it has no Secrets for.
func TestTLSSwitchedOffKeepsTheTLSInUse(t *testing.T) {
	f := autoTLS(t)
	c, _ := f.reconcile()
	require.Equal(t, v1alpha1.TLSAuto, c.Status.TLS.InUse.ClientMode())

	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = nil })
	f.r.clients.forget(client.ObjectKeyFromObject(c)) // dialed afresh: with what?
	var dialed []string
	f.r.Dial = func(eps map[string]string, cfg *tls.Config) (etcd.Cluster, error) {
		dialed = append(dialed, observe.Scheme(eps))
		require.NotNil(t, cfg, "the operator dials with the certificate of the TLS in use")
		return f.etcd.Dial(eps, cfg)
	}
	c, _ = f.reconcile()
	first := c.Status.Plan.Steps[0]
	require.Equal(t, plan.WhyPlainBeside, first.Why)
	require.Equal(t, []string{"https"}, dialed)
	var p corev1.Pod
	require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: first.Member}, &p))
	require.Equal(t, plan.Listen{Client: plan.ListenBoth, Peer: plan.ListenTLSFirst}, resources.Served(&p))
	require.Contains(t, strings.Join(p.Spec.Containers[0].Command, " "), "--peer-trusted-ca-file=/etc/etcd/tls/trust/ca.crt")
	require.Equal(t, v1alpha1.TLSAuto, c.Status.TLS.InUse.PeerMode(), "still in use")

	// The same, with no record of the TLS in use: the step stalls rather than start a member
	// that would serve TLS without its Secrets.
	g := autoTLS(t)
	g.update(func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = nil })
	g.now = g.now.Add(2 * time.Minute)
	for range 3 {
		c, _ = g.reconcile()
		g.now = g.now.Add(time.Minute)
	}
	require.True(t, conditions.IsStalled(c), "%+v %+v", c.Status.Conditions, c.Status.Plan)
	require.Contains(t, conditions.GetMessage(c, meta.StalledCondition), "not recorded (status.tls.inUse)")
	for i := range 3 {
		require.NoError(t, g.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: vocab.MemberName("demo", i)}, &corev1.Pod{}),
			"no member's Pod goes")
	}
}

// autoTLS is the fixture with TLS from Auto, its certificates as the cluster's bootstrap
// issued them, before it had an ID.
func autoTLS(t *testing.T) *fixture {
	f := newFixture(t, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto} })
	boot := f.cluster()
	boot.Status.ClusterID = ""
	_, err := f.r.certs().Ensure(context.Background(), boot, nil, f.now)
	require.NoError(t, err)
	return f
}
