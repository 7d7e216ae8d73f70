package certs

import (
	"context"
	"crypto/x509"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/pki"
	"github.com/etcdplan/etcdplan/executor/status"
	"github.com/etcdplan/etcdplan/planner"
)

var now = time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)

func cluster(t *v1alpha1.TLSSpec) *v1alpha1.EtcdCluster {
	c := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns", UID: "uid-demo"}}
	c.Spec.TLS = t
	return c
}

func keeper(t *testing.T, objs ...client.Object) (Keeper, client.Client) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()
	return Keeper{Client: kube, Reader: kube}, kube
}

func secret(t *testing.T, kube client.Client, name string) *corev1.Secret {
	s := &corev1.Secret{}
	require.NoError(t, kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, s))
	return s
}

func leafOf(t *testing.T, s *corev1.Secret) *x509.Certificate {
	certs, err := pki.Certificates(s.Data[vocab.TLSCertKey])
	require.NoError(t, err)
	return certs[0]
}

// Auto issues the cluster's CA and, from it, the server, operator and application
// certificates once, owned by the cluster; a second look issues nothing new.
func TestAutoIssuesOnceFromTheClustersCA(t *testing.T) {
	c := cluster(&v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto, CertificateValidity: &metav1.Duration{Duration: time.Hour}})
	k, kube := keeper(t, c)
	st, err := k.Ensure(context.Background(), c, nil, now)
	require.NoError(t, err)
	require.NotNil(t, st.Operator)
	require.Equal(t, "demo-client.ns.svc", st.Operator.ServerName)
	require.Equal(t, vocab.ClientSecret("demo"), st.Status.ClientSecretName)
	require.Equal(t, "https://demo-client.ns.svc:2379", st.Status.ClientURL)
	require.Len(t, st.Status.Certificates, 4)

	ca := secret(t, kube, vocab.CASecret("demo"))
	require.True(t, metav1.IsControlledBy(ca, c))
	pool, err := pki.Pool(ca.Data[vocab.TLSCertKey])
	require.NoError(t, err)
	server := leafOf(t, secret(t, kube, vocab.ServerSecret("demo")))
	_, err = server.Verify(x509.VerifyOptions{DNSName: "demo-7.demo.ns.svc", Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	require.NoError(t, err, "the server certificate names every member")
	_, err = server.Verify(x509.VerifyOptions{DNSName: "demo-client.ns.svc", Roots: pool, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	require.NoError(t, err, "and the client Service, with client usage for etcd's gateway")
	require.Equal(t, now.Add(time.Hour), server.NotAfter)
	op := leafOf(t, secret(t, kube, vocab.OperatorSecret("demo")))
	require.Equal(t, OperatorCommonName, op.Subject.CommonName)
	require.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, op.ExtKeyUsage)

	again, err := k.Ensure(context.Background(), c, nil, now.Add(time.Minute))
	require.NoError(t, err)
	require.Equal(t, st.Version, again.Version)
	require.Equal(t, server.SerialNumber, leafOf(t, secret(t, kube, vocab.ServerSecret("demo"))).SerialNumber)
}

// A member's peer certificate names that member alone, and is issued once.
func TestPeerCertificateNamesItsMember(t *testing.T) {
	c := cluster(&v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto})
	k, kube := keeper(t, c)
	_, err := k.Ensure(context.Background(), c, nil, now)
	require.NoError(t, err)
	require.NoError(t, k.EnsurePeer(context.Background(), c, "demo-3", now))
	peer := leafOf(t, secret(t, kube, vocab.PeerSecret("demo-3")))
	require.Equal(t, []string{"demo-3.demo.ns.svc", "demo-3.demo.ns.svc.cluster.local"}, peer.DNSNames)
	require.ElementsMatch(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, peer.ExtKeyUsage)
	require.NoError(t, k.EnsurePeer(context.Background(), c, "demo-3", now.Add(time.Hour)))
	require.Equal(t, peer.SerialNumber, leafOf(t, secret(t, kube, vocab.PeerSecret("demo-3"))).SerialNumber)
}

// Client TLS alone issues no peer certificate; plain text reads nothing.
func TestSidesAreIndependent(t *testing.T) {
	c := cluster(&v1alpha1.TLSSpec{Mode: v1alpha1.TLSDisabled, Client: &v1alpha1.TLSSideSpec{Mode: v1alpha1.TLSAuto}})
	k, kube := keeper(t, c)
	_, err := k.Ensure(context.Background(), c, nil, now)
	require.NoError(t, err)
	require.NoError(t, k.EnsurePeer(context.Background(), c, "demo-0", now))
	require.Error(t, kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: vocab.PeerSecret("demo-0")}, &corev1.Secret{}))

	plain := cluster(nil)
	k, _ = keeper(t, plain)
	st, err := k.Ensure(context.Background(), plain, nil, now)
	require.NoError(t, err)
	require.Nil(t, st.Operator)
	require.Nil(t, st.Status)
}

