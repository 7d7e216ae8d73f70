package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/pki"
	"github.com/etcdplan/etcdplan/test/framework"
)

// A running three-member cluster of plain Pods that no operator manages is adopted into
// an EtcdCluster of three, a writer running throughout: the cluster keeps its ID and every
// acknowledged write, a snapshot of it is stored before the first source member leaves,
// the last source member leaves only once approved, the user then acknowledges the source
// stopped, and the member list holds the cluster's own members alone.
func TestAdoptRunningCluster(t *testing.T) {
	ns, src, id := withSource(t, 3, sourceTLS{})
	createClaim(t, ns, "backups")
	sched := &v1alpha1.EtcdBackupSchedule{ObjectMeta: framework.MetaName(ns, "nightly")}
	sched.Spec.ClusterRef.Name, sched.Spec.Schedule, sched.Spec.Suspend = "demo", "@daily", true
	sched.Spec.Destination = framework.ClaimDest("backups")
	require.NoError(t, framework.Env.Client.Create(context.Background(), sched))
	w := startWriterOn(t, ns, "demo", id, func() []string { return append(src.endpoints(t), framework.Endpoints(t, ns, "demo")...) }, nil)
	w.waitAcked()

	// The whole adoption, previewed against the running source.
	manifest := filepath.Join(t.TempDir(), "demo.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(fmt.Sprintf("apiVersion: etcdplan.io/v1alpha1\nkind: EtcdCluster\nmetadata: {name: demo, namespace: %s}\n"+
		"spec: {replicas: 3, version: 3.6.16, storage: {size: 64Mi}, bootstrap: {join: {endpoints: [%s]}}}\n", ns, strings.Join(src.endpoints(t), ", "))), 0o644))
	preview := livePlan(t, ns, manifest, 2)
	require.Nil(t, preview.Blocked)
	require.Len(t, preview.Steps, 14, "three joins and three removals, leadership moved once, a snapshot before the first removal")
	require.Equal(t, plan.SnapshotSource, preview.Steps[4].Action)
	require.Equal(t, plan.WhySourceLast, preview.Steps[13].Why)

	require.NoError(t, framework.Env.Client.Create(context.Background(), adopter(ns, src.endpoints(t))))
	c := awaitLastSource(t, ns)
	require.Equal(t, id, c.Status.ClusterID, "the cluster keeps the source's ID")
	require.Contains(t, framework.Condition(c, "Reconciling").Message, "removes the last source member")
	members := memberNames(t, src.endpoints(t), src.tls)
	require.Len(t, members, 4, "three of the cluster's, and the last source member: %v", members)

	snap := framework.WaitBackup(t, ns, "demo-adopted", v1alpha1.BackupSucceeded)
	require.Equal(t, id, snap.Status.Artifact.ClusterID, "the snapshot is of the adopted cluster")

	framework.PatchSpec(t, c, func() { c.Annotations = map[string]string{v1alpha1.AnnotationApprove: c.Status.Plan.ID} })
	c = awaitAdopted(t, ns)
	require.Equal(t, id, c.Status.ClusterID)
	w.stopAndVerify()
	require.Equal(t, []string{"demo-0", "demo-1", "demo-2"}, memberNames(t, framework.EndpointsAs(t, ns, "demo", c.Spec.TLS != nil), framework.ClientTLS(t, ns, "demo")))
	framework.RequireHistory(t, c, "AddLearner")
}

// A running cluster that serves clients over mutual TLS of its own CA is adopted by an
// EtcdCluster whose clients talk TLS of the cluster's own CA: the operator reaches both, with
// the source's client certificate beside its own. Every write the source acknowledged is
// then served by the cluster's own members, under the source's ID.
func TestAdoptClusterWithClientTLS(t *testing.T) {
	ns, src, id := withSource(t, 3, sourceTLS{client: true})
	w := startWriterOn(t, ns, "demo", id, func() []string { return src.endpoints(t) }, src.tls)
	w.waitAcked()

	c := adopter(ns, src.endpoints(t))
	c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto, Peer: &v1alpha1.TLSSideSpec{Mode: v1alpha1.TLSDisabled}}
	c.Spec.Bootstrap.Join.TLSSecretName = "src-client"
	adoptThrough(t, c, id)
	w.stopAndVerify()
	require.Equal(t, []string{"demo-0", "demo-1", "demo-2"}, memberNames(t, framework.EndpointsAs(t, ns, "demo", true), framework.ClientTLS(t, ns, "demo")))
}

