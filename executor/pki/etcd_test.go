package pki

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The certificates are what etcd needs: three real members on loopback serve clients and
// one another with mutual TLS from one CA, refuse clients without a certificate of it, and
// serve a renewed certificate without a restart.

const etcdVersion = "v3.6.16"

func etcdBinary(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "bin", "etcd-"+etcdVersion, "etcd"))
	require.NoError(t, err)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: `make test` builds it (%v)", p, err)
	}
	return p
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func write(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(p+".tmp", data, 0o600))
	require.NoError(t, os.Rename(p+".tmp", p)) // as a Secret volume swaps its files
	return p
}

type tlsMember struct {
	name, dir          string
	clientURL, peerURL string
}

// startTLSCluster starts n members with client and peer TLS from ca; each member's server
// certificate names localhost and 127.0.0.1, its peer certificate localhost (on loopback,
// every member's exact name).
func startTLSCluster(t *testing.T, ca KeyPair, n int) []tlsMember {
	t.Helper()
	members := make([]tlsMember, n)
	var initial []string
	for i := range members {
		m := &members[i]
		m.name, m.dir = fmt.Sprintf("m%d", i), t.TempDir()
		m.clientURL = fmt.Sprintf("https://127.0.0.1:%d", freePort(t))
		m.peerURL = fmt.Sprintf("https://localhost:%d", freePort(t))
		initial = append(initial, m.name+"="+m.peerURL)
		server, err := Issue(ca, Request{CommonName: m.name, DNSNames: []string{"localhost"},
			IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true, Client: true, NotBefore: time.Now(), Validity: time.Hour})
		require.NoError(t, err)
		peer, err := Issue(ca, Request{CommonName: m.name, DNSNames: []string{"localhost"},
			Server: true, Client: true, NotBefore: time.Now(), Validity: time.Hour})
		require.NoError(t, err)
		write(t, m.dir, "server.crt", server.Cert)
		write(t, m.dir, "server.key", server.Key)
		write(t, m.dir, "peer.crt", peer.Cert)
		write(t, m.dir, "peer.key", peer.Key)
		write(t, m.dir, "ca.crt", Bundle(ca.Cert))
	}
	for _, m := range members {
		peerPort := m.peerURL[strings.LastIndex(m.peerURL, ":"):]
		f := func(name string) string { return filepath.Join(m.dir, name) }
		cmd := exec.Command(etcdBinary(t), "--name="+m.name, "--data-dir="+f("data"),
			"--listen-client-urls="+m.clientURL, "--advertise-client-urls="+m.clientURL,
			"--listen-peer-urls=https://127.0.0.1"+peerPort, "--initial-advertise-peer-urls="+m.peerURL,
			"--initial-cluster="+strings.Join(initial, ","), "--initial-cluster-state=new",
			"--cert-file="+f("server.crt"), "--key-file="+f("server.key"),
			"--trusted-ca-file="+f("ca.crt"), "--client-cert-auth",
			"--peer-cert-file="+f("peer.crt"), "--peer-key-file="+f("peer.key"),
			"--peer-trusted-ca-file="+f("ca.crt"), "--peer-client-cert-auth")
		log, err := os.Create(f("etcd.log"))
		require.NoError(t, err)
		cmd.Stdout, cmd.Stderr = log, log
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			_, _ = cmd.Process.Wait()
			if t.Failed() {
				b, _ := os.ReadFile(f("etcd.log"))
				var lines []string
				for _, l := range strings.Split(string(b), "\n") {
					if !strings.Contains(l, "rejected connection") && (strings.Contains(l, `"level":"warn"`) || strings.Contains(l, `"level":"error"`) || strings.Contains(l, "x509")) {
						lines = append(lines, l)
					}
				}
				t.Logf("%s log, warnings:\n%s", m.name, strings.Join(lines[:min(len(lines), 30)], "\n"))
			}
		})
	}
	return members
}

