package framework

import (
	"context"
	"crypto/tls"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/executor/pki"
	"github.com/etcdplan/etcdplan/executor/resources"
)

// OperatorImage maps, on the local stack, to the operator binary under bin/.
const OperatorImage = "ghcr.io/etcdplan/etcdplan:dev"

// Namespace creates a namespace for one test, restricted by PodSecurity like production.
func Namespace(t *testing.T) string {
	t.Helper()
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name()))
	if len(name) > 40 {
		name = name[:40]
	}
	name = fmt.Sprintf("e2e-%s-%d", strings.Trim(name, "-"), time.Now().UnixNano()%100000)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted"}}}
	require.NoError(t, Env.Client.Create(context.Background(), ns))
	t.Cleanup(func() {
		if !t.Failed() {
			_ = Env.Client.Delete(context.Background(), ns)
		}
	})
	return name
}

// Operator runs the operator for one namespace as a process on the host, restarting it
// when it exits while the test runs (the crash failpoint makes it exit on purpose).
type Operator struct {
	mu       sync.Mutex
	cmd      *exec.Cmd
	restarts int
	stopped  bool
	done     chan struct{}
}

// StartOperator starts the operator for the namespace ns with extraArgs, as the
// ServiceAccount of the namespaced install (operatorKubeconfig); it stops when the test ends,
// and its log is printed when the test failed.
func StartOperator(t *testing.T, ns string, extraArgs ...string) *Operator {
	t.Helper()
	logPath := filepath.Join(Env.Root, ".stack", "logs", "operator-"+ns+".log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	require.NoError(t, err)
	op := &Operator{done: make(chan struct{})}
	args := append([]string{"--namespaces=" + ns, "--operator-image=" + OperatorImage,
		"--metrics-bind-address=0", "--health-probe-bind-address=0"}, extraArgs...)
	kubeconfig := operatorKubeconfig(t, ns)
	start := func() *exec.Cmd {
		cmd := exec.Command(Env.Manager, args...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
		cmd.Stdout, cmd.Stderr = logFile, logFile
		require.NoError(t, cmd.Start())
		return cmd
	}
	op.cmd = start()
	go func() {
		defer close(op.done)
		for {
			err := op.cmd.Wait()
			op.mu.Lock()
			if op.stopped {
				op.mu.Unlock()
				return
			}
			fmt.Fprintf(logFile, "--- operator exited (%v); restarting\n", err)
			op.restarts++
			op.cmd = start()
			op.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		op.mu.Lock()
		op.stopped = true
		_ = op.cmd.Process.Kill()
		op.mu.Unlock()
		<-op.done
		_ = logFile.Close()
		if t.Failed() {
			t.Logf("operator log: %s; its last lines:\n%s", logPath, tail(logPath, 80))
		}
	})
	return op
}

// tail is a file's last n lines: CI keeps the test output, not the files.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Restarts counts the times the operator exited and was started again.
func (op *Operator) Restarts() int {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.restarts
}

// NewCluster is an EtcdCluster of replicas members on etcd 3.6.16, with volumes of 64 MiB
// and a progress deadline of 3 minutes per step.
func NewCluster(ns, name string, replicas int32) *v1alpha1.EtcdCluster {
	c := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	c.Spec.Replicas = replicas
	c.Spec.Version = "3.6.16"
	c.Spec.Storage.Size = resource.MustParse("64Mi")
	c.Spec.UpdateStrategy.ProgressDeadlineSeconds = 180
	return c
}

// CreateReady creates the cluster "demo" of n members in ns, its spec edited, and waits
// until it is Ready.
func CreateReady(t *testing.T, ns string, n int32, edits ...func(c *v1alpha1.EtcdCluster)) *v1alpha1.EtcdCluster {
	t.Helper()
	c := NewCluster(ns, "demo", n)
	for _, edit := range edits {
		edit(c)
	}
	require.NoError(t, Env.Client.Create(context.Background(), c))
	return WaitReady(t, ns, "demo")
}

// Refused waits until the cluster's spec is observed and it is Stalled with reason.
func Refused(t *testing.T, ns, name string, timeout time.Duration, reason string) *v1alpha1.EtcdCluster {
	t.Helper()
	return WaitFor(t, ns, name, timeout, "Stalled with "+reason, func(c *v1alpha1.EtcdCluster) bool {
		s := Condition(c, "Stalled")
		return c.Status.ObservedGeneration == c.Generation && s != nil && s.Status == metav1.ConditionTrue && s.Reason == reason
	})
}

// Get reads the EtcdCluster ns/name.
func Get(t *testing.T, ns, name string) *v1alpha1.EtcdCluster {
	t.Helper()
	c := &v1alpha1.EtcdCluster{}
	require.NoError(t, Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, c))
	return c
}

// Update re-reads the cluster and applies f to its spec, retrying on conflicts.
func Update(t *testing.T, ns, name string, f func(c *v1alpha1.EtcdCluster)) {
	t.Helper()
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true,
		func(ctx context.Context) (bool, error) {
			c := Get(t, ns, name)
			f(c)
			err := Env.Client.Update(ctx, c)
			return err == nil, nil
		}))
}

