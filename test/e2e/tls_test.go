package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/pki"
	"github.com/etcdplan/etcdplan/test/framework"
	"github.com/etcdplan/etcdplan/test/objstore"
)

// A cluster with spec.tls mode Auto serves clients and peers over mutual TLS from its own
// CA from the first member on: applications use the client certificate status names,
// members advertise https URLs, and a client without a certificate, or with one of another
// CA, is refused. The operator reaches it with its own certificate to scale it and back it
// up, to a claim (a Pod that dials as the operator) and to S3 (the operator itself). A new
// cluster restored from that backup serves TLS from the user's own Secrets.
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
	m := minioFor(t, ns, objstore.FreeAddrOn(t, framework.Env.Stack.Instance().BridgeIP()))
	framework.CreateBackup(t, ns, "to-s3", framework.MinIODest(m.Endpoint))
	for _, b := range []string{"to-claim", "to-s3"} {
		require.NotZero(t, framework.WaitBackup(t, ns, b, v1alpha1.BackupSucceeded).Status.Artifact.Contents.Keys, b)
	}

	for _, p := range framework.MemberPods(t, ns, "demo") {
		for _, v := range p.Spec.Volumes {
			require.False(t, v.Secret != nil && v.Secret.SecretName == vocab.CASecret("demo"), "no Pod mounts the CA's key")
		}
	}

	// A new cluster restored from the S3 backup, with the user's own certificates.
	provideTLS(t, ns, "restored", 3)
	r := framework.NewCluster(ns, "restored", 3)
	r.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSProvided, ServerSecretName: "restored-server", PeerSecretName: "restored-peer",
		ClientSecretName: "restored-client"}
	r.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Restore: &v1alpha1.RestoreSpec{BackupName: "to-s3"}}
	require.NoError(t, framework.Env.Client.Create(context.Background(), r))
	framework.WaitReady(t, ns, "restored")
	framework.CheckMembership(t, ns, "restored")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	got, err := framework.ClusterClient(t, ns, "restored").Get(ctx, "/writer/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.NotZero(t, got.Count, "the restored cluster serves the backup's keys over TLS")
	requireNoSecretLeak(t, ns)
}

