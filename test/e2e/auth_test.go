package e2e

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/certs"
	"github.com/etcdplan/etcdplan/executor/pki"
	"github.com/etcdplan/etcdplan/test/framework"
	"github.com/etcdplan/etcdplan/test/objstore"
)

// etcd's authentication switched on for a running TLS cluster, with a writer running. The
// application's user (its client certificate's common name) and role are made while auth is
// off, as the held plan's message asks; approved, auth goes on with no restart and no failed
// write. Then a certificate naming no user is refused, root's password from its Secret
// works, a backup taken as the operator's user is verified by a drill that reads as root,
// and no credential shows anywhere. Switched off again, after approval, a client with no
// user is served.
func TestAuthSwitchedOnLive(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto} })
	pods := podUIDs(t, ns)
	app := framework.ClusterClient(t, ns, "demo")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	user := "demo-client" // the common name of the certificate in status.tls.clientSecretName
	_, err := app.RoleAdd(ctx, "writer")
	require.NoError(t, err)
	_, err = app.RoleGrantPermission(ctx, "writer", "/writer/", clientv3.GetPrefixRangeEnd("/writer/"), clientv3.PermissionType(clientv3.PermReadWrite))
	require.NoError(t, err)
	_, err = app.UserAddWithOptions(ctx, user, "", &clientv3.UserAddOptions{NoPassword: true})
	require.NoError(t, err)
	_, err = app.UserGrantRole(ctx, user, "writer")
	require.NoError(t, err)

	w := startWriter(t, ns, "demo")
	w.waitAcked()
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true} })
	c := framework.WaitFor(t, ns, "demo", time.Minute, "the switch held for approval", func(c *v1alpha1.EtcdCluster) bool {
		return c.Status.Plan != nil && c.Status.Plan.Phase == v1alpha1.PlanAwaitingApproval
	})
	require.Equal(t, plan.EnableAuth, c.Status.Plan.Steps[0].Action)
	framework.Update(t, ns, "demo", func(x *v1alpha1.EtcdCluster) {
		x.Annotations = map[string]string{v1alpha1.AnnotationApprove: c.Status.Plan.ID}
	})
	c = framework.WaitFor(t, ns, "demo", 2*time.Minute, "Ready with auth on", func(c *v1alpha1.EtcdCluster) bool {
		return framework.Ready(c) && c.Status.Plan == nil && c.Status.Auth != nil && c.Status.Auth.Enabled
	})
	time.Sleep(2 * time.Second) // writes under auth
	w.stopAndVerify()
	t.Logf("the writer: %d writes failed, the slowest took %v", w.failed, w.maxLat)
	require.Zero(t, w.failed, "no write failed while auth went on")
	require.Equal(t, certs.OperatorCommonName, c.Status.Auth.User)
	require.Equal(t, pods, podUIDs(t, ns), "no member restarted")

	_, err = app.Put(ctx, "/elsewhere", "x")
	require.ErrorIs(t, err, rpctypes.ErrPermissionDenied, "the application's role covers /writer/ alone")
	refusedAuth(t, ns, "a certificate that names no user", func(cfg *tls.Config) { cfg.Certificates = strangerCert(t, ns) })
	cfg := framework.EtcdConfig(framework.Endpoints(t, ns, "demo"), framework.ClientTLS(t, ns, "demo"))
	cfg.Username, cfg.Password = "root", rootPassword(t, ns) // a token wins over the certificate
	root, err := clientv3.New(cfg)
	require.NoError(t, err)
	defer root.Close()
	_, err = root.Put(ctx, "/elsewhere", "root may")
	require.NoError(t, err, "root's password from its Secret")

	m := minioFor(t, ns, objstore.FreeAddrOn(t, framework.Env.Stack.Instance().BridgeIP()))
	framework.CreateBackup(t, ns, "under-auth", framework.MinIODest(m.Endpoint), func(b *v1alpha1.EtcdBackup) { b.Spec.Verify = true })
	require.NotZero(t, framework.WaitBackup(t, ns, "under-auth", v1alpha1.BackupSucceeded).Status.Artifact.Contents.Keys)
	waitVerified(t, ns, "under-auth", metav1.ConditionTrue)
	requireNoSecretLeak(t, ns)

	// A new cluster restored from that backup has auth on as the snapshot had it, with its
	// users and root's password then: its spec names the Secret that holds that password.
	r := framework.NewCluster(ns, "restored", 1)
	r.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto}
	r.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true, RootPasswordSecret: "demo-root"}
	r.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Restore: &v1alpha1.RestoreSpec{BackupName: "under-auth"}}
	require.NoError(t, framework.Env.Client.Create(context.Background(), r))
	rs := framework.WaitReady(t, ns, "restored")
	require.True(t, rs.Status.Auth.Enabled)
	rcfg := framework.EtcdConfig(framework.Endpoints(t, ns, "restored"), framework.ClientTLS(t, ns, "restored"))
	rcfg.Username, rcfg.Password = "root", rootPassword(t, ns)
	rroot, err := clientv3.New(rcfg)
	require.NoError(t, err)
	defer rroot.Close()
	got, err := rroot.Get(ctx, "/writer/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err, "root's password of the snapshot")
	require.NotZero(t, got.Count)

	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Auth = nil })
	c = framework.WaitFor(t, ns, "demo", time.Minute, "the switch off held for approval", func(c *v1alpha1.EtcdCluster) bool {
		return c.Status.Plan != nil && c.Status.Plan.Phase == v1alpha1.PlanAwaitingApproval
	})
	require.Equal(t, plan.DisableAuth, c.Status.Plan.Steps[0].Action)
	framework.Update(t, ns, "demo", func(x *v1alpha1.EtcdCluster) {
		x.Annotations = map[string]string{v1alpha1.AnnotationApprove: c.Status.Plan.ID}
	})
	framework.WaitFor(t, ns, "demo", 2*time.Minute, "Ready with auth off", func(c *v1alpha1.EtcdCluster) bool {
		return framework.Ready(c) && c.Status.Plan == nil && c.Status.Auth != nil && !c.Status.Auth.Enabled
	})
	_, err = app.Put(ctx, "/elsewhere", "anyone may")
	require.NoError(t, err)
}