// Provided reads the user's Secrets: one missing or without a key stalls the cluster with
// a reason that names it; a Secret of the operator's name that is not the cluster's is
// never taken over.
func TestSecretsThatCannotBeUsedAreNamed(t *testing.T) {
	c := cluster(&v1alpha1.TLSSpec{Mode: v1alpha1.TLSProvided, ServerSecretName: "srv", PeerSecretName: "peer", ClientSecretName: "op"})
	k, _ := keeper(t, c, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "srv", Namespace: "ns"},
		Data: map[string][]byte{vocab.TLSCertKey: []byte("x")}})
	_, err := k.Ensure(context.Background(), c, nil, now)
	requireStuck(t, err, v1alpha1.ReasonTLSSecretInvalid, "Secret srv has no tls.key")

	k, _ = keeper(t, c)
	_, err = k.Ensure(context.Background(), c, nil, now)
	requireStuck(t, err, v1alpha1.ReasonTLSSecretNotFound, "Secret srv does not exist")

	auto := cluster(&v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto})
	k, _ = keeper(t, auto, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: vocab.CASecret("demo"), Namespace: "ns"}})
	_, err = k.Ensure(context.Background(), auto, nil, now)
	requireStuck(t, err, v1alpha1.ReasonTLSSecretInvalid, "is not this cluster's")

	auto.Status.ClusterID = "c1"
	k, kube := keeper(t, auto, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: vocab.PeerSecret("demo-1"), Namespace: "ns"}})
	_, err = k.Ensure(context.Background(), auto, []string{"demo-0", "demo-1"}, now)
	requireStuck(t, err, v1alpha1.ReasonTLSSecretNotFound, "the CA the members trust, is gone")
	require.Error(t, kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: vocab.CASecret("demo")}, &corev1.Secret{}),
		"no new CA is made for a cluster that formed and was issued certificates")

	k, kube = keeper(t, auto)
	_, err = k.Ensure(context.Background(), auto, []string{"demo-0", "demo-1"}, now)
	require.NoError(t, err, "TLS switched on for a running cluster: no certificate was ever issued")
	require.NoError(t, kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: vocab.CASecret("demo")}, &corev1.Secret{}))
}

func requireStuck(t *testing.T, err error, reason v1alpha1.StalledReason, msg string) {
	t.Helper()
	var se *status.StepError
	require.True(t, errors.As(err, &se), "%v", err)
	require.Equal(t, string(reason), se.Reason)
	require.Contains(t, se.Msg, msg)
}

