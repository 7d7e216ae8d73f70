package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/pki"
	"github.com/etcdplan/etcdplan/test/framework"
)

// The cluster's own CA rotated live, asked by kubectl etcd rotate-ca, a writer running
// throughout as an application that reads its client Secret again when it changes (as a
// mounted Secret volume is): the new CA trusted beside the old, every certificate issued
// again from it, the old CA trusted no more. Every acknowledged write is there, and the
// members serve certificates of the new CA and trust it alone.
func TestCARotatedLive(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto} })
	phase := phases(t)
	oldCA := secret(t, ns, vocab.CASecret("demo")).Data[vocab.TLSCertKey]
	w := startWriterWith(t, ns, "demo", followingTLS(t, ns))
	w.waitAcked()

	code, _, _ := kubectlEtcd(t, ns, "rotate-ca", "demo", "--id", "e2e")
	require.Equal(t, 0, code)
	c := framework.WaitFor(t, ns, "demo", time.Minute, "the rotation's plan", func(c *v1alpha1.EtcdCluster) bool {
		return c.Status.Plan != nil && c.Status.Plan.Steps[0].Action == plan.RotateCA && c.Status.TLS.CARotation != nil
	})
	t.Logf("plan %s: %d steps", c.Status.Plan.ID, len(c.Status.Plan.Steps))
	passes := map[int32]bool{}
	framework.WaitFor(t, ns, "demo", 3*time.Minute, "the rotation done", func(c *v1alpha1.EtcdCluster) bool {
		if r := c.Status.TLS.CARotation; r != nil && !passes[r.Pass] {
			passes[r.Pass] = true
			phase(fmt.Sprintf("until pass %d began", r.Pass))
		}
		return framework.Ready(c) && c.Status.Plan == nil && c.Status.TLS.CARotation == nil && c.Status.ReadyReplicas == 3
	})
	phase("until the rotation was done")
	w.stopAndVerify()
	t.Logf("the writer during the rotation: %d writes failed, the slowest took %v", w.failed, w.maxLat)
	require.Equal(t, map[int32]bool{1: true, 2: true, 3: true}, passes)

	ca := secret(t, ns, vocab.CASecret("demo"))
	require.NotEqual(t, oldCA, ca.Data[vocab.TLSCertKey])
	require.Empty(t, ca.Data[vocab.PreviousCertKey])
	trusted, err := pki.Certificates(secret(t, ns, vocab.TrustSecret("demo")).Data[vocab.CACertKey])
	require.NoError(t, err)
	require.Len(t, trusted, 1, "the new CA alone is trusted")
	c = framework.Get(t, ns, "demo")
	for _, p := range framework.MemberPods(t, ns, "demo") {
		require.Equal(t, c.Status.TLS.Trust, p.Annotations[vocab.AnnotationTrust], "%s started with the new CA alone", p.Name)
	}
	newCA, err := pki.Certificates(ca.Data[vocab.TLSCertKey])
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(newCA[0])
	cfg := &tls.Config{RootCAs: pool, ServerName: "demo-client." + ns + ".svc", MinVersion: tls.VersionTLS12}
	for _, ep := range framework.EndpointsAs(t, ns, "demo", true) {
		conn, err := tls.Dial("tcp", ep[len("https://"):], cfg)
		require.NoError(t, err, "%s serves a certificate of the new CA", ep)
		require.NoError(t, conn.Close())
	}
	requireNoSecretLeak(t, ns) // the old CA's key, the new one's and every leaf's among them
}

func secret(t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	require.NoError(t, framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s))
	return s
}

// followingTLS is the TLS of an application that mounts the cluster's client Secret and
// reads it again when it changes: each handshake presents the certificate the Secret holds
// and checks the member's against its ca.crt, as read at most a second before.
func followingTLS(t *testing.T, ns string) *tls.Config {
	var mu sync.Mutex
	var read time.Time
	var s *corev1.Secret
	current := func() *corev1.Secret {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(read) > time.Second {
			fresh := &corev1.Secret{}
			if err := framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: vocab.ClientSecret("demo")}, fresh); err == nil {
				s, read = fresh, time.Now()
			}
		}
		return s
	}
	require.NotNil(t, current())
	name := "demo-client." + ns + ".svc"
	return &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: true, // checked in VerifyConnection, against the bundle as it is now
		GetClientCertificate: func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			s := current()
			cert, err := tls.X509KeyPair(s.Data[vocab.TLSCertKey], s.Data[vocab.TLSKeyKey])
			return &cert, err
		},
		VerifyConnection: func(cs tls.ConnectionState) error {
			pool, err := pki.Pool(current().Data[vocab.CACertKey])
			if err != nil || len(cs.PeerCertificates) == 0 {
				return errors.Join(err, errors.New("no certificate"))
			}
			inter := x509.NewCertPool()
			for _, c := range cs.PeerCertificates[1:] {
				inter.AddCert(c)
			}
			_, err = cs.PeerCertificates[0].Verify(x509.VerifyOptions{DNSName: name, Roots: pool, Intermediates: inter})
			return err
		},
	}
}