// refusedAuth checks that a client of the cluster, its TLS configuration edited, is refused
// by etcd's authentication.
func refusedAuth(t *testing.T, ns, why string, edit func(*tls.Config)) {
	t.Helper()
	cfg := framework.ClientTLS(t, ns, "demo")
	edit(cfg)
	cli := framework.EtcdClientTLS(t, framework.Endpoints(t, ns, "demo"), cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := cli.Put(ctx, "/writer/refused", why)
	require.Error(t, err, "a client with %s is refused", why)
	_, err = cli.Get(ctx, "/writer/", clientv3.WithPrefix())
	require.Error(t, err, "a client with %s reads nothing", why)
}

// podUIDs are the member Pods' UIDs by name: a restarted member has a new Pod.
func podUIDs(t *testing.T, ns string) map[string]types.UID {
	out := map[string]types.UID{}
	for _, p := range framework.MemberPods(t, ns, "demo") {
		out[p.Name] = p.UID
	}
	return out
}

// strangerCert is a client certificate of the cluster's own CA whose common name is no
// etcd user.
func strangerCert(t *testing.T, ns string) []tls.Certificate {
	var ca corev1.Secret
	require.NoError(t, framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: vocab.CASecret("demo")}, &ca))
	pair, err := pki.Issue(pki.KeyPair{Cert: ca.Data[vocab.TLSCertKey], Key: ca.Data[vocab.TLSKeyKey]},
		pki.Request{CommonName: "stranger", Client: true, NotBefore: time.Now(), Validity: time.Hour})
	require.NoError(t, err)
	cert, err := tls.X509KeyPair(pair.Cert, pair.Key)
	require.NoError(t, err)
	return []tls.Certificate{cert}
}

// rootPassword is root's password from the cluster's Secret.
func rootPassword(t *testing.T, ns string) string {
	var s corev1.Secret
	require.NoError(t, framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo-root"}, &s))
	return string(s.Data[certs.RootPasswordKey])
}

// A cluster created with spec.auth has auth on before its other members join, with no
// approval; the operator then adds and promotes them as its certificate's user (a
// promotion goes to the leader: a follower would forward it without that identity), and a
// client whose certificate names no user is refused. The users of spec.auth.users read and
// write only what their permissions say, by the certificates the operator issued them.
func TestAuthOnFromCreation(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	c := framework.CreateReady(t, ns, 3, func(c *v1alpha1.EtcdCluster) {
		c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto}
		c.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true, Users: []v1alpha1.AuthUser{
			{Name: "app", Permissions: []v1alpha1.AuthPermission{{Prefix: "/app/"}}},
			{Name: "reader", Permissions: []v1alpha1.AuthPermission{{Prefix: "/app/", Access: v1alpha1.AuthRead}}}}}
	})
	require.Equal(t, &v1alpha1.AuthStatus{Enabled: true, ClusterID: c.Status.ClusterID, User: certs.OperatorCommonName,
		RootPasswordSecret: "demo-root", FromCreation: true, Users: []string{"app", "reader"},
		UsersApplied: c.Spec.UsersHash() + "@" + c.Status.ClusterID}, c.Status.Auth)
	var actions []string
	for _, h := range c.Status.History {
		actions = append(actions, h.Actions)
	}
	require.Contains(t, strings.Join(actions, "; "), "CreateSeed demo-0, UpdateUsers, EnableAuth, AddLearner demo-1", "auth on before the others join")
	framework.CheckMembership(t, ns, "demo")
	refusedAuth(t, ns, "the application certificate, whose user was never made", func(*tls.Config) {})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	app, reader := userClient(t, ns, "app"), userClient(t, ns, "reader")
	_, err := app.Put(ctx, "/app/k", "v")
	require.NoError(t, err)
	_, err = app.Put(ctx, "/other", "v")
	require.ErrorIs(t, err, rpctypes.ErrPermissionDenied, "app writes /app/ alone")
	got, err := reader.Get(ctx, "/app/k")
	require.NoError(t, err)
	require.Len(t, got.Kvs, 1)
	_, err = reader.Put(ctx, "/app/k", "w")
	require.ErrorIs(t, err, rpctypes.ErrPermissionDenied, "reader only reads")
	_, err = reader.Get(ctx, "/other")
	require.ErrorIs(t, err, rpctypes.ErrPermissionDenied, "reader reads /app/ alone")
}

// userClient is an etcd client with the certificate the operator issued a user of
// spec.auth.users.
func userClient(t *testing.T, ns, user string) *clientv3.Client {
	var s corev1.Secret
	require.NoError(t, framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: vocab.UserSecret("demo", user)}, &s))
	cfg, err := pki.ClientConfig(pki.KeyPair{Cert: s.Data[vocab.TLSCertKey], Key: s.Data[vocab.TLSKeyKey]}, s.Data[vocab.CACertKey])
	require.NoError(t, err)
	cfg.ServerName = framework.ClientTLS(t, ns, "demo").ServerName
	return framework.EtcdClientTLS(t, framework.Endpoints(t, ns, "demo"), cfg)
}