// A running cluster whose peers talk mutual TLS of its own CA is adopted by an EtcdCluster
// whose peer certificate the same CA issued (tls.peer.mode Provided), naming its members'
// peer DNS names: the source's members and the cluster's trust each other. Every write the
// source acknowledged is then served by the cluster's own members, under the source's ID,
// and their peers talk TLS.
func TestAdoptClusterWithPeerTLS(t *testing.T) {
	ns, src, id := withSource(t, 3, sourceTLS{peer: true})
	w := startWriterOn(t, ns, "demo", id, func() []string { return append(src.endpoints(t), framework.Endpoints(t, ns, "demo")...) }, nil)
	w.waitAcked()

	var peers []string
	for i := range 3 {
		peers = append(peers, vocab.MemberHost("demo", ns, vocab.MemberName("demo", i)))
	}
	issueSecret(t, ns, "demo-peer", src.ca, pki.Request{CommonName: "demo-peer", DNSNames: peers, Server: true, Client: true})

	// Previewed: peer certificates of the cluster's own CA are refused, the user's of the
	// source's CA give the whole adoption.
	preview := func(mode v1alpha1.TLSMode, wantCode int) plan.Plan {
		manifest := filepath.Join(t.TempDir(), "demo.yaml")
		require.NoError(t, os.WriteFile(manifest, []byte(fmt.Sprintf("apiVersion: etcdplan.io/v1alpha1\nkind: EtcdCluster\nmetadata: {name: demo, namespace: %s}\n"+
			"spec: {replicas: 3, version: 3.6.16, storage: {size: 64Mi}, tls: {mode: Disabled, peer: {mode: %s}, peerSecretName: demo-peer}, "+
			"bootstrap: {join: {endpoints: [%s]}}}\n", ns, mode, strings.Join(src.endpoints(t), ", "))), 0o644))
		return livePlan(t, ns, manifest, wantCode)
	}
	refused := preview(v1alpha1.TLSAuto, 1)
	require.NotNil(t, refused.Blocked)
	require.Contains(t, refused.Blocked.Message, "tls.peer.mode is Auto: the cluster's own CA would issue its members' peer certificates, which the source does not trust")
	require.Len(t, preview(v1alpha1.TLSProvided, 2).Steps, 13)

	c := adopter(ns, src.endpoints(t))
	c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSDisabled, Peer: &v1alpha1.TLSSideSpec{Mode: v1alpha1.TLSProvided}, PeerSecretName: "demo-peer"}
	adoptThrough(t, c, id)
	w.stopAndVerify()
	resp, err := framework.EtcdClient(t, framework.Endpoints(t, ns, "demo")).MemberList(context.Background())
	require.NoError(t, err)
	var names []string
	for _, m := range resp.Members {
		names = append(names, m.Name)
		require.Equal(t, []string{vocab.PeerURL("demo", ns, m.Name, true)}, m.PeerURLs, "peers talk TLS")
	}
	slices.Sort(names)
	require.Equal(t, []string{"demo-0", "demo-1", "demo-2"}, names)
}

