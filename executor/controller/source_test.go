package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
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
	"github.com/etcdplan/etcdplan/executor/pki"
)

// provideSecrets writes the user's Secrets of mode Provided: server "srv", peer "peer" and
// the operator's client certificate "op", from the user's own CA, each with its ca.crt.
func (f *fixture) provideSecrets() pki.KeyPair {
	ca, err := pki.NewCA("user CA", f.now.Add(-time.Hour), 24*time.Hour)
	require.NoError(f.t, err)
	for name, r := range map[string]pki.Request{
		"srv":  {CommonName: "srv", DNSNames: []string{"demo-client.ns.svc", "localhost"}, Server: true, Client: true},
		"peer": {CommonName: "peer", DNSNames: []string{"*.demo.ns.svc"}, Server: true, Client: true},
		"op":   {CommonName: "etcdplan-operator", Client: true},
	} {
		r.NotBefore, r.Validity = f.now.Add(-time.Hour), 12*time.Hour
		leaf, err := pki.Issue(ca, r)
		require.NoError(f.t, err)
		require.NoError(f.t, f.kube.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Data: map[string][]byte{vocab.TLSCertKey: leaf.Cert, vocab.TLSKeyKey: leaf.Key, vocab.CACertKey: ca.Cert}}))
	}
	return ca
}

// toProvided changes spec.tls from Auto to the user's Secrets.
func toProvided(c *v1alpha1.EtcdCluster) {
	c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSProvided, ServerSecretName: "srv", PeerSecretName: "peer", ClientSecretName: "op"}
}

// dialedAs is the issuer's common name of the client certificate a configuration presents.
func dialedAs(t *testing.T, cfg *tls.Config) string {
	require.NotNil(t, cfg)
	require.Len(t, cfg.Certificates, 1)
	leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	require.NoError(t, err)
	return leaf.Issuer.CommonName
}

// secretOf is the Secret a member Pod mounts in a volume.
func secretOf(p *corev1.Pod, volume string) string {
	for _, v := range p.Spec.Volumes {
		if v.Name == volume && v.Secret != nil {
			return v.Secret.SecretName
		}
	}
	return ""
}

