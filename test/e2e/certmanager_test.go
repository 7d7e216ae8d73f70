package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/test/framework"
)

// cert-manager runs on the stack for real: a self-signed CA, a CA Issuer from it, and leaves
// that chain to it, are re-issued when their spec changes and renewed before they expire.
func TestCertManagerIssuesFromACAIssuer(t *testing.T) {
	t.Parallel()
	start := time.Now()
	framework.InstallCertManager(t)
	t.Logf("cert-manager ready after %s", time.Since(start).Round(time.Millisecond))
	ns := framework.Namespace(t)

	// selfSigned Issuer -> isCA Certificate -> CA Issuer.
	start = time.Now()
	issuer := framework.CertManagerCAIssuer(t, ns, "etcd")
	t.Logf("CA Issuer ready after %s", time.Since(start).Round(time.Millisecond))
	ca := readSecretCert(t, ns, issuer.CASecret)
	require.True(t, ca.cert.IsCA, "the CA certificate is not a CA")
	require.NoError(t, ca.cert.CheckSignatureFrom(ca.cert), "the CA is not self-signed")
	require.Equal(t, ca.cert.Raw, ca.ca.Raw, "a self-signed CA's ca.crt is itself")

	// A leaf for a server that is a client too, and a short-lived one renewed while the
	// first is re-issued.
	names := []string{"etcd-0.etcd." + ns + ".svc", "etcd-client." + ns + ".svc", "localhost"}
	start = time.Now()
	framework.CreateCertificate(t, ns, "server", issuer, framework.CertificateSpec{
		SecretName: "server-tls", CommonName: "etcd-server", DNSNames: names, IPAddresses: []string{"127.0.0.1"},
		Usages: []string{"server auth", "client auth", "digital signature", "key encipherment"},
	})
	framework.WaitCertificate(t, ns, "server", 1, time.Minute)
	t.Logf("leaf issued after %s", time.Since(start).Round(time.Millisecond))
	framework.CreateCertificate(t, ns, "short", issuer, framework.CertificateSpec{
		SecretName: "short-tls", CommonName: "etcd-short", DNSNames: []string{"short." + ns + ".svc"},
		Usages:   []string{"client auth", "digital signature"},
		Duration: 3 * time.Minute, RenewBefore: 3*time.Minute - 20*time.Second,
	})
	leaf := readSecretCert(t, ns, "server-tls")
	requireLeaf(t, leaf, ca.cert, names)
	require.Equal(t, "etcd-server", leaf.cert.Subject.CommonName)
	require.Len(t, leaf.cert.IPAddresses, 1)
	require.True(t, leaf.cert.IPAddresses[0].Equal(net.ParseIP("127.0.0.1")), "IP SANs %v", leaf.cert.IPAddresses)

	// A new SAN re-issues the leaf: a new certificate and key from the same CA.
	start = time.Now()
	names = append(names, "etcd-1.etcd."+ns+".svc")
	// cert-manager writes the Certificate too (its status, and at times its metadata): an
	// update read before its write conflicts, and is read and made again.
	require.NoError(t, retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cert := &unstructured.Unstructured{}
		cert.SetGroupVersionKind(framework.CertificateGVK)
		if err := framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "server"}, cert); err != nil {
			return err
		}
		if err := unstructured.SetNestedStringSlice(cert.Object, names, "spec", "dnsNames"); err != nil {
			return err
		}
		return framework.Env.Client.Update(context.Background(), cert)
	}))
	framework.WaitCertificate(t, ns, "server", 2, time.Minute)
	t.Logf("leaf re-issued after %s", time.Since(start).Round(time.Millisecond))
	reissued := readSecretCert(t, ns, "server-tls")
	requireLeaf(t, reissued, ca.cert, names)
	require.NotEqual(t, leaf.cert.SerialNumber, reissued.cert.SerialNumber, "the same certificate after a new SAN")
	require.NotEqual(t, leaf.cert.PublicKey, reissued.cert.PublicKey, "the same key after a re-issue (rotationPolicy Always)")

	// The short-lived leaf is renewed 20 s after its issuance: a new serial, a later notAfter.
	first := framework.WaitCertificate(t, ns, "short", 1, time.Minute)
	short := readSecretCert(t, ns, "short-tls")
	requireLeafFor(t, short, ca.cert, []string{"short." + ns + ".svc"}, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	require.InDelta(t, (3 * time.Minute).Seconds(), short.cert.NotAfter.Sub(short.cert.NotBefore).Seconds(), 1)
	renewal, _, _ := unstructured.NestedString(first.Object, "status", "renewalTime")
	t.Logf("short leaf notBefore %s, renewalTime %s", short.cert.NotBefore.Format(time.RFC3339), renewal)
	rev, _, _ := unstructured.NestedInt64(first.Object, "status", "revision")
	framework.WaitCertificate(t, ns, "short", rev+1, 90*time.Second)
	t.Logf("short leaf renewed %s after its notBefore", time.Since(short.cert.NotBefore).Round(time.Second))
	renewed := readSecretCert(t, ns, "short-tls")
	requireLeafFor(t, renewed, ca.cert, []string{"short." + ns + ".svc"}, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth})
	require.NotEqual(t, short.cert.SerialNumber, renewed.cert.SerialNumber, "renewed with the same serial")
	require.True(t, renewed.cert.NotAfter.After(short.cert.NotAfter), "renewed notAfter %s, was %s", renewed.cert.NotAfter, short.cert.NotAfter)
}