// A running cluster with authentication on (clients by their certificates' common names, and
// root by password) is adopted with auth kept on: the operator makes its users in it as root
// first. Every write the source acknowledged is then served by the cluster's own members.
func TestAdoptClusterWithAuth(t *testing.T) {
	ns, src, id := withSource(t, 3, sourceTLS{client: true})
	cli := framework.EtcdClientTLS(t, src.endpoints(t), src.tls)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := cli.UserAdd(ctx, "root", "root-password")
	require.NoError(t, err)
	_, err = cli.UserGrantRole(ctx, "root", "root")
	require.NoError(t, err)
	_, err = cli.UserAddWithOptions(ctx, "adopter", "", &clientv3.UserAddOptions{NoPassword: true}) // the test's own certificate
	require.NoError(t, err)
	_, err = cli.UserGrantRole(ctx, "adopter", "root")
	require.NoError(t, err)
	_, err = cli.AuthEnable(ctx)
	require.NoError(t, err)
	require.NoError(t, framework.Env.Client.Create(ctx, &corev1.Secret{ObjectMeta: framework.MetaName(ns, "src-root"),
		Data: map[string][]byte{"username": []byte("root"), "password": []byte("root-password")}}))
	w := startWriterOn(t, ns, "demo", id, func() []string { return src.endpoints(t) }, src.tls)
	w.waitAcked()

	c := adopter(ns, src.endpoints(t))
	c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto, Peer: &v1alpha1.TLSSideSpec{Mode: v1alpha1.TLSDisabled}}
	c.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true, RootPasswordSecret: "src-root"}
	c.Spec.Bootstrap.Join.TLSSecretName, c.Spec.Bootstrap.Join.CredentialsSecretName = "src-client", "src-root"
	c = adoptThrough(t, c, id)
	require.True(t, c.Status.Join.UsersMade)
	require.True(t, c.Status.Auth.Enabled)
	acked := w.stop()
	require.NotEmpty(t, acked)

	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := framework.EtcdConfig(framework.EndpointsAs(t, ns, "demo", true), framework.ClientTLS(t, ns, "demo"))
	cfg.Username, cfg.Password = "root", "root-password"
	root, err := clientv3.New(cfg)
	require.NoError(t, err)
	defer root.Close()
	resp, err := root.Get(ctx, "/writer/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.NoError(t, framework.SameCluster(resp.Header, id))
	have := map[string]bool{}
	for _, kv := range resp.Kvs {
		have[string(kv.Key)] = true
	}
	for k := range acked {
		require.True(t, have[k], "acknowledged write %s is lost", k)
	}
	_, err = framework.ClusterClient(t, ns, "demo").Get(ctx, "/writer/000000")
	require.Error(t, err, "a certificate of no etcd user is refused: auth stays on")
}

// adoptThrough creates c and takes its adoption to the end: the last source member's
// removal approved, then the acknowledgement that the source is stopped; the cluster kept
// the source's ID.
func adoptThrough(t *testing.T, c *v1alpha1.EtcdCluster, id string) *v1alpha1.EtcdCluster {
	require.NoError(t, framework.Env.Client.Create(context.Background(), c))
	c = awaitLastSource(t, c.Namespace)
	require.Equal(t, id, c.Status.ClusterID, "the cluster keeps the source's ID")
	framework.PatchSpec(t, c, func() { c.Annotations = map[string]string{v1alpha1.AnnotationApprove: c.Status.Plan.ID} })
	return awaitAdopted(t, c.Namespace)
}

// awaitLastSource waits for the plan to hold the last source member's removal for approval.
func awaitLastSource(t *testing.T, ns string) *v1alpha1.EtcdCluster {
	return framework.WaitFor(t, ns, "demo", 6*time.Minute, "the last source member's removal awaiting approval", func(c *v1alpha1.EtcdCluster) bool {
		p := c.Status.Plan
		return p != nil && p.Phase == v1alpha1.PlanAwaitingApproval && int(p.Current) < len(p.Steps) && p.Steps[p.Current].Why == plan.WhySourceLast
	})
}

