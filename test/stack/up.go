package stack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// imageRule maps container images to local binaries (.stack/images.json, read by the local
// kubelet): the first rule whose pattern matches the whole image reference wins; ${group} in
// dir expands to the pattern's named group.
type imageRule struct {
	Pattern    string `json:"pattern"`
	Dir        string `json:"dir"`
	Entrypoint string `json:"entrypoint"`
}

func imageRules(l layout) []imageRule {
	const tag = `(?::[^/@]+)?`
	const digest = `(?:@sha256:[0-9a-f]{64})?`
	return []imageRule{
		// Any repository ending in "etcd", tag v3.X.Y or 3.X.Y with an optional suffix
		// (registry.k8s.io/etcd:3.6.16-0, quay.io/coreos/etcd:v3.5.35).
		{Pattern: `^(?:.*/)?[^/:@]*etcd:v?(?P<version>3\.[0-9]+\.[0-9]+)(?:[-+._][^/@]*)?` + digest + `$`,
			Dir: l.bin("etcd-v${version}"), Entrypoint: "etcd"},
		// The operator image: any repository ending in "etcdplan", any tag.
		{Pattern: `^(?:.*/)?[^/:@]*etcdplan` + tag + digest + `$`, Dir: l.bin(), Entrypoint: "manager"},
		// Flux's controllers, by version (ghcr.io/fluxcd/source-controller:v1.9.6).
		{Pattern: `^(?:.*/)?source-controller:(?P<version>v[0-9]+\.[0-9]+\.[0-9]+)` + digest + `$`,
			Dir: l.bin("flux-source-controller-${version}"), Entrypoint: "source-controller"},
		{Pattern: `^(?:.*/)?kustomize-controller:(?P<version>v[0-9]+\.[0-9]+\.[0-9]+)` + digest + `$`,
			Dir: l.bin("flux-kustomize-controller-${version}"), Entrypoint: "kustomize-controller"},
		// cert-manager's controller, by version (quay.io/jetstack/cert-manager-controller:v1.21.2).
		{Pattern: `^(?:.*/)?cert-manager-controller:(?P<version>v[0-9]+\.[0-9]+\.[0-9]+)` + digest + `$`,
			Dir: l.bin("cert-manager-${version}"), Entrypoint: "cert-manager"},
		// busybox: the host's /bin, for Jobs and simple test Pods.
		{Pattern: `^(?:.*/)?busybox` + tag + digest + `$`, Dir: "/bin", Entrypoint: "sh"},
	}
}

// logger prints progress lines.
type logger struct{ w io.Writer }

func (g logger) printf(format string, args ...any) {
	if g.w != nil {
		fmt.Fprintf(g.w, "stack: "+format+"\n", args...)
	}
}

