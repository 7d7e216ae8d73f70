package node

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/utils/exec"
)

// tcpEcho is a Pod's server for the port-forward test: it echoes what it reads.
func tcpEcho(port string) {
	ln, err := net.Listen("tcp", ":"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			os.Exit(1)
		}
		go func() { _, _ = io.Copy(c, c); c.Close() }()
	}
}

// testPKI is a CA with a serving certificate for 127.0.0.1 and client certificates.
type testPKI struct {
	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	caPEM  []byte
	serial int64
}

func newTestPKI(t *testing.T) *testPKI {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, IsCA: true,
		BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	p := &testPKI{dir: t.TempDir(), ca: ca, caKey: key, caPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), serial: 1}
	if err := os.WriteFile(filepath.Join(p.dir, "ca.crt"), p.caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// issue returns a certificate and key, in PEM, for a user (client) or for 127.0.0.1 (server).
func (p *testPKI) issue(t *testing.T, cn string, groups []string, server bool) (crt, key []byte) {
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	p.serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(p.serial), Subject: pkix.Name{CommonName: cn, Organization: groups},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage, tmpl.IPAddresses = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.ca, &k.PublicKey, p.caKey)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalPKCS8PrivateKey(k)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})
}

// apiNode runs a node with its kubelet API, whose authorizer (the fake API server's
// SubjectAccessReviews) lets user "admin" act on nodes/proxy and nodes/healthz of this node.
type apiNode struct {
	*testNode
	addr string
	pki  *testPKI
	mu   sync.Mutex
	sars []authzv1.SubjectAccessReviewSpec
}