// awaitAdopted waits for every source member to be gone and the plan to ask for the user's
// word that they are stopped, gives it, and waits for the adoption to be done and the
// cluster ready.
func awaitAdopted(t *testing.T, ns string) *v1alpha1.EtcdCluster {
	c := framework.WaitFor(t, ns, "demo", 3*time.Minute, "the acknowledgement awaiting approval", func(c *v1alpha1.EtcdCluster) bool {
		p := c.Status.Plan
		return p != nil && p.Phase == v1alpha1.PlanAwaitingApproval && p.Steps[p.Current].Action == plan.Acknowledge
	})
	require.Equal(t, v1alpha1.JoinSourceRemoved, c.Status.Join.Phase)
	require.Contains(t, framework.Condition(c, "Reconciling").Message, "stop their processes and wipe their data directories")
	framework.PatchSpec(t, c, func() { c.Annotations = map[string]string{v1alpha1.AnnotationApprove: c.Status.Plan.ID} })
	return framework.WaitFor(t, ns, "demo", 3*time.Minute, "the adoption done", func(c *v1alpha1.EtcdCluster) bool {
		return framework.Ready(c) && c.Status.Join != nil && c.Status.Join.Phase == v1alpha1.JoinAdopted && c.Status.Plan == nil
	})
}

// Removing spec.bootstrap.join once the first member joined, and before a source member
// left, takes the cluster's member out of the source again: the source has its own members
// alone, under its ID, with every write.
func TestAdoptionRolledBack(t *testing.T) {
	ns, src, id := withSource(t, 3, sourceTLS{})
	w := startWriterOn(t, ns, "demo", id, func() []string { return src.endpoints(t) }, nil)
	w.waitAcked()

	c := firstJoined(t, ns, src)
	require.False(t, c.Status.Join.SourceLeft)
	// A patch lands in one round trip: an update could lose to the operator's status writes
	// until the first source member left, and nothing would be rolled back then.
	framework.PatchSpec(t, c, func() { c.Spec.Bootstrap = nil })
	require.False(t, c.Status.Join.SourceLeft, "the rollback was asked before a source member left")
	framework.WaitFor(t, ns, "demo", 3*time.Minute, "the rollback done", func(c *v1alpha1.EtcdCluster) bool {
		return c.Status.Plan != nil && c.Status.Plan.Blocked != nil && c.Status.Plan.Blocked.Reason == plan.BlockAdoptionRolledBack
	})
	require.Equal(t, []string{"src-0", "src-1", "src-2"}, memberNames(t, src.endpoints(t), nil))
	require.Empty(t, framework.MemberPods(t, ns, "demo"))
	w.cancel()
	<-w.done
	cli := framework.EtcdClient(t, src.endpoints(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/writer/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.NoError(t, framework.SameCluster(resp.Header, id))
	require.GreaterOrEqual(t, int(resp.Count), w.ackedCount(), "every acknowledged write is in the source")
}

// Deleting the EtcdCluster once its first member joined, before a source member left,
// takes that member out of the source before the EtcdCluster goes.
func TestAdoptionRolledBackOnDeletion(t *testing.T) {
	ns, src, id := withSource(t, 1, sourceTLS{})
	c := firstJoined(t, ns, src)
	require.NoError(t, framework.Env.Client.Delete(context.Background(), c))
	require.Eventually(t, func() bool {
		err := framework.Env.Client.Get(context.Background(), client.ObjectKeyFromObject(c), &v1alpha1.EtcdCluster{})
		return apierrors.IsNotFound(err)
	}, 3*time.Minute, time.Second, "the EtcdCluster gone")
	require.Equal(t, []string{"src-0"}, memberNames(t, src.endpoints(t), nil))
	require.Equal(t, id, src.clusterID(t))
}

// withSource starts the operator and a source of n members in a namespace of the test's
// own, and returns the source's etcd cluster ID.
func withSource(t *testing.T, n int, sides sourceTLS) (string, source, string) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	src := startSource(t, ns, "src", n, sides)
	return ns, src, src.clusterID(t)
}

// firstJoined creates the EtcdCluster that adopts src and waits for its first member to be a
// voter.
func firstJoined(t *testing.T, ns string, src source) *v1alpha1.EtcdCluster {
	require.NoError(t, framework.Env.Client.Create(context.Background(), adopter(ns, src.endpoints(t))))
	return framework.WaitFor(t, ns, "demo", 4*time.Minute, "demo-0 a voter", func(c *v1alpha1.EtcdCluster) bool {
		return slices.ContainsFunc(c.Status.Members, func(m v1alpha1.MemberStatus) bool { return m.Name == "demo-0" && m.Role == v1alpha1.RoleVoter })
	})
}

// adopter is an EtcdCluster of three that adopts the cluster at eps.
func adopter(ns string, eps []string) *v1alpha1.EtcdCluster {
	c := framework.NewCluster(ns, "demo", 3)
	c.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Join: &v1alpha1.JoinSpec{Endpoints: eps}}
	return c
}