// PatchSpec applies f to obj and sends the difference as a merge patch: unlike an update it
// cannot lose to a status write of the operator's in between.
func PatchSpec(t *testing.T, obj client.Object, f func()) {
	t.Helper()
	before := obj.DeepCopyObject().(client.Object)
	f()
	require.NoError(t, Env.Client.Patch(context.Background(), obj, client.MergeFrom(before)))
}

// WaitFor polls the cluster until cond holds, failing with the last status when it does not.
func WaitFor(t *testing.T, ns, name string, timeout time.Duration, what string, cond func(c *v1alpha1.EtcdCluster) bool) *v1alpha1.EtcdCluster {
	t.Helper()
	var last *v1alpha1.EtcdCluster
	err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		// Keep the last object read: a Get cut short by the deadline says nothing.
		var c v1alpha1.EtcdCluster
		if err := Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &c); err != nil {
			return false, nil
		}
		last = &c
		return cond(last), nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v\nstatus: %s\n%s", what, err, Describe(last), memberLogs(ns, name, 15))
	}
	return last
}

// memberLogs is the end of each member's etcd log, for a failure's message.
func memberLogs(ns, cluster string, lines int) string {
	var pods corev1.PodList
	if err := Env.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelCluster: cluster}); err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		log, err := Env.Stack.ContainerLog(context.Background(), ns, p.Name, "etcd")
		if err != nil {
			log = err.Error()
		}
		ls := strings.Split(strings.TrimRight(log, "\n"), "\n")
		fmt.Fprintf(&b, "--- %s (etcd), last %d lines:\n%s\n", p.Name, lines, strings.Join(ls[max(0, len(ls)-lines):], "\n"))
	}
	return b.String()
}

// Describe renders a cluster's status for a failure's message.
func Describe(c *v1alpha1.EtcdCluster) string {
	if c == nil {
		return "<none>"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "generation %d observed %d members %s\n", c.Generation, c.Status.ObservedGeneration, c.Status.MemberSummary)
	for _, cond := range c.Status.Conditions {
		fmt.Fprintf(&b, "  %s=%s %s: %s\n", cond.Type, cond.Status, cond.Reason, cond.Message)
	}
	if p := c.Status.Plan; p != nil {
		fmt.Fprintf(&b, "  plan %s %s %s\n", p.ID, p.Phase, p.Summary)
		for i, pr := range p.Progress {
			fmt.Fprintf(&b, "    step %d %s %s: %s %s\n", i+1, p.Steps[i].Action, p.Steps[i].Member, pr.State, pr.Message)
		}
	}
	for _, m := range c.Status.Members {
		fmt.Fprintf(&b, "  member %s id=%s %s leader=%t healthy=%t %s\n", m.Name, m.ID, m.Role, m.Leader, m.Healthy, m.Version)
	}
	return b.String()
}

// Condition is the cluster's condition of type t, or nil.
func Condition(c *v1alpha1.EtcdCluster, t string) *metav1.Condition {
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == t {
			return &c.Status.Conditions[i]
		}
	}
	return nil
}