func startAPINode(t *testing.T) *apiNode {
	pki := newTestPKI(t)
	crt, key := pki.issue(t, "localkubelet", nil, true)
	for name, b := range map[string][]byte{"kubelet.crt": crt, "kubelet.key": key} {
		if err := os.WriteFile(filepath.Join(pki.dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a := &apiNode{addr: ln.Addr().String(), pki: pki}
	ln.Close()
	a.testNode = startNodeWith(t, func(cfg *Config, client *fake.Clientset) {
		cfg.APIAddr, cfg.ClientCAFile = a.addr, filepath.Join(pki.dir, "ca.crt")
		cfg.TLSCertFile, cfg.TLSKeyFile = filepath.Join(pki.dir, "kubelet.crt"), filepath.Join(pki.dir, "kubelet.key")
		client.PrependReactor("create", "subjectaccessreviews", func(act k8stesting.Action) (bool, runtime.Object, error) {
			sar := act.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview)
			ra := sar.Spec.ResourceAttributes
			a.mu.Lock()
			a.sars = append(a.sars, sar.Spec)
			a.mu.Unlock()
			sar.Status.Allowed = sar.Spec.User == "admin" && ra.Resource == "nodes" && ra.Name == "node-test" &&
				(ra.Subresource == "proxy" || ra.Subresource == "healthz")
			return true, sar, nil
		})
		client.PrependReactor("create", "tokenreviews", func(act k8stesting.Action) (bool, runtime.Object, error) {
			tr := act.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
			if tr.Spec.Token == "admin-token" {
				tr.Status = authnv1.TokenReviewStatus{Authenticated: true, User: authnv1.UserInfo{Username: "admin"}}
			}
			return true, tr, nil
		})
	})
	a.wait("the kubelet API listens", func() bool {
		c, err := net.Dial("tcp", a.addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return a
}

// restConfig is a client of the kubelet API as user, by certificate.
func (a *apiNode) restConfig(t *testing.T, user string) *rest.Config {
	crt, key := a.pki.issue(t, user, []string{"testers"}, false)
	return &rest.Config{Host: "https://" + a.addr, TLSClientConfig: rest.TLSClientConfig{CAData: a.pki.caPEM, CertData: crt, KeyData: key}}
}

func (a *apiNode) get(t *testing.T, cfg *rest.Config, path string) (int, string) {
	t.Helper()
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: rt, Timeout: 30 * time.Second}).Get("https://" + a.addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestKubeletAPIAuthenticatesAndAuthorizesLikeAKubelet(t *testing.T) {
	a := startAPINode(t)
	admin := a.restConfig(t, "admin")
	if code, body := a.get(t, admin, "/healthz"); code != http.StatusOK || body != "ok" {
		t.Fatalf("healthz as admin: %d %q", code, body)
	}
	// No credentials: 401, whatever the path. A user the API server does not allow: 403.
	anon := &rest.Config{Host: "https://" + a.addr, TLSClientConfig: rest.TLSClientConfig{CAData: a.pki.caPEM}}
	if code, _ := a.get(t, anon, "/containerLogs/default/x/y"); code != http.StatusUnauthorized {
		t.Fatalf("anonymous: %d", code)
	}
	if code, body := a.get(t, a.restConfig(t, "nobody"), "/containerLogs/default/x/y"); code != http.StatusForbidden ||
		!strings.Contains(body, "user=nobody, verb=get, resource=nodes, subresource=proxy") {
		t.Fatalf("nobody: %d %q", code, body)
	}
	// A certificate of another CA is no credential.
	other := newTestPKI(t)
	crt, key := other.issue(t, "admin", nil, false)
	if code, _ := a.get(t, &rest.Config{Host: "https://" + a.addr, TLSClientConfig: rest.TLSClientConfig{CAData: a.pki.caPEM, CertData: crt, KeyData: key}},
		"/healthz"); code != http.StatusUnauthorized {
		t.Fatalf("another CA's certificate: %d", code)
	}
	// A bearer token is reviewed by the API server.
	if code, _ := a.get(t, &rest.Config{Host: "https://" + a.addr, BearerToken: "admin-token", TLSClientConfig: rest.TLSClientConfig{CAData: a.pki.caPEM}},
		"/healthz"); code != http.StatusOK {
		t.Fatalf("admin's token: %d", code)
	}
	if code, _ := a.get(t, &rest.Config{Host: "https://" + a.addr, BearerToken: "forged", TLSClientConfig: rest.TLSClientConfig{CAData: a.pki.caPEM}},
		"/healthz"); code != http.StatusUnauthorized {
		t.Fatalf("forged token: %d", code)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range a.sars {
		if s.User == "nobody" && (len(s.Groups) != 1 || s.Groups[0] != "testers" || s.ResourceAttributes.Verb != "get") {
			t.Fatalf("review of nobody: %+v", s)
		}
	}
}

func TestKubeletAPIServesContainerLogs(t *testing.T) {
	a := startAPINode(t)
	admin := a.restConfig(t, "admin")
	// stdout and stderr are read apart, as by any kubelet: their lines are ordered here by a pause.
	talker := withMount(sh("main", `n=$(cat /d/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > /d/n; echo "run $n"; sleep 0.2; echo "err $n" >&2; exec sleep 1000`), "d", "/d")
	a.create(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "talker"}, Spec: v1.PodSpec{
		RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{talker},
		Volumes: []v1.Volume{{Name: "d", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}},
	}})
	logs := func(query string) string {
		t.Helper()
		code, body := a.get(t, admin, "/containerLogs/default/talker/main?"+query)
		if code != http.StatusOK {
			t.Fatalf("logs ?%s: %d %s", query, code, body)
		}
		return body
	}
	output := func() string {
		code, body := a.get(t, admin, "/containerLogs/default/talker/main")
		if code != http.StatusOK {
			return fmt.Sprint(code)
		}
		return body
	}
	a.wait("the first run's output", func() bool { return output() == "run 1\nerr 1\n" })
	if got := logs("tailLines=1"); got != "err 1\n" {
		t.Fatalf("tailLines=1: %q", got)
	}
	if got := logs("limitBytes=4"); got != "run " {
		t.Fatalf("limitBytes=4: %q", got)
	}
	if got := logs("sinceSeconds=600"); got != "run 1\nerr 1\n" {
		t.Fatalf("sinceSeconds=600: %q", got)
	}
	if got := logs("sinceTime=" + url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))); got != "" {
		t.Fatalf("since an hour from now: %q", got)
	}
	for _, line := range strings.Split(strings.TrimSpace(logs("timestamps=true")), "\n") {
		ts, text, _ := strings.Cut(line, " ")
		if at, err := time.Parse(time.RFC3339Nano, ts); err != nil || time.Since(at) > time.Minute || !strings.HasSuffix(text, " 1") {
			t.Fatalf("timestamped line %q: %v", line, err)
		}
	}
	if code, body := a.get(t, admin, "/containerLogs/default/talker/main?previous=true"); code != http.StatusBadRequest ||
		!strings.Contains(body, `previous terminated container "main" in pod "talker" not found`) {
		t.Fatalf("previous of a first run: %d %q", code, body)
	}
	if code, _ := a.get(t, admin, "/containerLogs/default/missing/main"); code != http.StatusNotFound {
		t.Fatalf("a Pod not on the node: %d", code)
	}

	// The kill waits for the kubelet to record the container as running: its output may be
	// read a moment before.
	a.wait("the kill taken", func() bool {
		return a.tryPost("/faults/kill?namespace=default&pod=talker&container=main") == http.StatusOK
	})
	a.wait("the second run's output", func() bool { return output() == "run 2\nerr 2\n" })
	if got := logs("previous=true"); got != "run 1\nerr 1\n" {
		t.Fatalf("previous: %q", got)
	}

	// follow streams a running container's output as it comes and ends when it exits.
	a.create(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "counter"}, Spec: v1.PodSpec{
		RestartPolicy: v1.RestartPolicyNever,
		Containers:    []v1.Container{sh("main", `sleep 0.5; for i in 1 2 3; do echo line $i; sleep 0.3; done`)},
	}})
	a.wait("counter started", func() bool {
		st := a.pod("counter").Status.ContainerStatuses
		return len(st) == 1 && st[0].State.Running != nil
	})
	rt, err := rest.TransportFor(admin)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Transport: rt, Timeout: 30 * time.Second}).Get("https://" + a.addr + "/containerLogs/default/counter/main?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || first != "line 1\n" {
		t.Fatalf("first followed line %q: %v", first, err)
	}
	if st := a.pod("counter").Status.ContainerStatuses[0]; st.State.Running == nil {
		t.Fatalf("the first line came only after the container ended: %+v", st.State)
	}
	more, err := io.ReadAll(resp.Body) // ends when the container does
	if err != nil || string(more) != "line 2\nline 3\n" {
		t.Fatalf("the rest of the followed log %q: %v", more, err)
	}
}