// spec.tls from Auto to Provided on a running cluster drives the trust Secret through the
// CA rotation's stages: the user's CA trusted beside the cluster's own (members restart,
// still serving the operator's certificates), members restarted onto the user's Secrets
// (the operator dials with the user's client certificate from then on), the cluster's CA
// out of the trust bundle (members restart). Members trust the trust Secret throughout,
// and the operator trusts what it holds.
func TestSourceChangeDrivesTheTrustSecretThroughTheRotationsStages(t *testing.T) {
	f := autoTLS(t)
	c, _ := f.reconcile()
	require.Nil(t, c.Status.Plan)
	f.provideSecrets()
	f.update(toProvided)
	var dialed *tls.Config
	f.r.Dial = func(eps map[string]string, cfg *tls.Config) (etcd.Cluster, error) {
		dialed = cfg
		return f.etcd.Dial(eps, cfg)
	}
	f.r.clients.forget(client.ObjectKeyFromObject(c))

	// Pass 1: the user's CA is trusted beside the cluster's; members restart to read it.
	c, _ = f.reconcile()
	require.Equal(t, []plan.Why{plan.WhyCANew, plan.WhyTrustBoth, plan.WhyTrustBoth, plan.WhyLeaderRestartsLast, plan.WhyTrustBoth,
		plan.WhyCAIssues, plan.WhySourceServed, plan.WhySourceServed, plan.WhyLeaderRestartsLast, plan.WhySourceServed,
		plan.WhyCARetired, plan.WhyTrustNew, plan.WhyTrustNew, plan.WhyLeaderRestartsLast, plan.WhyTrustNew, plan.WhyCADropped,
	}, recordedWhys(c))
	require.Contains(t, c.Status.Plan.Steps[0].Reason, "spec.tls changes source (Auto to Provided)")
	require.Equal(t, &v1alpha1.CARotationStatus{Source: "Auto to Provided", Stage: "Trusting", Pass: 1}, c.Status.TLS.CARotation)
	require.Equal(t, v1alpha1.TLSAuto, c.Status.TLS.InUse.ClientMode(), "members serve the cluster's own certificates")
	trust := f.secret(vocab.TrustSecret("demo"))
	require.Len(t, certsOf(t, trust.Data[vocab.CACertKey]), 2, "the cluster's CA and the user's")
	require.Equal(t, "Trusting Auto to Provided", trust.Annotations[vocab.AnnotationSourceChange])
	require.Len(t, certsOf(t, f.secret(vocab.ClientSecret("demo")).Data[vocab.CACertKey]), 2, "applications trust both")
	require.Equal(t, "ns/demo etcd CA", dialedAs(t, dialed), "the operator dials with its own certificate")
	cur := c.Status.Plan.Steps[c.Status.Plan.Current]
	var p corev1.Pod
	require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: cur.Member}, &p))
	require.Equal(t, vocab.ServerSecret("demo"), secretOf(&p, "server-tls"))
	require.Equal(t, vocab.TrustSecret("demo"), secretOf(&p, "trust"))
	require.Equal(t, c.Status.TLS.Trust, p.Annotations[vocab.AnnotationTrust])

	// Pass 2: members restart onto the user's Secrets, still trusting both; the operator
	// dials with the user's certificate.
	f.restartedAll(c.Status.TLS.Trust)
	c, _ = f.reconcile()
	require.Equal(t, "Issuing", c.Status.TLS.CARotation.Stage)
	require.Equal(t, v1alpha1.TLSProvided, c.Status.TLS.InUse.ClientMode())
	require.Equal(t, "user CA", dialedAs(t, dialed))
	cur = c.Status.Plan.Steps[c.Status.Plan.Current]
	require.Equal(t, plan.WhySourceServed, cur.Why)
	require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: cur.Member}, &p))
	require.Equal(t, "srv", secretOf(&p, "server-tls"))
	require.Equal(t, "peer", secretOf(&p, "peer-tls"))
	require.Equal(t, vocab.TrustSecret("demo"), secretOf(&p, "trust"))
	require.Contains(t, p.Spec.Containers[0].Command, "--trusted-ca-file=/etc/etcd/tls/trust/ca.crt")
	require.Contains(t, p.Spec.Containers[0].Command, "--peer-trusted-ca-file=/etc/etcd/tls/trust/ca.crt")
	bundles, source, _ := strings.Cut(c.Status.TLS.Trust, "@")
	require.Equal(t, "Provided/Provided", source, "a Pod made now records its certificates' source")
	require.Equal(t, c.Status.TLS.Trust, p.Annotations[vocab.AnnotationTrust])
	require.Contains(t, p.Spec.InitContainers[0].Command, "--trust="+bundles, "its preflight waits for the bundles alone")
	require.Len(t, certsOf(t, f.secret(vocab.TrustSecret("demo")).Data[vocab.CACertKey]), 2)

	// Pass 3: the cluster's CA leaves the trust bundle; members restart to read it.
	f.restartedAll(c.Status.TLS.Trust)
	c, _ = f.reconcile()
	require.Equal(t, "Retiring", c.Status.TLS.CARotation.Stage)
	require.Equal(t, certsOf(t, f.secret("srv").Data[vocab.CACertKey]), certsOf(t, f.secret(vocab.TrustSecret("demo")).Data[vocab.CACertKey]))
	require.Equal(t, plan.WhyTrustNew, c.Status.Plan.Steps[c.Status.Plan.Current].Why)

	// Done: the change is forgotten, and members serving the user's Secrets alone restart
	// no more.
	f.restartedAll(c.Status.TLS.Trust)
	c, _ = f.reconcile()
	require.Empty(t, f.secret(vocab.TrustSecret("demo")).Annotations[vocab.AnnotationSourceChange])
	c, _ = f.reconcile()
	require.Nil(t, c.Status.TLS.CARotation)
	require.Nil(t, c.Status.Plan, "done")
	require.Equal(t, "user CA", dialedAs(t, dialed))
}