// Ready: the spec is observed, Ready is True and no plan is left.
func Ready(c *v1alpha1.EtcdCluster) bool {
	r := Condition(c, "Ready")
	// Conditions and the other status fields are patched in two requests: wait for both.
	return c.Status.ObservedGeneration == c.Generation && r != nil && r.Status == metav1.ConditionTrue && c.Status.Plan == nil &&
		c.Status.ReadyReplicas >= c.Spec.Replicas
}

// WaitReady waits up to 5 minutes until the cluster is Ready (see Ready).
func WaitReady(t *testing.T, ns, name string) *v1alpha1.EtcdCluster {
	t.Helper()
	return WaitFor(t, ns, name, 5*time.Minute, "Ready", Ready)
}

// MemberPods are a cluster's member Pods.
func MemberPods(t require.TestingT, ns, cluster string) []corev1.Pod {
	var pods corev1.PodList
	require.NoError(t, Env.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelCluster: cluster}))
	return pods.Items
}

// Endpoints are the client URLs of a cluster's running member Pods, by Pod IP.
func Endpoints(t *testing.T, ns, name string) []string {
	t.Helper()
	var out []string
	for _, p := range MemberPods(t, ns, name) {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil {
			out = append(out, observe.ClientURL(&p))
		}
	}
	sort.Strings(out)
	return out
}

// EndpointsAs are the client URLs of the cluster's running members as a client that
// speaks TLS or not reaches them, whatever the members serve: a client keeps the way it
// was set up while TLS is switched on.
func EndpointsAs(t *testing.T, ns, name string, tls bool) []string {
	t.Helper()
	var out []string
	for _, ep := range Endpoints(t, ns, name) {
		_, hostPort, _ := strings.Cut(ep, "://")
		out = append(out, vocab.Scheme(tls)+"://"+hostPort)
	}
	return out
}

// EtcdClient is an etcd client of eps, closed when the test ends.
func EtcdClient(t *testing.T, eps []string) *clientv3.Client {
	t.Helper()
	return EtcdClientTLS(t, eps, nil)
}

// ClusterClient is an etcd client of the cluster's running members, as an application
// reaches them: with the client certificate the cluster gives applications when clients
// talk TLS. Closed when the test ends.
func ClusterClient(t *testing.T, ns, name string) *clientv3.Client {
	t.Helper()
	cfg := ClientTLS(t, ns, name)
	return EtcdClientTLS(t, EndpointsAs(t, ns, name, cfg != nil), cfg)
}

// EtcdClientTLS is an etcd client of eps with TLS when tlsCfg is set (EtcdConfig), closed
// when the test ends.
func EtcdClientTLS(t *testing.T, eps []string, tlsCfg *tls.Config) *clientv3.Client {
	cli, err := clientv3.New(EtcdConfig(eps, tlsCfg))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

// EtcdConfig is the configuration of a client of members at eps, with TLS when tlsCfg is
// set: members are dialed at Pod IPs and their certificate checked for tlsCfg.ServerName.
func EtcdConfig(eps []string, tlsCfg *tls.Config) clientv3.Config {
	return clientv3.Config{Endpoints: eps, TLS: tlsCfg, DialOptions: etcd.ServerName(tlsCfg), DialTimeout: 3 * time.Second, Logger: zap.NewNop()}
}

// ClientTLS is the TLS configuration of an application of the cluster: the certificate in
// status.tls.clientSecretName (else the one spec.tls names for the operator), checked
// against the cluster's CA for the client Service's name. nil when clients talk plain text.
func ClientTLS(t *testing.T, ns, name string) *tls.Config {
	t.Helper()
	cfg, err := ReadClientTLS(ns, name)
	require.NoError(t, err)
	return cfg
}

// ReadClientTLS is ClientTLS returning its error, for goroutines other than the test's.
func ReadClientTLS(ns, name string) (*tls.Config, error) {
	c := &v1alpha1.EtcdCluster{}
	if err := Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, c); err != nil {
		return nil, err
	}
	if !c.Spec.TLS.ClientTLS() {
		return nil, nil
	}
	secret := resources.OperatorSecret(c)
	if c.Status.TLS != nil && c.Status.TLS.ClientSecretName != "" {
		secret = c.Status.TLS.ClientSecretName
	}
	var s corev1.Secret
	if err := Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: secret}, &s); err != nil {
		return nil, err
	}
	cfg, err := pki.ClientConfig(pki.KeyPair{Cert: s.Data[vocab.TLSCertKey], Key: s.Data[vocab.TLSKeyKey]}, s.Data[vocab.CACertKey])
	if err != nil {
		return nil, err
	}
	cfg.ServerName = resources.ServerName(c)
	return cfg, nil
}