// provideTLS makes the Secrets of a Provided cluster as a user would, from a CA of their
// own: the members' server certificate, one peer certificate naming the first members, and
// the operator's client certificate.
func provideTLS(t *testing.T, ns, cluster string, members int) {
	t.Helper()
	now := time.Now()
	ca, err := pki.NewCA("users' CA", now, 24*time.Hour)
	require.NoError(t, err)
	var peers []string
	for i := range members {
		peers = append(peers, vocab.MemberHost(cluster, ns, vocab.MemberName(cluster, i)))
	}
	svc := vocab.ClientService(cluster) + "." + ns + ".svc"
	for name, req := range map[string]pki.Request{
		cluster + "-server": {CommonName: "server", DNSNames: []string{svc, "localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true, Client: true},
		cluster + "-peer":   {CommonName: "peer", DNSNames: peers, Server: true, Client: true},
		cluster + "-client": {CommonName: "operator", Client: true},
	} {
		req.NotBefore, req.Validity = now, 24*time.Hour
		pair, err := pki.Issue(ca, req)
		require.NoError(t, err)
		require.NoError(t, framework.Env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: framework.MetaName(ns, name),
			Data: map[string][]byte{vocab.TLSCertKey: pair.Cert, vocab.TLSKeyKey: pair.Key, vocab.CACertKey: ca.Cert}}))
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

// Certificates the operator issued are renewed at two thirds of their life as a plan, from
// the same CA, and members serve the new ones without a restart: etcd reads its
// certificate at every handshake, and a Secret volume is updated in place. No write fails.
func TestTLSCertificatesAreRenewedWithoutRestarts(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) {
		c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto, CertificateValidity: &metav1.Duration{Duration: 3 * time.Minute}}
	})
	pods := map[string]types.UID{}
	first := map[string]string{}
	for _, p := range framework.MemberPods(t, ns, "demo") {
		pods[p.Name] = p.UID
		for _, port := range []int{vocab.ClientPort, vocab.PeerPort} {
			first[fmt.Sprint(p.Name, port)] = servedSerial(t, ns, &p, port)
		}
	}
	w := startWriter(t, ns, "demo")
	// Certificates are valid from a minute before they are issued, so renewal comes a
	// minute after; members serve them within the kubelet's refresh of Secret volumes.
	require.Eventually(t, func() bool {
		for _, p := range framework.MemberPods(t, ns, "demo") {
			for _, port := range []int{vocab.ClientPort, vocab.PeerPort} {
				if servedSerial(t, ns, &p, port) == first[fmt.Sprint(p.Name, port)] {
					return false
				}
			}
		}
		return true
	}, 4*time.Minute, time.Second, "every member serves renewed certificates on both ports")
	w.stopAndVerify()
	require.Zero(t, w.failed, "no write failed while certificates were renewed")
	for _, p := range framework.MemberPods(t, ns, "demo") {
		require.Equal(t, pods[p.Name], p.UID, "%s was not restarted", p.Name)
	}
	// The renewals are on record: some applied (a certificate that came due during a plan
	// supersedes it), then the wait for the members, to its end.
	c := framework.WaitReady(t, ns, "demo")
	renewed := slices.ContainsFunc(c.Status.History, func(r v1alpha1.PlanRecord) bool {
		return strings.Contains(r.Actions, string(plan.RenewCertificate)) && !strings.HasPrefix(r.Steps, "0/")
	})
	awaited := slices.ContainsFunc(c.Status.History, func(r v1alpha1.PlanRecord) bool {
		return r.Phase == v1alpha1.PlanSucceeded && strings.Contains(r.Actions, string(plan.AwaitCertificate))
	})
	require.True(t, renewed && awaited, "%+v", c.Status.History)
	framework.CheckMembership(t, ns, "demo")
}

// servedSerial is the serial of the certificate a member presents on a port, checked
// against the cluster's CA for the member's name.
func servedSerial(t *testing.T, ns string, p *corev1.Pod, port int) string {
	t.Helper()
	cfg := framework.ClientTLS(t, ns, "demo")
	cfg.ServerName = vocab.MemberHost("demo", ns, p.Name)
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", net.JoinHostPort(p.Status.PodIP, strconv.Itoa(port)), cfg)
	require.NoError(t, err)
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
}

// With mode CertManager, cert-manager issues the cluster's own CA from the user's issuer
// and every certificate from that CA: the cluster serves mutual TLS on both sides, and a
// client certificate from the user's issuer itself is no etcd client (members trust the
// cluster's CA alone).
func TestTLSFromCertManager(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	org := framework.CertManagerCAIssuer(t, ns, "org")
	framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) {
		c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSCertManager, IssuerRef: &v1alpha1.IssuerReference{Name: org.Name, Kind: org.Kind}}
	})
	framework.CheckMembership(t, ns, "demo")
	writeAWhile(t, ns, "demo")

	framework.CreateCertificate(t, ns, "stranger", org, framework.CertificateSpec{SecretName: "stranger", CommonName: "stranger",
		Usages: []string{"digital signature", "client auth"}})
	framework.WaitCertificate(t, ns, "stranger", 1, time.Minute)
	var s corev1.Secret
	require.NoError(t, framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "stranger"}, &s))
	refused(t, ns, "a certificate of the issuer above the cluster's CA", func(cfg *tls.Config) {
		pair, err := tls.X509KeyPair(s.Data[vocab.TLSCertKey], s.Data[vocab.TLSKeyKey])
		require.NoError(t, err)
		cfg.Certificates = []tls.Certificate{pair}
	})
	requireNoSecretLeak(t, ns)
}