// source is a cluster of plain Pods, named <name>-<i> under a headless Service <name>.
// Each side in sourceTLS talks mutual TLS of a CA of the source's own (ca); tls is a
// client's configuration, nil while clients talk plain text.
type source struct {
	ns, name string
	tls      *tls.Config
	ca       pki.KeyPair
}

// sourceTLS says which sides of a source talk TLS: clients, peers.
type sourceTLS struct{ client, peer bool }

// startSource starts a cluster of n members as plain Pods that no operator manages, and
// waits for each to be ready.
func startSource(t *testing.T, ns, name string, n int, sides sourceTLS) source {
	t.Helper()
	ctx := context.Background()
	s := source{ns: ns, name: name}
	svc := &corev1.Service{ObjectMeta: framework.MetaName(ns, name), Spec: corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": name}, PublishNotReadyAddresses: true,
		Ports: []corev1.ServicePort{{Name: "client", Port: 2379}, {Name: "peer", Port: 2380}}}}
	require.NoError(t, framework.Env.Client.Create(ctx, svc))
	var hosts, initial []string
	for i := range n {
		hosts = append(hosts, fmt.Sprintf("%s-%d.%s.%s.svc.cluster.local", name, i, name, ns))
		initial = append(initial, fmt.Sprintf("%s-%d=%s://%s:2380", name, i, vocab.Scheme(sides.peer), hosts[i]))
	}
	if sides.client || sides.peer {
		s.ca, s.tls = sourceSecrets(t, ns, name, sides, hosts)
	}
	for i := range n {
		member := fmt.Sprintf("%s-%d", name, i)
		require.NoError(t, framework.Env.Client.Create(ctx, sourcePod(ns, name, member, hosts[i], strings.Join(initial, ","), sides)))
	}
	require.Eventually(t, func() bool { return len(s.endpoints(t)) == n }, 3*time.Minute, time.Second, "the source's Pods ready")
	return s
}

func sourcePod(ns, app, member, host, initial string, sides sourceTLS) *corev1.Pod {
	uid := int64(65532)
	scheme, peerScheme := vocab.Scheme(sides.client), vocab.Scheme(sides.peer)
	probe := corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(2379)}}
	var extra []string
	if sides.client { // clients present a certificate of the source's CA, so the probe only connects
		probe = corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(2379)}}
		extra = []string{"--cert-file=/tls/tls.crt", "--key-file=/tls/tls.key", "--trusted-ca-file=/tls/ca.crt", "--client-cert-auth"}
	}
	if sides.peer {
		extra = append(extra, "--peer-cert-file=/peer-tls/tls.crt", "--peer-key-file=/peer-tls/tls.key", "--peer-trusted-ca-file=/peer-tls/ca.crt",
			"--peer-client-cert-auth")
	}
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: member, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			Hostname: member, Subdomain: app, TerminationGracePeriodSeconds: ptr.To(int64(5)),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "etcd", Image: "quay.io/coreos/etcd:v3.6.16",
				Command: append([]string{"etcd", "--data-dir=/var/lib/etcd/data", "--name=" + member,
					"--listen-client-urls=" + scheme + "://0.0.0.0:2379", "--advertise-client-urls=" + scheme + "://" + host + ":2379",
					"--listen-peer-urls=" + peerScheme + "://0.0.0.0:2380", "--initial-advertise-peer-urls=" + peerScheme + "://" + host + ":2380",
					"--initial-cluster=" + initial, "--initial-cluster-state=new", "--initial-cluster-token=" + app}, extra...),
				Ports:          []corev1.ContainerPort{{Name: "client", ContainerPort: 2379}, {Name: "peer", ContainerPort: 2380}},
				VolumeMounts:   []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: probe, PeriodSeconds: 2},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
	c := &p.Spec.Containers[0]
	for _, v := range []struct {
		on           bool
		name, secret string
	}{{sides.client, "tls", app + "-server"}, {sides.peer, "peer-tls", app + "-peer"}} {
		if v.on {
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: v.name, MountPath: "/" + v.name, ReadOnly: true})
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: v.name, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: v.secret}}})
		}
	}
	return p
}