// CheckMembership asserts etcd's member list matches the spec: as many voters as replicas,
// no learners, each named after a Pod.
func CheckMembership(t *testing.T, ns, name string) *clientv3.MemberListResponse {
	t.Helper()
	list, err := Membership(t, ns, name)
	require.NoError(t, err)
	return list
}

// Membership reads etcd's member list and says how it differs from the spec.
func Membership(t *testing.T, ns, name string) (*clientv3.MemberListResponse, error) {
	c := Get(t, ns, name)
	cli := ClusterClient(t, ns, name)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := cli.MemberList(ctx)
	if err == nil {
		err = SameCluster(list.Header, c.Status.ClusterID)
	}
	if err != nil {
		return nil, err
	}
	if len(list.Members) != int(c.Spec.Replicas) {
		return list, fmt.Errorf("%d etcd members, spec.replicas %d: %v", len(list.Members), c.Spec.Replicas, list.Members)
	}
	for _, m := range list.Members {
		if m.IsLearner {
			return list, fmt.Errorf("member %s is still a learner", m.Name)
		}
		var pod corev1.Pod
		if err := Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Name}, &pod); err != nil {
			return list, fmt.Errorf("Pod of member %s: %w", m.Name, err)
		}
	}
	return list, nil
}

// MetaName is the ObjectMeta of ns/name.
func MetaName(ns, name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

// MemberID renders an etcd member ID as status does.
func MemberID(id uint64) string { return etcd.ID(id) }

// ParseID parses a member ID as status renders it.
func ParseID(t *testing.T, s string) uint64 {
	t.Helper()
	id, err := etcd.ParseID(s)
	require.NoError(t, err)
	return id
}

// MoveLeader makes target the leader, asking the current leader at its own endpoint.
func MoveLeader(t *testing.T, ns, name string, target uint64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, ep := range Endpoints(t, ns, name) {
		cli := EtcdClient(t, []string{ep})
		st, err := cli.Status(ctx, ep)
		require.NoError(t, err)
		if st.Header.MemberId == st.Leader {
			if st.Leader != target {
				_, err = cli.MoveLeader(ctx, target)
				require.NoError(t, err)
			}
			return
		}
	}
	t.Fatal("no leader found")
}

// RequireHistory asserts a finished plan in status.history listed these actions in order.
func RequireHistory(t *testing.T, c *v1alpha1.EtcdCluster, actions string) {
	t.Helper()
	for _, h := range c.Status.History {
		if strings.Contains(h.Actions, actions) {
			return
		}
	}
	t.Fatalf("no plan in history with %q:\n%+v", actions, c.Status.History)
}

// Park scales the cluster to zero and waits until no member runs.
func Park(t *testing.T, ns, name string) {
	t.Helper()
	Update(t, ns, name, func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 0 })
	WaitFor(t, ns, name, 3*time.Minute, "parked", func(c *v1alpha1.EtcdCluster) bool {
		return Ready(c) && len(Endpoints(t, ns, name)) == 0
	})
}

// PID is the operator's process ID now (a restart gives it another).
func (op *Operator) PID() int {
	op.mu.Lock()
	defer op.mu.Unlock()
	return op.cmd.Process.Pid
}

// Kill stops the operator as a crash would; it is started again.
func (op *Operator) Kill() {
	op.mu.Lock()
	defer op.mu.Unlock()
	_ = op.cmd.Process.Kill()
}