func TestKubeletAPIExecsAndForwardsPorts(t *testing.T) {
	a := startAPINode(t)
	admin := a.restConfig(t, "admin")
	echo := v1.Container{Name: "echo", Image: "self", Args: []string{"tcp-echo", "8080"}}
	a.create(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "server"}, Spec: v1.PodSpec{
		RestartPolicy: v1.RestartPolicyAlways, Containers: []v1.Container{sh("main", "exec sleep 1000"), echo},
	}})
	a.wait("server running", func() bool {
		st := a.pod("server").Status.ContainerStatuses
		return len(st) == 2 && st[0].State.Running != nil && st[1].State.Running != nil
	})

	exec := func(container string, stdin string, tty bool, command ...string) (string, string, error) {
		t.Helper()
		q := url.Values{"command": command, "output": {"1"}}
		if !tty {
			q.Set("error", "1")
		}
		if stdin != "" {
			q.Set("input", "1")
		}
		if tty {
			q.Set("tty", "1")
		}
		u, _ := url.Parse("https://" + a.addr + "/exec/default/server/" + container + "?" + q.Encode())
		ex, err := remotecommand.NewSPDYExecutor(admin, "POST", u)
		if err != nil {
			t.Fatal(err)
		}
		var out, errOut bytes.Buffer
		opts := remotecommand.StreamOptions{Stdout: &out, Tty: tty}
		if !tty {
			opts.Stderr = &errOut
		}
		if stdin != "" {
			opts.Stdin = strings.NewReader(stdin)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err = ex.StreamWithContext(ctx, opts)
		return out.String(), errOut.String(), err
	}
	out, errOut, err := exec("main", "", false, "sh", "-c", `echo "out $(hostname)"; echo err >&2; exit 7`)
	var ee utilexec.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 7 || out != "out server\n" || errOut != "err\n" {
		t.Fatalf("exec: out %q err %q: %v", out, errOut, err)
	}
	if out, _, err := exec("main", "hello\n", false, "cat"); err != nil || out != "hello\n" {
		t.Fatalf("exec with stdin: %q %v", out, err)
	}
	if out, _, err := exec("main", "", true, "sh", "-c", "tty; stty size"); err != nil || !strings.HasPrefix(out, "/dev/pts/") {
		t.Fatalf("exec with a terminal: %q %v", out, err)
	}
	if _, _, err := exec("main", "", false, "no-such-command"); err == nil || !strings.Contains(err.Error(), `executable "no-such-command" not found`) {
		t.Fatalf("exec of a missing command: %v", err)
	}

	// port-forward: a local port leads to the echo container's port 8080.
	rt, upgrader, err := spdy.RoundTripperFor(admin)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("https://" + a.addr + "/portForward/default/server")
	dialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, "POST", u)
	stop, ready := make(chan struct{}), make(chan struct{})
	defer close(stop)
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{"0:8080"}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if err := fw.ForwardPorts(); err != nil {
			t.Errorf("forward: %v", err)
		}
	}()
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatal("port-forward not ready")
	}
	ports, err := fw.GetPorts()
	if err != nil {
		t.Fatal(err)
	}
	var c net.Conn
	a.wait("the echo server answers", func() bool {
		c, err = net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
		if err != nil {
			return false
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("ping\n")); err != nil {
			c.Close()
			return false
		}
		line, err := bufio.NewReader(c).ReadString('\n')
		c.Close()
		return err == nil && line == "ping\n"
	})
}
