package pki

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

func newCA(t *testing.T, name string, validity time.Duration) KeyPair {
	t.Helper()
	ca, err := NewCA(name, t0, validity)
	require.NoError(t, err)
	return ca
}

func TestIssuedLeafIsSignedByItsCAWithItsUsages(t *testing.T) {
	ca := newCA(t, "demo-ca", 365*24*time.Hour)
	leaf, err := Issue(ca, Request{CommonName: "demo-server", DNSNames: []string{"demo-0.demo.ns.svc"},
		IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true, Client: true, NotBefore: t0, Validity: time.Hour})
	require.NoError(t, err)

	f, err := Read(leaf.Cert)
	require.NoError(t, err)
	require.Equal(t, "demo-server", f.Subject)
	require.Equal(t, "demo-ca", f.Issuer)
	require.Equal(t, []string{"demo-0.demo.ns.svc"}, f.DNSNames)
	require.False(t, f.IsCA)
	require.Equal(t, t0.Add(-backdate), f.NotBefore)
	require.Equal(t, t0.Add(time.Hour), f.NotAfter)

	certs, err := Certificates(leaf.Cert)
	require.NoError(t, err)
	pool, err := Pool(ca.Cert)
	require.NoError(t, err)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		_, err = certs[0].Verify(x509.VerifyOptions{DNSName: "demo-0.demo.ns.svc", Roots: pool,
			CurrentTime: t0.Add(time.Minute), KeyUsages: []x509.ExtKeyUsage{usage}})
		require.NoError(t, err, "usage %v", usage)
	}
	_, err = certs[0].Verify(x509.VerifyOptions{DNSName: "demo-1.demo.ns.svc", Roots: pool, CurrentTime: t0.Add(time.Minute)})
	require.Error(t, err, "a name the certificate does not carry")
}

func TestClientOnlyLeafIsNoServer(t *testing.T) {
	ca := newCA(t, "demo-ca", 24*time.Hour)
	leaf, err := Issue(ca, Request{CommonName: "app", Client: true, NotBefore: t0, Validity: time.Hour})
	require.NoError(t, err)
	certs, err := Certificates(leaf.Cert)
	require.NoError(t, err)
	pool, err := Pool(ca.Cert)
	require.NoError(t, err)
	_, err = certs[0].Verify(x509.VerifyOptions{Roots: pool, CurrentTime: t0, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	require.Error(t, err)

	_, err = Issue(ca, Request{CommonName: "nothing", NotBefore: t0, Validity: time.Hour})
	require.ErrorContains(t, err, "server or client usage")
	_, err = Issue(ca, Request{CommonName: "never", Client: true, NotBefore: t0})
	require.ErrorContains(t, err, "not positive")
}

func TestLeafEndsNoLaterThanItsCA(t *testing.T) {
	ca := newCA(t, "short-ca", time.Hour)
	leaf, err := Issue(ca, Request{CommonName: "long", Client: true, NotBefore: t0, Validity: 24 * time.Hour})
	require.NoError(t, err)
	f, err := Read(leaf.Cert)
	require.NoError(t, err)
	require.Equal(t, t0.Add(time.Hour), f.NotAfter)
}

func TestRenewAtTwoThirdsOfLife(t *testing.T) {
	f := Facts{NotBefore: t0, NotAfter: t0.Add(90 * time.Minute)}
	require.Equal(t, t0.Add(time.Hour), f.RenewAt())
}

func TestBundleHashIgnoresOrderAndSpacing(t *testing.T) {
	a, b := newCA(t, "old", time.Hour), newCA(t, "new", time.Hour)
	ab, err := BundleHash(Bundle(a.Cert, b.Cert))
	require.NoError(t, err)
	ba, err := BundleHash(Bundle(b.Cert, a.Cert, b.Cert))
	require.NoError(t, err)
	require.Equal(t, ab, ba)
	onlyB, err := BundleHash(Bundle(b.Cert))
	require.NoError(t, err)
	require.NotEqual(t, ab, onlyB)

	certs, err := Certificates(Bundle(a.Cert, b.Cert, a.Cert))
	require.NoError(t, err)
	require.Len(t, certs, 2, "each CA once")
	_, err = BundleHash([]byte("not PEM"))
	require.Error(t, err)
}

func TestClientConfigPresentsItsCertificate(t *testing.T) {
	ca := newCA(t, "demo-ca", time.Hour)
	leaf, err := Issue(ca, Request{CommonName: "root", Client: true, NotBefore: t0, Validity: time.Hour})
	require.NoError(t, err)
	cfg, err := ClientConfig(leaf, ca.Cert)
	require.NoError(t, err)
	require.Len(t, cfg.Certificates, 1)
	require.GreaterOrEqual(t, cfg.MinVersion, uint16(tls.VersionTLS12))
	_, err = ClientConfig(KeyPair{Cert: leaf.Cert, Key: ca.Key}, ca.Cert)
	require.Error(t, err, "a key that is not the certificate's")
}