// A certificate due for renewal is issued again from the same CA, once; one that members
// mount is marked unserved with its new serial until they serve it. A Secret the operator
// does not issue is never renewed.
func TestRenewIssuesOnceFromTheSameCA(t *testing.T) {
	c := cluster(&v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto, CertificateValidity: &metav1.Duration{Duration: 30 * time.Minute}})
	k, kube := keeper(t, c)
	st, err := k.Ensure(context.Background(), c, []string{"demo-0"}, now)
	require.NoError(t, err)
	require.Empty(t, st.Renewals)
	require.NoError(t, k.EnsurePeer(context.Background(), c, "demo-0", now))
	later := now.Add(21 * time.Minute) // past two thirds of 30 minutes
	st, err = k.Ensure(context.Background(), c, []string{"demo-0"}, later)
	require.NoError(t, err)
	require.Equal(t, []planner.Renewal{{Secret: "demo-server-tls", Mounted: true}, {Secret: "demo-operator-tls"}, {Secret: "demo-client-tls"},
		{Secret: "demo-0-peer-tls", Mounted: true}}, st.Renewals, "members mount the server and peer certificates")

	old := leafOf(t, secret(t, kube, vocab.ServerSecret("demo")))
	require.NoError(t, k.Renew(context.Background(), c, vocab.ServerSecret("demo"), later))
	s := secret(t, kube, vocab.ServerSecret("demo"))
	renewed := leafOf(t, s)
	require.NotEqual(t, old.SerialNumber, renewed.SerialNumber)
	require.Equal(t, old.DNSNames, renewed.DNSNames)
	require.Equal(t, old.Issuer.CommonName, renewed.Issuer.CommonName, "from the same CA")
	require.Equal(t, pki.FactsOf(renewed).Serial, s.Annotations[vocab.AnnotationUnserved])
	require.NoError(t, k.Renew(context.Background(), c, vocab.ServerSecret("demo"), later.Add(time.Second)))
	require.Equal(t, renewed.SerialNumber, leafOf(t, secret(t, kube, vocab.ServerSecret("demo"))).SerialNumber, "renewed once")

	st, err = k.Ensure(context.Background(), c, nil, later)
	require.NoError(t, err)
	require.Contains(t, st.Renewals, planner.Renewal{Secret: "demo-server-tls", Unserved: true, Mounted: true})
	require.NoError(t, k.Served(context.Background(), c, vocab.ServerSecret("demo"), nil), "no member runs to serve it")
	require.NotContains(t, secret(t, kube, vocab.ServerSecret("demo")).Annotations, vocab.AnnotationUnserved)

	require.NoError(t, k.Renew(context.Background(), c, vocab.OperatorSecret("demo"), later))
	require.NotContains(t, secret(t, kube, vocab.OperatorSecret("demo")).Annotations, vocab.AnnotationUnserved, "no member mounts it")
	requireStuck(t, k.Renew(context.Background(), c, "someone-elses", later), v1alpha1.ReasonTLSSecretInvalid, "not one the operator issues")

	users := secret(t, kube, vocab.ClientSecret("demo"))
	users.OwnerReferences = nil
	require.NoError(t, kube.Update(context.Background(), users))
	requireStuck(t, k.Renew(context.Background(), c, vocab.ClientSecret("demo"), later.Add(time.Hour)), v1alpha1.ReasonTLSSecretInvalid, "renews only what it issued")
}

// The trust Secret holds the cluster's CA; a CA renewed in its Secret (as cert-manager
// renews one) is added beside the earlier one, never in its place.
func TestTrustKeepsEveryCAItHeld(t *testing.T) {
	c := cluster(&v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto})
	k, kube := keeper(t, c)
	_, err := k.Ensure(context.Background(), c, nil, now)
	require.NoError(t, err)
	trusted := func() []*x509.Certificate {
		certs, err := pki.Certificates(secret(t, kube, vocab.TrustSecret("demo")).Data[vocab.CACertKey])
		require.NoError(t, err)
		return certs
	}
	first := trusted()
	require.Len(t, first, 1)
	require.True(t, first[0].Equal(leafOf(t, secret(t, kube, vocab.CASecret("demo")))))

	renewed, err := pki.NewCA("demo renewed", now, time.Hour)
	require.NoError(t, err)
	ca := secret(t, kube, vocab.CASecret("demo"))
	ca.Data[vocab.TLSCertKey], ca.Data[vocab.TLSKeyKey] = renewed.Cert, renewed.Key
	require.NoError(t, kube.Update(context.Background(), ca))
	for range 2 {
		_, err = k.Ensure(context.Background(), c, nil, now)
		require.NoError(t, err)
		both := trusted()
		require.Len(t, both, 2)
		require.True(t, both[0].Equal(first[0]), "the earlier CA stays trusted")
	}
}
