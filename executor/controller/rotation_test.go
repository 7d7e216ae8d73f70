package controller

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/pki"
)

func (f *fixture) secret(name string) *corev1.Secret {
	s := &corev1.Secret{}
	require.NoError(f.t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: name}, s))
	return s
}

// trustAll records on every member Pod that it mounted the trust bundles a Pod started now
// would, as if each had restarted.
func (f *fixture) trustAll(trust string) {
	for i := range 3 {
		p := &corev1.Pod{}
		require.NoError(f.t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: vocab.MemberName("demo", i)}, p))
		p.Annotations[vocab.AnnotationTrust] = trust
		require.NoError(f.t, f.kube.Update(context.Background(), p))
	}
}

// certsOf are the certificates of a PEM bundle, by their subject's common name.
func certsOf(t *testing.T, bundle []byte) []string {
	certs, err := pki.Certificates(bundle)
	require.NoError(t, err)
	var out []string
	for _, c := range certs {
		out = append(out, c.SerialNumber.String())
	}
	return out
}

// The annotation etcdplan.io/rotate-ca starts a rotation of the cluster's CA, which the
// executor drives through the CA Secret's stages: the new CA trusted beside the old one,
// members restarted to read it; the new CA issuing, every certificate issued again; the old
// CA out of the trust bundle, members restarted; the old CA dropped. Each pass starts only
// once every member's Pod records the trust bundles a new Pod mounts.
func TestCARotationDrivesTheCASecretThroughItsStages(t *testing.T) {
	f := autoTLS(t)
	c, _ := f.reconcile()
	require.Nil(t, c.Status.Plan, "converged: Pods of an earlier version record no trust bundle, and nothing restarts for it")
	require.Nil(t, c.Status.TLS.CARotation)
	old := f.secret(vocab.CASecret("demo")).Data[vocab.TLSCertKey]

	f.update(func(c *v1alpha1.EtcdCluster) {
		c.Annotations = map[string]string{v1alpha1.AnnotationRotateCA: "2026-11"}
	})
	c, _ = f.reconcile()
	steps := c.Status.Plan.Steps
	require.Equal(t, plan.RotateCA, steps[0].Action)
	require.Equal(t, plan.WhyCANew, steps[0].Why)
	require.Equal(t, plan.WhyTrustBoth, steps[1].Why)
	require.Equal(t, int32(1), c.Status.Plan.Current, "the new CA is made and trusted at once; the first member restarts")
	require.Equal(t, &v1alpha1.CARotationStatus{Requested: "2026-11", Stage: "Trusting", Pass: 1}, c.Status.TLS.CARotation)
	ca := f.secret(vocab.CASecret("demo"))
	require.Equal(t, old, ca.Data[vocab.TLSCertKey], "the old CA issues until every member trusts the new one")
	require.Equal(t, "2026-11", ca.Annotations[vocab.AnnotationCARotation])
	trust := f.secret(vocab.TrustSecret("demo")).Data[vocab.CACertKey]
	require.Len(t, certsOf(t, trust), 2, "the trust bundle holds the old and the new CA")
	require.Len(t, certsOf(t, f.secret(vocab.ClientSecret("demo")).Data[vocab.CACertKey]), 2,
		"applications trust both before a member serves a certificate of the new CA")
	var p corev1.Pod
	require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: steps[1].Member}, &p))
	require.Equal(t, c.Status.TLS.Trust, p.Annotations[vocab.AnnotationTrust], "the restarted Pod records the bundles it mounts: %v %+v", p.Annotations, c.Status.Plan.Progress)
	require.Contains(t, p.Spec.InitContainers[0].Command, "--trust="+c.Status.TLS.Trust, "its preflight waits for those bundles")
	require.Contains(t, p.Spec.InitContainers[0].Command, "--trust-files=/etc/etcd/tls/trust/ca.crt,/etc/etcd/tls/trust/ca.crt")
	h, err := pki.BundleHash(trust)
	require.NoError(t, err)
	require.Equal(t, h+"."+h, c.Status.TLS.Trust, "client and peer side, each the trust Secret")

	// Pass 2 once every member trusts both: the new CA issues, every certificate is issued
	// again from it, and the members that mount one are awaited (no member serves TLS in
	// this fixture: the step waits).
	f.trustAll(c.Status.TLS.Trust)
	c, _ = f.reconcile()
	ca = f.secret(vocab.CASecret("demo"))
	require.Equal(t, old, ca.Data[vocab.PreviousCertKey])
	require.Empty(t, ca.Data[vocab.NextCertKey])
	restarted := vocab.PeerSecret(steps[1].Member) // the fixture's other Pods were made without the operator
	for _, name := range []string{vocab.ServerSecret("demo"), vocab.OperatorSecret("demo"), vocab.ClientSecret("demo"), restarted} {
		leaf := f.secret(name)
		require.NoError(t, checkIssued(leaf, ca.Data[vocab.TLSCertKey]), name)
	}
	cur := c.Status.Plan.Steps[c.Status.Plan.Current]
	require.Equal(t, plan.AwaitCertificate, cur.Action)
	require.Equal(t, int32(2), c.Status.TLS.CARotation.Pass)
	require.Len(t, certsOf(t, f.secret(vocab.TrustSecret("demo")).Data[vocab.CACertKey]), 2, "the old CA is still trusted")

	// Once served (the marks gone), the old CA leaves the trust bundle, and members restart.
	for _, name := range []string{vocab.ServerSecret("demo"), restarted} {
		s := f.secret(name)
		delete(s.Annotations, vocab.AnnotationUnserved)
		require.NoError(t, f.kube.Update(context.Background(), s))
	}
	c, _ = f.reconcile()
	require.Equal(t, certsOf(t, f.secret(vocab.CASecret("demo")).Data[vocab.TLSCertKey]), certsOf(t, f.secret(vocab.TrustSecret("demo")).Data[vocab.CACertKey]),
		"the trust bundle holds the new CA alone")
	require.Equal(t, plan.WhyTrustNew, c.Status.Plan.Steps[c.Status.Plan.Current].Why)
	require.Equal(t, &v1alpha1.CARotationStatus{Requested: "2026-11", Stage: "Retiring", Pass: 3}, c.Status.TLS.CARotation)

	// Once every member trusts the new CA alone, the old one is dropped: the rotation is done.
	f.trustAll(c.Status.TLS.Trust)
	c, _ = f.reconcile()
	require.Empty(t, f.secret(vocab.CASecret("demo")).Data[vocab.PreviousCertKey])
	require.Nil(t, c.Status.TLS.CARotation)
	c, _ = f.reconcile()
	require.Nil(t, c.Status.Plan, "done; the annotation asks for nothing more")
}

// checkIssued: the Secret's certificate was signed by the CA.
func checkIssued(s *corev1.Secret, ca []byte) error {
	leaf, err := pki.Certificates(s.Data[vocab.TLSCertKey])
	if err != nil {
		return err
	}
	cas, err := pki.Certificates(ca)
	if err != nil {
		return err
	}
	return leaf[0].CheckSignatureFrom(cas[0])
}

// A cluster made with the annotation already set (committed with its manifests) is not
// rotated: its CA was made for it.
func TestCARotationAskedAtCreationIsNone(t *testing.T) {
	f := newFixture(t, 3, func(c *v1alpha1.EtcdCluster) {
		c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto}
		c.Annotations = map[string]string{v1alpha1.AnnotationRotateCA: "at-creation"}
	})
	boot := f.cluster()
	boot.Status.ClusterID = ""
	_, err := f.r.certs().Ensure(context.Background(), boot, nil, f.now)
	require.NoError(t, err)
	require.Equal(t, "at-creation", f.secret(vocab.CASecret("demo")).Annotations[vocab.AnnotationCARotation])
	c, _ := f.reconcile()
	require.Nil(t, c.Status.Plan)
	require.Nil(t, c.Status.TLS.CARotation)
}
