package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/pki"
	"github.com/etcdplan/etcdplan/test/framework"
)

// A running cluster's TLS moved from Auto to the user's Secrets, a writer running
// throughout as an application that moves to a certificate of the user's CA in pass 2, as
// docs/security.md asks: the user's CA trusted beside the cluster's, members restarted onto
// the user's Secrets, the cluster's CA trusted no more. Every acknowledged write is there,
// and the members serve the user's certificates and trust the user's CA alone.
func TestTLSSourceChangedLive(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto} })
	changeSourceLive(t, ns, "Auto to Provided")
}

// The other way: from the user's Secrets to the cluster's own CA, which the operator makes,
// with every certificate of it, at the change's first step.
func TestTLSSourceChangedLiveFromProvidedToAuto(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	userCA := provideUserSecrets(t, ns)
	framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = userTLS() })
	phase := phases(t)
	w := startWriterWith(t, ns, "demo", movingTLS(t, ns, "app", vocab.ClientSecret("demo"), v1alpha1.TLSAuto, userCA.Cert))
	w.waitAcked()

	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto} })
	waitForSourceChange(t, ns, "Provided to Auto", phase)
	w.stopAndVerify()
	t.Logf("the writer during the change of source: %d writes failed, the slowest took %v", w.failed, w.maxLat)

	ca := secret(t, ns, vocab.CASecret("demo")).Data[vocab.TLSCertKey]
	trusted := secret(t, ns, vocab.TrustSecret("demo")).Data[vocab.CACertKey]
	requireServedFrom(t, ns, vocab.ServerSecret("demo"), ca, trusted)
	requireNoSecretLeak(t, ns)
}

// userTLS is spec.tls of the user's Secrets provideUserSecrets writes.
func userTLS() *v1alpha1.TLSSpec {
	return &v1alpha1.TLSSpec{Mode: v1alpha1.TLSProvided, ServerSecretName: "srv", PeerSecretName: "peer", ClientSecretName: "op"}
}

// The same from cert-manager's certificates (the cluster's CA issued from the user's CA
// Issuer) to the user's Secrets of another CA.
func TestTLSSourceChangedLiveFromCertManager(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	org := framework.CertManagerCAIssuer(t, ns, "org")
	framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) {
		c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSCertManager, IssuerRef: &v1alpha1.IssuerReference{Name: org.Name, Kind: org.Kind}}
	})
	changeSourceLive(t, ns, "CertManager to Provided")
}

// changeSourceLive moves the running cluster "demo" to the user's Secrets with a writer
// running, and checks what TestTLSSourceChangedLive says.
func changeSourceLive(t *testing.T, ns, words string) {
	phase := phases(t)
	ownCA := secret(t, ns, vocab.CASecret("demo")).Data[vocab.TLSCertKey]
	userCA := provideUserSecrets(t, ns)
	w := startWriterWith(t, ns, "demo", movingTLS(t, ns, vocab.ClientSecret("demo"), "app", v1alpha1.TLSProvided, ownCA, userCA.Cert))
	w.waitAcked()

	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = userTLS() })
	waitForSourceChange(t, ns, words, phase)
	w.stopAndVerify()
	t.Logf("the writer during the change of source: %d writes failed, the slowest took %v", w.failed, w.maxLat)
	requireServedFrom(t, ns, "srv", userCA.Cert, secret(t, ns, vocab.TrustSecret("demo")).Data[vocab.CACertKey])
	requireNoSecretLeak(t, ns)
}

// waitForSourceChange waits for the change of source's plan and for its end, each pass
// seen on the way.
func waitForSourceChange(t *testing.T, ns, words string, phase func(string)) {
	t.Helper()
	c := framework.WaitFor(t, ns, "demo", time.Minute, "the change's plan", func(c *v1alpha1.EtcdCluster) bool {
		return c.Status.Plan != nil && c.Status.Plan.Steps[0].Action == plan.RotateCA && c.Status.TLS.CARotation != nil
	})
	require.Equal(t, words, c.Status.TLS.CARotation.Source)
	t.Logf("plan %s: %d steps", c.Status.Plan.ID, len(c.Status.Plan.Steps))
	passes := map[int32]bool{}
	framework.WaitFor(t, ns, "demo", 4*time.Minute, "the change done", func(c *v1alpha1.EtcdCluster) bool {
		if r := c.Status.TLS.CARotation; r != nil && !passes[r.Pass] {
			passes[r.Pass] = true
			phase(fmt.Sprintf("until pass %d began", r.Pass))
		}
		return framework.Ready(c) && c.Status.Plan == nil && c.Status.TLS.CARotation == nil && c.Status.ReadyReplicas == 3
	})
	phase("until the change was done")
	require.Equal(t, map[int32]bool{1: true, 2: true, 3: true}, passes)
}