func dialTLS(t *testing.T, cfg *tls.Config, urls ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: urls, TLS: cfg, DialTimeout: 2 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// servedSerial is the serial of the certificate a TLS handshake with the address sees.
func servedSerial(t *testing.T, cfg *tls.Config, url string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), cfg)
	require.NoError(t, err)
	defer conn.Close()
	return FactsOf(conn.ConnectionState().PeerCertificates[0]).Serial
}

func TestEtcdServesTheCertificatesWithMutualTLS(t *testing.T) {
	ca, err := NewCA("etcd-ca", time.Now(), 24*time.Hour)
	require.NoError(t, err)
	members := startTLSCluster(t, ca, 3)
	var urls []string
	for _, m := range members {
		urls = append(urls, m.clientURL)
	}
	op, err := Issue(ca, Request{CommonName: "etcdplan", Client: true, NotBefore: time.Now(), Validity: time.Hour})
	require.NoError(t, err)
	cfg, err := ClientConfig(op, ca.Cert)
	require.NoError(t, err)
	cli := dialTLS(t, cfg, urls...)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.Eventually(t, func() bool {
		_, err := cli.Put(shortCtx(t), "k", "v")
		return err == nil
	}, time.Minute, 100*time.Millisecond, "a write through the TLS cluster")
	list, err := cli.MemberList(ctx)
	require.NoError(t, err)
	require.Len(t, list.Members, 3)
	for _, m := range members { // every member answers: the peers reached one another
		st, err := cli.Status(ctx, m.clientURL)
		require.NoError(t, err, m.name)
		require.NotZero(t, st.Leader, m.name)
	}

	t.Run("a client without a certificate is refused", func(t *testing.T) {
		pool, err := Pool(ca.Cert)
		require.NoError(t, err)
		require.ErrorContains(t, handshake(&tls.Config{RootCAs: pool}, urls[0]), "certificate required")
	})
	t.Run("a client of another CA is refused", func(t *testing.T) {
		other, err := NewCA("other-ca", time.Now(), time.Hour)
		require.NoError(t, err)
		stranger, err := Issue(other, Request{CommonName: "stranger", Client: true, NotBefore: time.Now(), Validity: time.Hour})
		require.NoError(t, err)
		scfg, err := ClientConfig(stranger, ca.Cert)
		require.NoError(t, err)
		// Presented even though the member names only its own CA as acceptable.
		presented := scfg.Certificates[0]
		scfg.Certificates = nil
		scfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &presented, nil }
		require.ErrorContains(t, handshake(scfg, urls[0]), "unknown certificate authority")
		require.NoError(t, handshake(cfg, urls[0]), "the operator's certificate, to the same member")
	})
	t.Run("a renewed server certificate is served without a restart", func(t *testing.T) {
		m := members[0]
		before := servedSerial(t, cfg, m.clientURL)
		renewed, err := Issue(ca, Request{CommonName: m.name, DNSNames: []string{"localhost"},
			IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true, Client: true, NotBefore: time.Now(), Validity: time.Hour})
		require.NoError(t, err)
		write(t, m.dir, "server.key", renewed.Key)
		write(t, m.dir, "server.crt", renewed.Cert)
		want, err := Read(renewed.Cert)
		require.NoError(t, err)
		require.NotEqual(t, before, want.Serial)
		require.Equal(t, want.Serial, servedSerial(t, cfg, m.clientURL))
		r, err := cli.Get(ctx, "k")
		require.NoError(t, err)
		require.Equal(t, "v", string(r.Kvs[0].Value))
	})
}

// handshake completes a TLS handshake with the member and waits for its verdict on the
// client's certificate: with TLS 1.3 a refusal arrives as an alert on the first read.
func handshake(cfg *tls.Config, url string) error {
	conn, err := tls.Dial("tcp", strings.TrimPrefix(url, "https://"), cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
	if _, err = conn.Read(make([]byte, 1)); errors.Is(err, os.ErrDeadlineExceeded) {
		return nil // accepted: the server waits for the client to speak
	}
	return err
}

func shortCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	t.Cleanup(cancel)
	return ctx
}
