package v1alpha1_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// apiServer is a kube-apiserver with its own etcd, both real binaries from bin/, enough to
// check what admission does with our CRDs.
type apiServer struct {
	config *rest.Config
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func repoBin(t *testing.T, parts ...string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(append([]string{"..", "..", "bin"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: `make test` builds it (%v)", p, err)
	}
	return p
}

func start(t *testing.T, name string, args ...string) {
	t.Helper()
	log, err := os.Create(filepath.Join(t.TempDir(), filepath.Base(name)+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(log.Name())
			t.Logf("%s log:\n%s", filepath.Base(name), tail(b, 4000))
		}
	})
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

func startAPIServer(t *testing.T) *apiServer {
	t.Helper()
	dir := t.TempDir()
	etcdPort, peerPort, apiPort := freePort(t), freePort(t), freePort(t)
	start(t, repoBin(t, "etcd-v3.6.16", "etcd"), "--data-dir="+filepath.Join(dir, "etcd"),
		fmt.Sprintf("--listen-client-urls=http://127.0.0.1:%d", etcdPort),
		fmt.Sprintf("--advertise-client-urls=http://127.0.0.1:%d", etcdPort),
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", peerPort),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", peerPort),
		fmt.Sprintf("--initial-cluster=default=http://127.0.0.1:%d", peerPort))

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "sa.key")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		t.Fatal(err)
	}
	token := "admin-token"
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(token+",admin,admin,system:masters\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start(t, repoBin(t, "kube-v1.36.3", "kube-apiserver"),
		fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", etcdPort),
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(apiPort), "--cert-dir="+filepath.Join(dir, "certs"),
		"--token-auth-file="+tokens, "--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc", "--service-account-key-file="+keyFile,
		"--service-account-signing-key-file="+keyFile, "--service-cluster-ip-range=10.96.0.0/24",
		"--disable-admission-plugins=ServiceAccount")
	cfg := &rest.Config{Host: fmt.Sprintf("https://127.0.0.1:%d", apiPort), BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	waitHealthy(t, cfg)
	return &apiServer{config: cfg}
}

func waitHealthy(t *testing.T, cfg *rest.Config) {
	t.Helper()
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, cfg.Host+"/readyz", nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatal("kube-apiserver did not become ready")
}