// requireServedFrom checks that every member serves the certificate of the Secret server,
// that the trust Secret holds one CA, and that every member's certificate is of ca.
func requireServedFrom(t *testing.T, ns, server string, ca, trusted []byte) {
	t.Helper()
	for _, p := range framework.MemberPods(t, ns, "demo") {
		for _, v := range p.Spec.Volumes {
			if v.Name == "server-tls" {
				require.Equal(t, server, v.Secret.SecretName, "%s serves %s", p.Name, server)
			}
		}
	}
	certs, err := pki.Certificates(trusted)
	require.NoError(t, err)
	require.Len(t, certs, 1, "one CA alone is trusted")
	pool, err := pki.Pool(ca)
	require.NoError(t, err)
	cfg := &tls.Config{RootCAs: pool, ServerName: "demo-client." + ns + ".svc", MinVersion: tls.VersionTLS12}
	for _, ep := range framework.EndpointsAs(t, ns, "demo", true) {
		conn, err := tls.Dial("tcp", ep[len("https://"):], cfg)
		require.NoError(t, err, "%s serves a certificate of the CA it moved to", ep)
		require.NoError(t, conn.Close())
	}
}

// provideUserSecrets writes the Secrets of mode Provided from a CA of the user's: the
// members' server certificate "srv", their peer certificate "peer" (every member's name),
// the operator's "op" and an application's "app", each with the CA in ca.crt.
func provideUserSecrets(t *testing.T, ns string) pki.KeyPair {
	t.Helper()
	now := time.Now()
	ca, err := pki.NewCA("user CA", now, 24*time.Hour)
	require.NoError(t, err)
	svc := "demo-client"
	var peers []string
	for i := range 6 {
		host := vocab.MemberHost("demo", ns, vocab.MemberName("demo", i))
		peers = append(peers, host, host+".cluster.local")
	}
	for name, r := range map[string]pki.Request{
		"srv": {CommonName: "demo server", DNSNames: []string{"*.demo." + ns + ".svc", svc, svc + "." + ns, svc + "." + ns + ".svc",
			svc + "." + ns + ".svc.cluster.local", "localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, Server: true, Client: true},
		"peer": {CommonName: "demo peer", DNSNames: peers, Server: true, Client: true},
		"op":   {CommonName: "etcdplan-operator", Client: true},
		"app":  {CommonName: "app", Client: true},
	} {
		r.NotBefore, r.Validity = now, 12*time.Hour
		leaf, err := pki.Issue(ca, r)
		require.NoError(t, err)
		require.NoError(t, framework.Env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Type: corev1.SecretTypeTLS, Data: map[string][]byte{vocab.TLSCertKey: leaf.Cert, vocab.TLSKeyKey: leaf.Key, vocab.CACertKey: ca.Cert}}))
	}
	return ca
}

// movingTLS is the TLS of an application that trusts both CAs throughout and moves from
// the client certificate in Secret from to the one in Secret to once pass 2 of the change to
// the source target began (it looks at most a second before each handshake).
func movingTLS(t *testing.T, ns, from, to string, target v1alpha1.TLSMode, cas ...[]byte) *tls.Config {
	before := secret(t, ns, from)
	var after *corev1.Secret // the Secret to, once it exists: its ca.crt is trusted at once
	moved := false
	var mu sync.Mutex
	var looked time.Time
	current := func() (*corev1.Secret, *x509.CertPool) {
		mu.Lock()
		defer mu.Unlock()
		if !moved && time.Since(looked) > time.Second {
			looked = time.Now()
			s := &corev1.Secret{}
			if framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: to}, s) == nil {
				after = s
			}
			c := &v1alpha1.EtcdCluster{}
			if err := framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo"}, c); err == nil && c.Status.TLS != nil {
				r := c.Status.TLS.CARotation
				moved = after != nil && (r != nil && r.Source != "" && r.Pass >= 2 || r == nil && c.Status.TLS.InUse.ClientMode() == target)
			}
		}
		s, bundles := before, append([][]byte{}, cas...)
		if after != nil {
			bundles = append(bundles, after.Data[vocab.CACertKey])
		}
		if moved {
			s = after
		}
		pool, _ := pki.Pool(pki.Bundle(bundles...))
		return s, pool
	}
	name := "demo-client." + ns + ".svc"
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // checked in VerifyConnection, against both CAs
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			s, _ := current()
			cert, err := tls.X509KeyPair(s.Data[vocab.TLSCertKey], s.Data[vocab.TLSKeyKey])
			return &cert, err
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			_, pool := current()
			if len(cs.PeerCertificates) == 0 || pool == nil {
				return errors.New("no certificate, or no CA to check it against")
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: name, Roots: pool})
			return err
		},
	}
}