// restartedAll records on every member Pod what a Pod made now records (its trust bundles
// and configuration), as if each had restarted.
func (f *fixture) restartedAll(trust string) {
	f.trustAll(trust)
	for i := range 3 {
		p := &corev1.Pod{}
		require.NoError(f.t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: vocab.MemberName("demo", i)}, p))
		p.Annotations[vocab.AnnotationConfigHash] = f.cluster().Spec.ConfigHash()
		require.NoError(f.t, f.kube.Update(context.Background(), p))
	}
}

func recordedWhys(c *v1alpha1.EtcdCluster) []plan.Why {
	var out []plan.Why
	for _, s := range c.Status.Plan.Steps {
		out = append(out, s.Why)
	}
	return out
}

// A change of source the operator does not plan yet (here Auto to Provided on the client
// side alone, which would leave the peers' trust without the cluster's CA) stalls before
// anything is dialed or changed, and says what is planned.
func TestUnplannedSourceChangeStalls(t *testing.T) {
	f := autoTLS(t)
	c, _ := f.reconcile()
	f.provideSecrets()
	f.update(func(c *v1alpha1.EtcdCluster) {
		toProvided(c)
		c.Spec.TLS.Peer = &v1alpha1.TLSSideSpec{Mode: v1alpha1.TLSAuto}
	})
	f.r.clients.forget(client.ObjectKeyFromObject(c))
	f.r.Dial = func(map[string]string, *tls.Config) (etcd.Cluster, error) {
		t.Fatal("nothing is dialed")
		return nil, nil
	}
	c, _ = f.reconcile()
	require.True(t, conditions.IsStalled(c))
	require.Equal(t, string(v1alpha1.ReasonTLSSourceChange), conditions.GetReason(c, meta.StalledCondition))
	require.Contains(t, conditions.GetMessage(c, meta.StalledCondition), "spec.tls changes source (client Auto to Provided)")
	require.Nil(t, c.Status.Plan)
}

// A certificate of the cluster's CA renewed while the source changes keeps the new source's
// CAs in its ca.crt: applications reading their Secret again still trust members serving
// the user's certificates in pass 2.
func TestRenewalDuringASourceChangeKeepsTheUnion(t *testing.T) {
	f := autoTLS(t)
	f.reconcile()
	user := f.provideSecrets()
	f.update(toProvided)
	c, _ := f.reconcile()
	require.Equal(t, "Trusting", c.Status.TLS.CARotation.Stage)
	inUse, err := f.r.certs().InUse(context.Background(), f.cluster(), nil)
	require.NoError(t, err)
	require.Equal(t, v1alpha1.TLSAuto, inUse.Spec.TLS.ClientMode(), "members serve the cluster's certificates in pass 1")
	before := f.secret(vocab.ClientSecret("demo")).Data[vocab.TLSCertKey]
	require.NoError(t, f.r.certs().Renew(context.Background(), inUse, vocab.ClientSecret("demo"), f.now.Add(70*24*time.Hour)))
	renewed := f.secret(vocab.ClientSecret("demo"))
	require.NotEqual(t, before, renewed.Data[vocab.TLSCertKey], "renewed: past two thirds of 90 days")
	require.Contains(t, certsOf(t, renewed.Data[vocab.CACertKey]), certsOf(t, user.Cert)[0], "the user's CA is still trusted")
}

// A change of source that runs goes on only while spec.tls asks for it: set back to Auto
// in pass 2 (admission lets Provided to Auto through), it stalls rather than take the
// cluster's CA out of the trust bundle; the change back starts once this one is done.
func TestSourceChangeStallsWhenTheSpecNoLongerAsksForIt(t *testing.T) {
	f := autoTLS(t)
	f.reconcile()
	f.provideSecrets()
	f.update(toProvided)
	c, _ := f.reconcile()
	f.restartedAll(c.Status.TLS.Trust)
	c, _ = f.reconcile()
	require.Equal(t, "Issuing", c.Status.TLS.CARotation.Stage)
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto} })
	c, _ = f.reconcile()
	require.True(t, conditions.IsStalled(c))
	require.Equal(t, string(v1alpha1.ReasonTLSSourceChange), conditions.GetReason(c, meta.StalledCondition))
	require.Contains(t, conditions.GetMessage(c, meta.StalledCondition), "a change of source (Auto to Provided) runs, in pass 2")
	require.Len(t, certsOf(t, f.secret(vocab.TrustSecret("demo")).Data[vocab.CACertKey]), 2, "both CAs are still trusted")
}