// Up starts every process of the stack that does not run and waits until the stack is ready:
// the apiserver is ready, the three nodes are Ready, cluster DNS answers and the default
// StorageClass exists. When the control plane's etcd does not run, whatever is left of an
// earlier stack is removed first and the stack starts from nothing. The caller holds the lock.
func up(ctx context.Context, l layout, out io.Writer) error {
	log := logger{out}
	if err := os.MkdirAll(l.state(), 0o755); err != nil {
		return err
	}
	if err := l.claim(); err != nil {
		return err
	}
	etcd := etcdProc(l)
	_, errCA := os.Stat(l.cert("ca.crt"))
	_, errKC := os.Stat(l.kubeconfig())
	_, errKL := os.Stat(l.cert("kubelet.crt")) // a stack from before the kubelet API
	if etcd.pid(l) == 0 || errCA != nil || errKC != nil || errKL != nil {
		log.printf("starting a new stack in %s (stack %d: bridge %s at %s, API port %d)", l.state(), l.n, l.n.Bridge(), l.n.BridgeIP(), l.n.APIServerPort())
		if _, err := teardown(ctx, l, log); err != nil {
			return err
		}
		if err := os.RemoveAll(l.state("logs.prev")); err != nil {
			return err
		}
		if err := os.Rename(l.state("logs"), l.state("logs.prev")); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if err := writePKI(l); err != nil {
			return fmt.Errorf("stack: certificates: %w", err)
		}
	}
	rules, err := json.MarshalIndent(imageRules(l), "", "  ")
	if err != nil {
		return err
	}
	if err := writeFile(l.state("images.json"), append(rules, '\n'), 0o644); err != nil {
		return err
	}

	start := func(p process) error {
		pid, err := p.start(l)
		if err == nil {
			log.printf("%s runs (pid %d)", p.name, pid)
		}
		return err
	}
	if err := start(etcd); err != nil {
		return err
	}
	if err := poll(ctx, 200*time.Millisecond, "etcd", func(ctx context.Context) error {
		return etcdHealthy(ctx, l.etcdURL()+"/health")
	}); err != nil {
		return withLog(l, etcd, err)
	}
	api := apiserverProc(l)
	if err := start(api); err != nil {
		return err
	}
	cfg, err := restConfig(l.kubeconfig())
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := poll(ctx, 500*time.Millisecond, "kube-apiserver /readyz", func(ctx context.Context) error {
		if api.pid(l) == 0 {
			return errors.New("kube-apiserver exited")
		}
		return apiReady(ctx, client)
	}); err != nil {
		return withLog(l, api, err)
	}
	for _, p := range controlPlane(l)[2:] {
		if err := start(p); err != nil {
			return err
		}
	}
	if err := ensureStorageClass(ctx, client); err != nil {
		return err
	}
	if err := ensureKubeletAPIAccess(ctx, client); err != nil {
		return err
	}
	if err := start(clusterProc(l)); err != nil {
		return err
	}
	for _, n := range Nodes() {
		if err := start(nodeProc(l, n)); err != nil {
			return err
		}
	}
	realNode := RealNodeWanted() || l.realNodeOn()
	if realNode {
		if err := realNodeUp(ctx, l, log); err != nil {
			return err
		}
	}

	// Wait until it all works, and name the process to blame when one exits on the way.
	exited := func() error {
		for _, p := range allProcs(l) {
			if err := p.exited(l); err != nil {
				return err
			}
		}
		return nil
	}
	waits := []struct {
		what string
		f    func(context.Context) error
	}{
		{"nodes Ready", func(ctx context.Context) error { return nodesReady(ctx, client) }},
		{"cluster DNS on " + l.n.BridgeIP() + ":53", func(ctx context.Context) error { return dnsAnswers(ctx, l.n.BridgeIP()+":53") }},
		{"the default ServiceAccount", func(ctx context.Context) error {
			_, err := client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
			return err
		}},
	}
	for _, w := range waits {
		log.printf("waiting for %s", w.what)
		var fatal error
		err := poll(ctx, 500*time.Millisecond, w.what, func(ctx context.Context) error {
			if fatal = exited(); fatal != nil {
				return nil
			}
			return w.f(ctx)
		})
		if fatal != nil {
			return fatal
		}
		if err != nil {
			return err
		}
	}
	if realNode {
		if err := realNodeReady(ctx, l, log, client); err != nil {
			return err
		}
	}
	log.printf("ready: bin/kubectl --kubeconfig %s get nodes", l.kubeconfig())
	return nil
}

// withLog adds the tail of a process's log to err.
func withLog(l layout, p process, err error) error {
	b, _ := os.ReadFile(l.logFile(p.name))
	const max = 3000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return fmt.Errorf("%w\n--- tail of %s ---\n%s", err, l.logFile(p.name), b)
}