// secretCert is a cert-manager Secret parsed: tls.crt's first certificate, ca.crt's.
type secretCert struct {
	cert *x509.Certificate
	ca   *x509.Certificate
}

// readSecretCert reads a cert-manager Secret and checks it has tls.crt, tls.key and ca.crt,
// and that the key is the certificate's.
func readSecretCert(t *testing.T, ns, name string) secretCert {
	t.Helper()
	s := &corev1.Secret{}
	require.NoError(t, framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s))
	require.Equal(t, corev1.SecretTypeTLS, s.Type, "Secret %s", name)
	for _, k := range []string{"tls.crt", "tls.key", "ca.crt"} {
		require.NotEmpty(t, s.Data[k], "Secret %s has no %s", name, k)
	}
	pair, err := tls.X509KeyPair(s.Data["tls.crt"], s.Data["tls.key"])
	require.NoError(t, err, "Secret %s: tls.key is not tls.crt's key", name)
	var out secretCert
	out.cert, err = x509.ParseCertificate(pair.Certificate[0])
	require.NoError(t, err)
	block, _ := pem.Decode(s.Data["ca.crt"])
	require.NotNil(t, block, "Secret %s: ca.crt is not PEM", name)
	out.ca, err = x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return out
}

// requireLeaf checks a server-and-client leaf: it chains to ca, has exactly the DNS names
// dnsNames, and both usages.
func requireLeaf(t *testing.T, s secretCert, ca *x509.Certificate, dnsNames []string) {
	t.Helper()
	requireLeafFor(t, s, ca, dnsNames, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth})
}

func requireLeafFor(t *testing.T, s secretCert, ca *x509.Certificate, dnsNames []string, usages []x509.ExtKeyUsage) {
	t.Helper()
	require.False(t, s.cert.IsCA, "a leaf is a CA")
	require.Equal(t, ca.Raw, s.ca.Raw, "ca.crt is not the CA Issuer's certificate")
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	for _, u := range usages {
		_, err := s.cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{u}})
		require.NoError(t, err, "the leaf does not chain to the CA for usage %v", u)
	}
	require.ElementsMatch(t, dnsNames, s.cert.DNSNames)
	require.ElementsMatch(t, usages, s.cert.ExtKeyUsage)
	require.NotZero(t, s.cert.KeyUsage&x509.KeyUsageDigitalSignature, "no digitalSignature key usage")
	for _, n := range dnsNames {
		require.NoError(t, s.cert.VerifyHostname(n))
	}
}

// A CA ClusterIssuer (its CA Secret in cert-manager's namespace) issues into any namespace.
func TestCertManagerIssuesFromACAClusterIssuer(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	issuer := framework.CertManagerCAClusterIssuer(t, "ca-"+ns)
	require.Equal(t, "ClusterIssuer", issuer.Kind)
	names := []string{"etcd-client." + ns + ".svc"}
	framework.CreateCertificate(t, ns, "client", issuer, framework.CertificateSpec{
		SecretName: "client-tls", CommonName: "etcd-client", DNSNames: names,
		Usages: []string{"server auth", "client auth", "digital signature"},
	})
	framework.WaitCertificate(t, ns, "client", 1, time.Minute)
	ca := &corev1.Secret{}
	require.NoError(t, framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: framework.CertManagerNamespace, Name: issuer.CASecret}, ca))
	block, _ := pem.Decode(ca.Data["tls.crt"])
	require.NotNil(t, block)
	caCert, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	requireLeaf(t, readSecretCert(t, ns, "client-tls"), caCert, names)
}
