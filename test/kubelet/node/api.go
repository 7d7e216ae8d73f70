package node

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
)

// The kubelet API, the part the API server uses for kubectl logs, exec and port-forward:
//
//	GET      /containerLogs/{namespace}/{pod}/{container}  follow, previous, timestamps,
//	                                                        sinceSeconds, sinceTime, tailLines, limitBytes
//	GET|POST /exec/{namespace}/{pod}/{container}           command, stdin, stdout, stderr, tty
//	GET|POST /portForward/{namespace}/{pod}                port (websocket) or SPDY streams
//	GET      /healthz
//
// As a kubelet, it authenticates clients by a certificate of the cluster's CA or a bearer
// token (TokenReview), and asks the API server whether they may act on this node
// (SubjectAccessReview: verb by HTTP method, resource nodes, subresource "log" for /logs,
// "healthz" for /healthz, "proxy" for the rest).

const (
	streamIdle     = 4 * time.Hour // a kubelet's default streaming idle timeout
	streamCreation = 30 * time.Second
)

func (k *Kubelet) serveAPI(ctx context.Context) error {
	cert, err := tls.LoadX509KeyPair(k.cfg.TLSCertFile, k.cfg.TLSKeyFile)
	if err != nil {
		return fmt.Errorf("kubelet API: %w", err)
	}
	caPEM, err := os.ReadFile(k.cfg.ClientCAFile)
	if err != nil {
		return fmt.Errorf("kubelet API: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return fmt.Errorf("kubelet API: no certificate in %s", k.cfg.ClientCAFile)
	}
	ln, err := net.Listen("tcp", k.cfg.APIAddr)
	if err != nil {
		return fmt.Errorf("kubelet API: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") })
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", k.handleContainerLogs)
	for _, p := range []string{"/exec/{ns}/{pod}/{container}", "/exec/{ns}/{pod}/{uid}/{container}"} {
		mux.HandleFunc("GET "+p, k.handleExec)
		mux.HandleFunc("POST "+p, k.handleExec)
	}
	for _, p := range []string{"/portForward/{ns}/{pod}", "/portForward/{ns}/{pod}/{uid}"} {
		mux.HandleFunc("GET "+p, k.handlePortForward)
		mux.HandleFunc("POST "+p, k.handlePortForward)
	}
	srv := &http.Server{
		Handler:           k.guard(mux, pool),
		ReadHeaderTimeout: 10 * time.Second,
		// A certificate of another CA is no credential (401), not a failed handshake.
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequestClientCert, MinVersion: tls.VersionTLS12},
		ErrorLog:  log.New(io.Discard, "", 0), // TLS handshakes of port scans and health checks
	}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.ServeTLS(ln, "", ""); err != nil && err != http.ErrServerClosed {
			log.Printf("kubelet API: %v", err)
		}
	}()
	return nil
}

