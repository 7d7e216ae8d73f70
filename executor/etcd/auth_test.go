package etcd

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdplan/etcdplan/executor/pki"
)

// The auth calls against a real etcd member serving clients over mutual TLS: the
// operator's certificate is its user, users are made with exactly their permissions, and a
// member that maps no certificate to a user has auth switched off again by root's password.

// startMember starts one etcd member on loopback serving clients TLS from ca, mapping
// client certificates to users (--client-cert-auth) or not; it returns its client URL.
func startMember(t *testing.T, ca pki.KeyPair, certAuth bool) string {
	t.Helper()
	bin, err := filepath.Abs(filepath.Join("..", "..", "bin", "etcd-v3.6.16", "etcd"))
	require.NoError(t, err)
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: `make test` builds it (%v)", bin, err)
	}
	dir := t.TempDir()
	server, err := pki.Issue(ca, pki.Request{CommonName: "m", DNSNames: []string{"localhost"}, IPs: []net.IP{net.IPv4(127, 0, 0, 1)},
		Server: true, Client: true, NotBefore: time.Now(), Validity: time.Hour})
	require.NoError(t, err)
	f := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o600))
		return p
	}
	url, peer := "https://127.0.0.1:"+freePort(t), "http://127.0.0.1:"+freePort(t)
	args := []string{"--name=m", "--data-dir=" + filepath.Join(dir, "data"), "--listen-client-urls=" + url, "--advertise-client-urls=" + url,
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer, "--initial-cluster=m=" + peer,
		"--cert-file=" + f("server.crt", server.Cert), "--key-file=" + f("server.key", server.Key), "--trusted-ca-file=" + f("ca.crt", ca.Cert)}
	if certAuth {
		args = append(args, "--client-cert-auth")
	}
	cmd := exec.Command(bin, args...)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait() })
	return url
}

func freePort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return fmt.Sprint(l.Addr().(*net.TCPAddr).Port)
}

// clientAs is a TLS configuration with a certificate of ca whose common name is user.
func clientAs(t *testing.T, ca pki.KeyPair, user string) *tls.Config {
	pair, err := pki.Issue(ca, pki.Request{CommonName: user, Client: true, NotBefore: time.Now(), Validity: time.Hour})
	require.NoError(t, err)
	cfg, err := pki.ClientConfig(pair, ca.Cert)
	require.NoError(t, err)
	cfg.ServerName = "localhost"
	return cfg
}

// operatorOf dials the member as the operator, once it answers.
func operatorOf(t *testing.T, url string, cfg *tls.Config) *Client {
	c, err := dial(map[string]string{"m": url}, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		st, err := c.cli.Status(ctx, url)
		if err == nil {
			c.SetCluster(ID(st.Header.ClusterId), map[string]string{"m": url})
		}
		return err == nil
	}, 20*time.Second, 100*time.Millisecond, "etcd answers")
	return c
}

func TestAuthOnAndOffAsTheOperatorsCertificateUser(t *testing.T) {
	ca, err := pki.NewCA("ca", time.Now(), time.Hour)
	require.NoError(t, err)
	url := startMember(t, ca, true)
	op := operatorOf(t, url, clientAs(t, ca, "etcdplan-operator"))
	ctx := context.Background()
	require.NoError(t, op.SyncUsers(ctx, []User{{Name: "app", Perms: []Perm{{Prefix: "/app/", Type: clientv3.PermissionType(clientv3.PermReadWrite)}}}}, nil))
	require.NoError(t, op.EnableAuth(ctx, Auth{RootPassword: "pw", User: "etcdplan-operator"}))
	require.NoError(t, op.EnableAuth(ctx, Auth{RootPassword: "pw", User: "etcdplan-operator"}), "again: a no-op")
	on, err := op.AuthEnabled(ctx)
	require.NoError(t, err)
	require.True(t, on)

	app, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, TLS: clientAs(t, ca, "app"), DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	require.NoError(t, err)
	defer app.Close()
	_, err = app.Put(ctx, "/app/k", "v")
	require.NoError(t, err)
	_, err = app.Put(ctx, "/other", "v")
	require.ErrorIs(t, err, rpctypes.ErrPermissionDenied)

	// Its permission changed to read only; then it goes.
	require.NoError(t, op.SyncUsers(ctx, []User{{Name: "app", Perms: []Perm{{Prefix: "/app/", Type: clientv3.PermissionType(clientv3.PermRead)}}}}, nil))
	_, err = app.Put(ctx, "/app/k", "w")
	require.ErrorIs(t, err, rpctypes.ErrPermissionDenied, "read only now")
	require.NoError(t, op.SyncUsers(ctx, nil, []string{"app"}))
	_, err = app.Get(ctx, "/app/k")
	require.Error(t, err, "the user is gone")

	require.NoError(t, op.DisableAuth(ctx))
	on, err = op.AuthEnabled(ctx)
	require.NoError(t, err)
	require.False(t, on)
}

// A member without --client-cert-auth maps no certificate to a user: once auth is on, it
// refuses the operator, so EnableAuth switches auth off again as root, by password, and
// fails saying why.
func TestAuthThatWouldLockTheOperatorOutIsSwitchedOffAgain(t *testing.T) {
	ca, err := pki.NewCA("ca", time.Now(), time.Hour)
	require.NoError(t, err)
	url := startMember(t, ca, false)
	op := operatorOf(t, url, clientAs(t, ca, "etcdplan-operator"))
	ctx := context.Background()
	err = op.EnableAuth(ctx, Auth{RootPassword: "pw", User: "etcdplan-operator"})
	require.ErrorContains(t, err, "auth was switched off again")
	require.True(t, AuthRefused(err), "%v", err)
	on, err := op.AuthEnabled(ctx)
	require.NoError(t, err)
	require.False(t, on, "anyone may ask once it is off")
}