func etcdHealthy(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var h struct {
		Health string `json:"health"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return err
	}
	if h.Health != "true" {
		return fmt.Errorf("etcd health %q", h.Health)
	}
	return nil
}

func apiReady(ctx context.Context, client kubernetes.Interface) error {
	_, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	return err
}

func nodesReady(ctx context.Context, client kubernetes.Interface) error {
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ready := map[string]bool{}
	for _, n := range nodes.Items {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready[n.Name] = true
			}
		}
	}
	var missing []string
	for _, n := range Nodes() {
		if !ready[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("not Ready: %s", strings.Join(missing, ", "))
	}
	return nil
}

// dnsAnswers asks the cluster DNS at addr for the kubernetes Service.
func dnsAnswers(ctx context.Context, addr string) error {
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	addrs, err := r.LookupHost(ctx, "kubernetes.default.svc."+clusterDomain)
	if err != nil {
		return err
	}
	if len(addrs) == 0 {
		return errors.New("no address for kubernetes.default.svc")
	}
	return nil
}

func ensureStorageClass(ctx context.Context, client kubernetes.Interface) error {
	bind := storagev1.VolumeBindingImmediate
	reclaim := corev1.PersistentVolumeReclaimDelete
	expand := true
	want := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{
			Name:        StorageClass,
			Annotations: map[string]string{"storageclass.kubernetes.io/is-default-class": "true"},
		},
		Provisioner:          Provisioner,
		VolumeBindingMode:    &bind,
		ReclaimPolicy:        &reclaim,
		AllowVolumeExpansion: &expand,
	}
	_, err := client.StorageV1().StorageClasses().Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// ensureKubeletAPIAccess lets the apiserver use the kubelets' API (logs, exec,
// port-forward), as kubeadm does: the kubelets ask the API server, by SubjectAccessReview.
func ensureKubeletAPIAccess(ctx context.Context, client kubernetes.Interface) error {
	want := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "etcdplan-stack:kubelet-api-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: kubeletClientUser}},
	}
	_, err := client.RbacV1().ClusterRoleBindings().Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	cfg.Timeout = 30 * time.Second
	return cfg, nil
}

// teardown stops every process of the stack, has the local kubelet remove its network
// namespaces, mounts and bridge, removes anything of the stack still left, and deletes the
// state under .stack/ except the logs, the lock and the stack's number. It returns what the local kubelet's cleanup
// left behind (and teardown then removed).
func teardown(ctx context.Context, l layout, log logger) (Leftovers, error) {
	// Another checkout's stack runs under this number: its network is not this one's to
	// remove, and this checkout's stack cannot have started (see claim).
	shared := l.heldByOther() != ""
	snap := takeSnapshot(l)
	var errs []error
	// The real node first: its kubelet would start Pods again, and it stops them through
	// containerd, which needs nothing of the rest.
	if err := realNodeDown(ctx, l, log); err != nil {
		errs = append(errs, err)
	}
	// Nodes first (they stop their Pods), then the control plane from the top.
	groups := [][]process{nil, {clusterProc(l)}, {schedulerProc(l), controllerManagerProc(l)}, {apiserverProc(l)}, {etcdProc(l)}}
	for _, n := range Nodes() {
		groups[0] = append(groups[0], nodeProc(l, n))
	}
	for _, g := range groups {
		var wg sync.WaitGroup
		var mu sync.Mutex
		for _, p := range g {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if p.pid(l) != 0 {
					log.printf("stopping %s", p.name)
				}
				if err := p.stop(ctx, l, 15*time.Second); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
	}
	if _, err := os.Stat(l.localkubelet()); err == nil && !shared {
		cmd := exec.CommandContext(ctx, l.localkubelet(), "cleanup", "--state-dir="+l.state(),
			"--bridge="+l.n.Bridge(), "--netns-prefix="+l.n.NetnsPrefix())
		out, err := cmd.CombinedOutput()
		if len(out) > 0 {
			_ = os.MkdirAll(l.state("logs"), 0o755)
			_ = os.WriteFile(l.logFile("cleanup"), out, 0o644)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("stack: localkubelet cleanup: %v: %s", err, lastLines(out, 20)))
		}
	}
	var left Leftovers
	if !shared {
		left = snap.Leftovers()
		if !left.Empty() {
			log.printf("removing what the local kubelet's cleanup left: %s", left)
			if err := left.Remove(); err != nil {
				errs = append(errs, err)
			}
			if again := snap.Leftovers(); !again.Empty() {
				errs = append(errs, fmt.Errorf("stack: cannot remove %s", again))
				return left, errors.Join(errs...)
			}
		}
	}
	// Only now, with nothing mounted under .stack/, is it safe to delete it recursively.
	entries, _ := os.ReadDir(l.state())
	for _, e := range entries {
		switch e.Name() {
		case "logs", "logs.prev", "lock", "instance":
			continue
		}
		if err := os.RemoveAll(filepath.Join(l.state(), e.Name())); err != nil {
			errs = append(errs, err)
		}
	}
	return left, errors.Join(errs...)
}

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