// sourceSecrets makes the source's CA and, from it, the Secrets of the sides that talk
// TLS: for clients, its members' server certificate (Secret <name>-server) and a client
// certificate for the operator (<name>-client, as spec.bootstrap.join.tlsSecretName names
// it); for peers, one certificate naming each member's DNS name (hosts; etcd resolves them
// to check a dialing peer's address, so no wildcard), Secret <name>-peer. It returns the
// CA and, with client TLS, a client's configuration.
func sourceSecrets(t *testing.T, ns, name string, sides sourceTLS, hosts []string) (pki.KeyPair, *tls.Config) {
	ca, err := pki.NewCA(name+" CA", time.Now(), 24*time.Hour)
	require.NoError(t, err)
	if sides.peer {
		issueSecret(t, ns, name+"-peer", ca, pki.Request{CommonName: name + "-peer", DNSNames: hosts, Server: true, Client: true})
	}
	if !sides.client {
		return ca, nil
	}
	svc := name + "." + ns + ".svc"
	issueSecret(t, ns, name+"-server", ca, pki.Request{CommonName: name, DNSNames: []string{svc, "*." + svc + ".cluster.local"}, Server: true, Client: true})
	cfg, err := pki.ClientConfig(issueSecret(t, ns, name+"-client", ca, pki.Request{CommonName: "adopter", Client: true}), ca.Cert)
	require.NoError(t, err)
	cfg.ServerName = svc
	return ca, cfg
}

// issueSecret issues a certificate of ca, valid for 12 hours, into the Secret secret (tls.crt,
// tls.key, and ca.crt the CA's).
func issueSecret(t *testing.T, ns, secret string, ca pki.KeyPair, r pki.Request) pki.KeyPair {
	r.NotBefore, r.Validity = time.Now(), 12*time.Hour
	leaf, err := pki.Issue(ca, r)
	require.NoError(t, err)
	require.NoError(t, framework.Env.Client.Create(context.Background(), &corev1.Secret{ObjectMeta: framework.MetaName(ns, secret),
		Data: map[string][]byte{vocab.TLSCertKey: leaf.Cert, vocab.TLSKeyKey: leaf.Key, vocab.CACertKey: ca.Cert}}))
	return leaf
}

// endpoints are the client URLs of the source's ready Pods, by Pod IP.
func (s source) endpoints(t *testing.T) []string {
	var pods corev1.PodList
	require.NoError(t, framework.Env.Client.List(context.Background(), &pods, client.InNamespace(s.ns), client.MatchingLabels{"app": s.name}))
	var out []string
	for _, p := range pods.Items {
		if framework.PodReady(&p) && p.Status.PodIP != "" {
			out = append(out, vocab.Scheme(s.tls != nil)+"://"+p.Status.PodIP+":2379")
		}
	}
	slices.Sort(out)
	return out
}

func (s source) clusterID(t *testing.T) string {
	resp, err := framework.EtcdClientTLS(t, s.endpoints(t), s.tls).MemberList(context.Background())
	require.NoError(t, err)
	return framework.MemberID(resp.Header.ClusterId)
}

// memberNames lists etcd's members through eps, by name, dialed with cfg (nil: plain text).
func memberNames(t *testing.T, eps []string, cfg *tls.Config) []string {
	resp, err := framework.EtcdClientTLS(t, eps, cfg).MemberList(context.Background())
	require.NoError(t, err)
	var out []string
	for _, m := range resp.Members {
		out = append(out, m.Name)
	}
	slices.Sort(out)
	return out
}