// spec.tls from Provided to Auto: the cluster's CA and every certificate of it are issued
// at the first step, while members still serve the user's Secrets; the rest is the same
// three passes, the cluster's CA in the user's place.
func TestSourceChangeFromProvidedToAuto(t *testing.T) {
	f := newFixture(t, 3, toProvided)
	f.provideSecrets()
	c, _ := f.reconcile()
	require.Nil(t, c.Status.Plan)
	require.Equal(t, v1alpha1.TLSProvided, c.Status.TLS.InUse.ClientMode())
	f.update(func(c *v1alpha1.EtcdCluster) {
		c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto}
		c.Spec.Auth = &v1alpha1.AuthSpec{Users: []v1alpha1.AuthUser{{Name: "app"}}} // its certificate comes with Auto
	})
	var dialed *tls.Config
	f.r.Dial = func(eps map[string]string, cfg *tls.Config) (etcd.Cluster, error) {
		dialed = cfg
		return f.etcd.Dial(eps, cfg)
	}
	f.r.clients.forget(client.ObjectKeyFromObject(c))

	c, _ = f.reconcile()
	require.Equal(t, &v1alpha1.CARotationStatus{Source: "Provided to Auto", Stage: "Trusting", Pass: 1}, c.Status.TLS.CARotation)
	for _, name := range []string{vocab.CASecret("demo"), vocab.ServerSecret("demo"), vocab.OperatorSecret("demo"), vocab.ClientSecret("demo"),
		vocab.PeerSecret("demo-0"), vocab.PeerSecret("demo-1"), vocab.PeerSecret("demo-2")} {
		f.secret(name) // issued ahead
	}
	require.Len(t, certsOf(t, f.secret(vocab.TrustSecret("demo")).Data[vocab.CACertKey]), 2, "the user's CA and the cluster's")
	for _, name := range []string{vocab.ClientSecret("demo"), vocab.UserSecret("demo", "app")} {
		require.Len(t, certsOf(t, f.secret(name).Data[vocab.CACertKey]), 2, "%s trusts the members' certificates of either source", name)
	}
	require.Equal(t, "user CA", dialedAs(t, dialed), "the operator dials with the user's certificate in pass 1")
	cur := c.Status.Plan.Steps[c.Status.Plan.Current]
	require.Equal(t, plan.WhyTrustBoth, cur.Why)
	var p corev1.Pod
	require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: cur.Member}, &p))
	require.Equal(t, "srv", secretOf(&p, "server-tls"))
	require.Equal(t, vocab.TrustSecret("demo"), secretOf(&p, "trust"))

	f.restartedAll(c.Status.TLS.Trust)
	c, _ = f.reconcile()
	require.Equal(t, "Issuing", c.Status.TLS.CARotation.Stage)
	require.Equal(t, "ns/demo etcd CA", dialedAs(t, dialed), "the operator's own certificate from pass 2")
	cur = c.Status.Plan.Steps[c.Status.Plan.Current]
	require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: cur.Member}, &p))
	require.Equal(t, vocab.ServerSecret("demo"), secretOf(&p, "server-tls"))

	f.restartedAll(c.Status.TLS.Trust)
	c, _ = f.reconcile()
	require.Equal(t, "Retiring", c.Status.TLS.CARotation.Stage)
	require.Equal(t, certsOf(t, f.secret(vocab.CASecret("demo")).Data[vocab.TLSCertKey]), certsOf(t, f.secret(vocab.TrustSecret("demo")).Data[vocab.CACertKey]),
		"the cluster's CA alone")

	f.restartedAll(c.Status.TLS.Trust)
	f.reconcile()
	c, _ = f.reconcile()
	require.Nil(t, c.Status.TLS.CARotation)
	require.Nil(t, c.Status.Plan, "done")
}