// PlanWatch records every step the plans show while it runs, and whether claims stay.
type PlanWatch struct {
	cancel    context.CancelFunc
	done      chan struct{}
	mu        sync.Mutex
	steps     []plan.Step
	claimErrs []string
}

// WatchPlans records the steps of every plan the cluster shows (each once), and whether
// each of claims (name and UID) is ever gone, deleted or another object.
func WatchPlans(t *testing.T, ns, name string, claims map[string]types.UID) *PlanWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &PlanWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			var c v1alpha1.EtcdCluster
			if err := Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &c); err == nil && c.Status.Plan != nil {
				w.mu.Lock()
				for _, s := range c.Status.Plan.Steps {
					s.MemberID, s.TargetID = "", "" // a learner's ID shows once it is added
					if !slices.Contains(w.steps, s) {
						w.steps = append(w.steps, s)
					}
				}
				w.mu.Unlock()
			}
			for claim, uid := range claims {
				var pvc corev1.PersistentVolumeClaim
				err := Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim}, &pvc)
				if ctx.Err() == nil && (err != nil || pvc.UID != uid || pvc.DeletionTimestamp != nil) {
					w.mu.Lock()
					w.claimErrs = append(w.claimErrs, fmt.Sprintf("claim %s: %v, uid %s, deleting %v", claim, err, pvc.UID, pvc.DeletionTimestamp))
					w.mu.Unlock()
				}
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()
	t.Cleanup(cancel)
	return w
}

// Stop ends the watch and returns the steps seen, and what was wrong with a claim when it
// was not there as it was.
func (w *PlanWatch) Stop() (steps []plan.Step, claimErrs []string) {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.steps, w.claimErrs
}

// Actions are the steps' actions and members, each once.
func Actions(steps []plan.Step) []string {
	var out []string
	for _, s := range steps {
		if a := strings.TrimSpace(fmt.Sprintf("%s %s", s.Action, s.Member)); !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// Pause freezes the operator (SIGSTOP) between two of its steps, as a stalled process would
// be; Resume lets it go on.
func (op *Operator) Pause() {
	op.mu.Lock()
	defer op.mu.Unlock()
	_ = op.cmd.Process.Signal(syscall.SIGSTOP)
}

// Resume lets a paused operator go on.
func (op *Operator) Resume() {
	op.mu.Lock()
	defer op.mu.Unlock()
	_ = op.cmd.Process.Signal(syscall.SIGCONT)
}

// PodReady says whether the Pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// PodUIDs are the UIDs of a cluster's member Pods.
func PodUIDs(t *testing.T, ns, cluster string) map[types.UID]bool {
	uids := map[types.UID]bool{}
	for _, p := range MemberPods(t, ns, cluster) {
		uids[p.UID] = true
	}
	return uids
}

// Fragment writes mib MiB of revisions of one key and compacts them away: mib MiB of free
// pages in every member's database, once their compaction ran.
func Fragment(t *testing.T, ns, cluster string, mib int) {
	t.Helper()
	cli := EtcdClient(t, Endpoints(t, ns, cluster))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	value := strings.Repeat("x", 512<<10)
	var rev int64
	for range 2 * mib {
		// A scheduled defragmentation may move leadership meanwhile, and a write then
		// times out: it is written again.
		var resp *clientv3.PutResponse
		var last error
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			resp, last = cli.Put(ctx, "/bench/garbage", value)
			return last == nil, nil
		})
		require.NoError(t, err, "writing garbage: %v", last)
		rev = resp.Header.Revision
	}
	_, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical())
	require.NoError(t, err)
}

// SameCluster fails an answer from another etcd cluster than id: clients reach members at
// Pod IPs, which another test's cluster may take over when a Pod goes.
func SameCluster(h *etcdserverpb.ResponseHeader, id string) error {
	if id != "" && (h == nil || MemberID(h.ClusterId) != id) {
		return fmt.Errorf("answered by another etcd cluster than %s", id)
	}
	return nil
}