// guard authenticates and authorizes every request, as a kubelet does.
func (k *Kubelet) guard(next http.Handler, clientCAs *x509.CertPool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, ok, err := k.authenticate(r, clientCAs)
		if err != nil {
			http.Error(w, "authentication failed: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if !ok {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		verb, sub := requestAttributes(r)
		allowed, err := k.authorize(r.Context(), user, verb, sub)
		if err != nil {
			http.Error(w, "authorization failed: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if !allowed {
			http.Error(w, fmt.Sprintf("Forbidden (user=%s, verb=%s, resource=nodes, subresource=%s)", user.Username, verb, sub),
				http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// authenticate returns the client's user: from a client certificate of the CA (common name
// and organizations), else from a bearer token the API server reviews.
func (k *Kubelet) authenticate(r *http.Request, clientCAs *x509.CertPool) (authnv1.UserInfo, bool, error) {
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		c := r.TLS.PeerCertificates[0]
		inter := x509.NewCertPool()
		for _, ic := range r.TLS.PeerCertificates[1:] {
			inter.AddCert(ic)
		}
		_, err := c.Verify(x509.VerifyOptions{Roots: clientCAs, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
		if err != nil {
			return authnv1.UserInfo{}, false, nil
		}
		return authnv1.UserInfo{Username: c.Subject.CommonName, Groups: c.Subject.Organization}, true, nil
	}
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return authnv1.UserInfo{}, false, nil
	}
	tr, err := k.client.AuthenticationV1().TokenReviews().Create(r.Context(),
		&authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return authnv1.UserInfo{}, false, err
	}
	return tr.Status.User, tr.Status.Authenticated, nil
}

// requestAttributes are the verb and the nodes subresource a request acts on.
func requestAttributes(r *http.Request) (verb, subresource string) {
	switch r.Method {
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	default:
		verb = "get"
	}
	switch {
	case strings.HasPrefix(r.URL.Path, "/logs"):
		return verb, "log"
	case r.URL.Path == "/healthz":
		return verb, "healthz"
	}
	return verb, "proxy"
}

func (k *Kubelet) authorize(ctx context.Context, user authnv1.UserInfo, verb, subresource string) (bool, error) {
	extra := map[string]authzv1.ExtraValue{}
	for key, v := range user.Extra {
		extra[key] = authzv1.ExtraValue(v)
	}
	sar := &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: user.Username, Groups: user.Groups, UID: user.UID, Extra: extra,
		ResourceAttributes: &authzv1.ResourceAttributes{Verb: verb, Resource: "nodes", Subresource: subresource, Name: k.cfg.NodeName},
	}}
	out, err := k.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return out.Status.Allowed, nil
}

// podFromPath finds the Pod the request names, answering 404 when it is not on this node
// (or is another Pod of that name than the uid asks for).
func (k *Kubelet) podFromPath(w http.ResponseWriter, r *http.Request) *podWorker {
	ns, name := r.PathValue("ns"), r.PathValue("pod")
	pw := k.worker(ns, name)
	if pw == nil || (r.PathValue("uid") != "" && string(pw.meta().UID) != r.PathValue("uid")) {
		http.Error(w, fmt.Sprintf("pod %s/%s is not on node %s", ns, name, k.cfg.NodeName), http.StatusNotFound)
		return nil
	}
	return pw
}

func (k *Kubelet) handleContainerLogs(w http.ResponseWriter, r *http.Request) {
	pw := k.podFromPath(w, r)
	if pw == nil {
		return
	}
	opts, err := parseLogOptions(r.URL.Query(), time.Now())
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	name := r.PathValue("container")
	c := pw.container(name)
	if c == nil || name == "" {
		http.Error(w, fmt.Sprintf("container %q is not in pod %s", name, pw.meta().Name), http.StatusBadRequest)
		return
	}
	pw.mu.Lock()
	run, ran := int(c.status.RestartCount), c.everRan
	proc := c.proc
	pw.mu.Unlock()
	if r.URL.Query().Get("previous") == "true" {
		if run--; run < 0 {
			http.Error(w, fmt.Sprintf("previous terminated container %q in pod %q not found", name, pw.meta().Name), http.StatusBadRequest)
			return
		}
		opts.follow = false
	} else if !ran {
		http.Error(w, fmt.Sprintf("container %q in pod %q is waiting to start", name, pw.meta().Name), http.StatusBadRequest)
		return
	}
	path := filepath.Join(pw.dir, "logs", name, strconv.Itoa(run)+".log")
	running := func() bool { return proc != nil && proc.logPath == path && !isDone(proc.exited) }
	w.Header().Set("Content-Type", "text/plain")
	if err := writeLog(r.Context(), w, path, opts, running); err != nil {
		log.Printf("kubelet API: logs of %s/%s %s: %v", pw.meta().Namespace, pw.meta().Name, name, err)
	}
}

func (k *Kubelet) handleExec(w http.ResponseWriter, r *http.Request) {
	pw := k.podFromPath(w, r)
	if pw == nil {
		return
	}
	opts, err := remotecommand.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m := pw.meta()
	remotecommand.ServeExec(w, r, execer{pw}, m.Namespace+"/"+m.Name, string(m.UID), r.PathValue("container"),
		r.URL.Query()["command"], opts, streamIdle, streamCreation, remotecommand.SupportedStreamingProtocols)
}

func (k *Kubelet) handlePortForward(w http.ResponseWriter, r *http.Request) {
	pw := k.podFromPath(w, r)
	if pw == nil {
		return
	}
	opts, err := portforward.NewV4Options(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	m := pw.meta()
	portforward.ServePortForward(w, r, forwarder{pw}, m.Namespace+"/"+m.Name, string(m.UID), opts,
		streamIdle, streamCreation, portforward.SupportedProtocols)
}

// forwarder connects a port-forward stream to a port of the Pod.
type forwarder struct{ pw *podWorker }

func (f forwarder) PortForward(ctx context.Context, _, _ string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	host := "127.0.0.1"
	if !f.pw.podCopy().Spec.HostNetwork {
		f.pw.mu.Lock()
		host = f.pw.ip
		f.pw.mu.Unlock()
	}
	if host == "" {
		return fmt.Errorf("pod has no address yet")
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(int(port))))
	if err != nil {
		return err
	}
	defer conn.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(conn, stream); done <- struct{}{} }()
	go func() { _, _ = io.Copy(stream, conn); done <- struct{}{} }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}
