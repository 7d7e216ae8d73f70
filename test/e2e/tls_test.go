package e2e

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/pki"
	"github.com/etcdplan/etcdplan/test/framework"
)

// A cluster with spec.tls mode Auto serves clients and peers over mutual TLS from its own
// CA from the first member on: applications use the client certificate status names,
// members advertise https URLs, and a client without a certificate, or with one of another
// CA, is refused. The operator reaches it with its own certificate to scale it and back it
// up, to a claim (a Pod that dials as the operator) and to S3 (the operator itself).
func TestTLSAutoServesMutualTLS(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	c := framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) {
		c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto}
	})
	require.NotNil(t, c.Status.TLS)
	require.Equal(t, vocab.ClientSecret("demo"), c.Status.TLS.ClientSecretName)
	for _, ep := range framework.Endpoints(t, ns, "demo") {
		require.True(t, strings.HasPrefix(ep, "https://"), ep)
	}
	list := framework.CheckMembership(t, ns, "demo")
	for _, m := range list.Members {
		require.Equal(t, []string{vocab.PeerURL("demo", ns, m.Name, true)}, m.PeerURLs)
		require.Equal(t, []string{vocab.ClientURL("demo", ns, m.Name, true)}, m.ClientURLs)
	}

	w := startWriter(t, ns, "demo")
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 4 })
	framework.WaitReady(t, ns, "demo")
	framework.CheckMembership(t, ns, "demo")
	w.stopAndVerify()
	require.Zero(t, w.failed, "no write failed while a member joined over TLS")

	refused(t, ns, "no client certificate", func(cfg *tls.Config) { cfg.Certificates = nil })
	other, err := pki.NewCA("another CA", time.Now(), time.Hour)
	require.NoError(t, err)
	stranger, err := pki.Issue(other, pki.Request{CommonName: "stranger", Client: true, NotBefore: time.Now(), Validity: time.Hour})
	require.NoError(t, err)
	refused(t, ns, "a certificate of another CA", func(cfg *tls.Config) {
		pair, err := tls.X509KeyPair(stranger.Cert, stranger.Key)
		require.NoError(t, err)
		cfg.Certificates = []tls.Certificate{pair}
	})

	createClaim(t, ns, "backups")
	framework.CreateBackup(t, ns, "to-claim", framework.ClaimDest("backups"))
	m := minioFor(t, ns, "")
	framework.CreateBackup(t, ns, "to-s3", framework.MinIODest(m.Endpoint))
	for _, b := range []string{"to-claim", "to-s3"} {
		require.NotZero(t, framework.WaitBackup(t, ns, b, v1alpha1.BackupSucceeded).Status.Artifact.Contents.Keys, b)
	}

	var ca corev1.Secret
	require.NoError(t, framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: vocab.CASecret("demo")}, &ca))
	for _, p := range framework.MemberPods(t, ns, "demo") {
		for _, v := range p.Spec.Volumes {
			require.False(t, v.Secret != nil && v.Secret.SecretName == ca.Name, "no Pod mounts the CA's key")
		}
	}
}

// refused checks that a client of the cluster, its TLS configuration edited, is refused.
func refused(t *testing.T, ns, why string, edit func(*tls.Config)) {
	t.Helper()
	cfg := framework.ClientTLS(t, ns, "demo")
	edit(cfg)
	cli, err := clientv3.New(framework.EtcdConfig(framework.Endpoints(t, ns, "demo"), cfg))
	require.NoError(t, err)
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = cli.Put(ctx, "/refused", why)
	require.Error(t, err, "a client with %s is refused", why)
}
