package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/test/framework"
	"github.com/etcdplan/etcdplan/test/stack"
)

// Flux's controllers run once per stack, in flux-system, for every GitOps test.
var fluxOnce struct {
	sync.Once
	err error
}

// installFlux applies Flux's CRDs (from the modules its controllers are built from) and the
// controllers, and waits until both are available.
func installFlux(t *testing.T) {
	t.Helper()
	fluxOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		for _, dir := range []string{"flux-source-controller-" + stack.FluxSourceVersion, "flux-kustomize-controller-" + stack.FluxKustomizeVersion} {
			if fluxOnce.err = framework.Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(framework.Env.Root, "bin", dir, "crds")); fluxOnce.err != nil {
				return
			}
		}
		if fluxOnce.err = framework.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s",
			"crd/gitrepositories.source.toolkit.fluxcd.io", "crd/kustomizations.kustomize.toolkit.fluxcd.io"); fluxOnce.err != nil {
			return
		}
		if fluxOnce.err = framework.Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f", filepath.Join(framework.Env.Root, "test", "e2e", "testdata", "flux", "system.yaml")); fluxOnce.err != nil {
			return
		}
		fluxOnce.err = framework.Kubectl(ctx, "-n", "flux-system", "wait", "--for=condition=Available", "--timeout=120s",
			"deployment/source-controller", "deployment/kustomize-controller")
	})
	require.NoError(t, fluxOnce.err, "installing Flux")
}

// gitRepo is a repository served over smart HTTP (git-http-backend) at the stack's bridge
// address, where Pods reach it, with a work tree the test commits to.
type gitRepo struct {
	t    *testing.T
	work string
	bare string
	url  string
}

func newGitRepo(t *testing.T) *gitRepo {
	t.Helper()
	root := t.TempDir()
	r := &gitRepo{t: t, work: filepath.Join(root, "work"), bare: filepath.Join(root, "etcd.git")}
	r.git(root, "init", "-q", "--bare", "-b", "main", r.bare)
	r.git(root, "init", "-q", "-b", "main", r.work)
	execPath, err := exec.Command("git", "--exec-path").Output()
	require.NoError(t, err)
	backend := &cgi.Handler{Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"),
		Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	ln, err := net.Listen("tcp", net.JoinHostPort(framework.Env.Stack.Instance().BridgeIP(), "0"))
	require.NoError(t, err)
	srv := &http.Server{Handler: backend, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	r.url = "http://" + ln.Addr().String() + "/etcd.git"
	return r
}

func (r *gitRepo) git(dir string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=e2e", "GIT_AUTHOR_EMAIL=e2e@etcdplan.test",
		"GIT_COMMITTER_NAME=e2e", "GIT_COMMITTER_EMAIL=e2e@etcdplan.test")
	out, err := cmd.CombinedOutput()
	require.NoError(r.t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// edit rewrites a file of the work tree with f.
func (r *gitRepo) edit(path string, f func(string) string) {
	r.t.Helper()
	p := filepath.Join(r.work, path)
	b, err := os.ReadFile(p)
	require.NoError(r.t, err)
	next := f(string(b))
	require.NotEqual(r.t, string(b), next, "editing %s changed nothing", path)
	require.NoError(r.t, os.WriteFile(p, []byte(next), 0o644))
}

// commit commits the work tree, pushes it and returns Flux's name of the revision.
func (r *gitRepo) commit(msg string) string {
	r.t.Helper()
	r.git(r.work, "add", "-A")
	r.git(r.work, "commit", "-q", "-m", msg)
	r.git(r.work, "push", "-q", r.bare, "main")
	return "main@sha1:" + r.git(r.work, "rev-parse", "HEAD")
}

var (
	gitRepositoryGVK = schema.GroupVersionKind{Group: "source.toolkit.fluxcd.io", Version: "v1", Kind: "GitRepository"}
	kustomizationGVK = schema.GroupVersionKind{Group: "kustomize.toolkit.fluxcd.io", Version: "v1", Kind: "Kustomization"}
)

func getFlux(t *testing.T, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	require.NoError(t, framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u))
	return u
}

// requestReconcile is `flux reconcile`: the annotation Flux's controllers (and the operator)
// act on at once. It returns the annotation's value.
func requestReconcile(t *testing.T, gvk schema.GroupVersionKind, ns, name string) string {
	t.Helper()
	at := time.Now().Format(time.RFC3339Nano)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	u.SetName(name)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":%q}}}`, at)
	require.NoError(t, framework.Env.Client.Patch(context.Background(), u, client.RawPatch("application/merge-patch+json", []byte(patch))))
	return at
}

// fluxReady is a Flux object's Ready condition.
func fluxReady(u *unstructured.Unstructured) metav1.Condition {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			s, _ := m["status"].(string)
			reason, _ := m["reason"].(string)
			msg, _ := m["message"].(string)
			return metav1.Condition{Type: "Ready", Status: metav1.ConditionStatus(s), Reason: reason, Message: msg}
		}
	}
	return metav1.Condition{Type: "Ready", Status: metav1.ConditionUnknown, Reason: "NoCondition"}
}

// fluxSample is what Flux and the operator show at one moment.
type fluxSample struct {
	at        time.Duration
	ready     metav1.Condition // the Kustomization's
	applied   string           // status.lastAppliedRevision
	attempted string           // status.lastAttemptedRevision
	cluster   *v1alpha1.EtcdCluster
}

func (s fluxSample) String() string {
	c := "absent"
	if s.cluster != nil {
		c = fmt.Sprintf("generation %d observed %d, %s", s.cluster.Generation, s.cluster.Status.ObservedGeneration, framework.Describe(s.cluster))
	}
	return fmt.Sprintf("Kustomization Ready=%s %s %q, applied %s, attempted %s | EtcdCluster %s",
		s.ready.Status, s.ready.Reason, s.ready.Message, s.applied, s.attempted, c)
}

// syncUntil samples the Kustomization "etcd" and the EtcdCluster "demo" every half second
// until done holds, logging each change, and returns the samples.
func syncUntil(t *testing.T, ns string, timeout time.Duration, what string, done func(fluxSample) bool) []fluxSample {
	t.Helper()
	start := time.Now()
	var samples []fluxSample
	last := ""
	for {
		ks := getFlux(t, kustomizationGVK, ns, "etcd")
		s := fluxSample{at: time.Since(start), ready: fluxReady(ks)}
		s.applied, _, _ = unstructured.NestedString(ks.Object, "status", "lastAppliedRevision")
		s.attempted, _, _ = unstructured.NestedString(ks.Object, "status", "lastAttemptedRevision")
		c := &v1alpha1.EtcdCluster{}
		if err := framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "demo"}, c); err == nil {
			s.cluster = c
		}
		samples = append(samples, s)
		if line := s.String(); line != last {
			t.Logf("%5.1fs %s", s.at.Seconds(), line)
			last = line
		}
		if done(s) {
			return samples
		}
		if time.Since(start) > timeout {
			t.Fatalf("%s: not within %s; last: %s", what, timeout, s)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// synced: the Kustomization applied rev and is Ready, so every object it applied is Current.
func synced(rev string) func(fluxSample) bool {
	return func(s fluxSample) bool { return s.applied == rev && s.ready.Status == metav1.ConditionTrue }
}

// removeFluxSync deletes what sync.yaml made in the order a user would: the cluster's
// Kustomization first (its prune deletes the EtcdCluster while the operator still runs), then
// the operator's and the source.
func removeFluxSync(t *testing.T, ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if err := framework.Kubectl(ctx, "-n", ns, "delete", "--ignore-not-found", "--wait=true", "kustomizations.kustomize.toolkit.fluxcd.io/etcd"); err != nil {
		t.Log(err)
	}
	if err := framework.Kubectl(ctx, "-n", ns, "delete", "--ignore-not-found", "--wait=true",
		"kustomizations.kustomize.toolkit.fluxcd.io/etcdplan-operator", "gitrepositories.source.toolkit.fluxcd.io/etcdplan"); err != nil {
		t.Log(err)
	}
}

// TestFluxSyncsAnEtcdCluster runs examples/flux with Flux's own controllers: the operator and
// an EtcdCluster come from a Git repository, and every change after that is a commit.
func TestFluxSyncsAnEtcdCluster(t *testing.T) {
	t.Parallel()
	installFlux(t)
	ns := framework.Namespace(t)
	repo := newGitRepo(t)
	for _, dir := range []string{"kustomize", "examples/flux"} {
		require.NoError(t, os.MkdirAll(filepath.Join(repo.work, filepath.Dir(dir)), 0o755))
		out, err := exec.Command("cp", "-r", filepath.Join(framework.Env.Root, dir), filepath.Join(repo.work, dir)).CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	repo.edit("examples/flux/sync.yaml", func(s string) string {
		return strings.NewReplacer("etcd-demo", ns, "https://git.example.com/platform/etcd.git", repo.url).Replace(s)
	})
	cluster := "examples/flux/cluster/etcdcluster.yaml"
	rev := repo.commit("etcd: three members")
	t.Cleanup(func() { removeFluxSync(t, ns) })
	require.NoError(t, framework.Kubectl(context.Background(), "apply", "-f", filepath.Join(repo.work, "examples/flux/sync.yaml")))

	// The Kustomization waits for what it applied: it is Ready only once the cluster is.
	// (Flux may write Ready a moment before lastAppliedRevision: what matters is that the
	// Kustomization is never Ready while the cluster is not.)
	samples := syncUntil(t, ns, 5*time.Minute, "the first sync", synced(rev))
	for _, s := range samples[:len(samples)-1] {
		if s.ready.Status == metav1.ConditionTrue {
			require.True(t, s.cluster != nil && framework.Ready(s.cluster), "Ready before the cluster was: %s", s)
		}
	}
	require.True(t, framework.Ready(samples[len(samples)-1].cluster))

	// A commit that scales 3 -> 5: not Ready while the plan runs, Ready when it is done.
	repo.edit(cluster, func(s string) string { return strings.Replace(s, "replicas: 3", "replicas: 5", 1) })
	rev = repo.commit("etcd: five members")
	requestReconcile(t, gitRepositoryGVK, ns, "etcdplan")
	samples = syncUntil(t, ns, 5*time.Minute, "the scale-out", synced(rev))
	running := false
	for _, s := range samples {
		if s.cluster != nil && s.cluster.Status.Plan != nil && s.cluster.Status.Plan.Phase == v1alpha1.PlanRunning {
			running = true
			require.NotEqual(t, metav1.ConditionTrue, s.ready.Status, "Ready while the plan ran: %s", s)
		}
	}
	require.True(t, running, "the plan was seen running")
	require.Len(t, framework.CheckMembership(t, ns, "demo").Members, 5)

	// A change the planner refuses stalls the cluster, and Flux fails at once (fail-fast),
	// long before the Kustomization's 10 minute timeout.
	repo.edit(cluster, func(s string) string { return strings.Replace(s, "version: 3.6.16", "version: 3.8.0", 1) })
	rev = repo.commit("etcd: 3.8.0")
	requestReconcile(t, gitRepositoryGVK, ns, "etcdplan")
	s := syncUntil(t, ns, 3*time.Minute, "the refused change", func(s fluxSample) bool {
		return s.attempted == rev && s.ready.Status == metav1.ConditionFalse && s.ready.Reason == "HealthCheckFailed"
	})
	last := s[len(s)-1]
	require.Contains(t, last.ready.Message, "failed early due to stalled resources")
	require.Contains(t, last.ready.Message, "EtcdCluster/"+ns+"/demo status: 'Failed'")
	stalled := framework.Condition(last.cluster, "Stalled")
	require.NotNil(t, stalled)
	require.Equal(t, metav1.ConditionTrue, stalled.Status)
	require.Contains(t, stalled.Message, "3.8.0")
	t.Logf("the cluster says why: Stalled %s: %s", stalled.Reason, stalled.Message)
	repo.edit(cluster, func(s string) string { return strings.Replace(s, "version: 3.8.0", "version: 3.6.16", 1) })
	rev = repo.commit("etcd: back to 3.6.16")
	requestReconcile(t, gitRepositoryGVK, ns, "etcdplan")
	syncUntil(t, ns, 3*time.Minute, "the revert", synced(rev))

	// Manual approval through Git: the plan waits; the approval is a commit of the plan's ID
	// as `kubectl etcd plan` prints it.
	repo.edit(cluster, func(s string) string {
		return strings.Replace(s, "replicas: 5", "replicas: 3\n  updateStrategy:\n    approval: Manual", 1)
	})
	rev = repo.commit("etcd: three members, approved by hand")
	requestReconcile(t, gitRepositoryGVK, ns, "etcdplan")
	s = syncUntil(t, ns, 3*time.Minute, "the plan awaiting approval", func(s fluxSample) bool {
		return s.attempted == rev && s.cluster != nil && s.cluster.Status.Plan != nil && s.cluster.Status.Plan.Phase == v1alpha1.PlanAwaitingApproval
	})
	last = s[len(s)-1]
	require.NotEqual(t, metav1.ConditionTrue, last.ready.Status)
	require.Equal(t, status.InProgressStatus, kstatus(t, last.cluster))
	// The pull-request comment: what the plan changes, what it deletes, and the annotation
	// that approves it, which is what the next commit adds.
	_, comment, _ := kubectlEtcd(t, ns, "plan", "-k", filepath.Join(repo.work, "examples/flux/cluster"), "-o", "markdown")
	p := livePlan(t, ns, filepath.Join(repo.work, cluster), 2)
	require.Equal(t, last.cluster.Status.Plan.ID, p.ID, "the plan printed is the plan waiting")
	require.Contains(t, comment, fmt.Sprintf("**Plan `%s`: 4 steps, 5 -> 3 voters.** Leaving: demo-4, demo-3.", p.ID))
	require.Contains(t, comment, "> [!CAUTION]\n> - Step 2 (DeleteMember demo-4) deletes the Pod and volume of demo-4")
	require.Contains(t, comment, "kubectl etcd approve demo --plan "+p.ID)
	annotation := regexp.MustCompile("`(etcdplan.io/approve: \"[0-9a-f]+\")`").FindStringSubmatch(comment)
	require.NotNil(t, annotation, "the comment names the annotation that approves the plan")
	repo.edit(cluster, func(s string) string {
		return strings.Replace(s, "metadata:\n  name: demo\n", "metadata:\n  name: demo\n  annotations:\n    "+annotation[1]+"\n", 1)
	})
	rev = repo.commit("etcd: approve plan " + p.ID)
	requestReconcile(t, gitRepositoryGVK, ns, "etcdplan")
	samples = syncUntil(t, ns, 5*time.Minute, "the approved plan", synced(rev))
	c := samples[len(samples)-1].cluster
	require.Equal(t, p.ID, c.Status.History[0].ID)
	require.Len(t, framework.CheckMembership(t, ns, "demo").Members, 3)

	// The operator honours Flux's reconcile request on its own object.
	at := requestReconcile(t, v1alpha1.GroupVersion.WithKind("EtcdCluster"), ns, "demo")
	framework.WaitFor(t, ns, "demo", time.Minute, "the reconcile request handled", func(c *v1alpha1.EtcdCluster) bool {
		return c.Status.LastHandledReconcileAt == at
	})

	// The operator never writes spec: Git's five spec changes are the generation, and only
	// Flux manages spec fields, so Flux never sees drift nor a field-manager conflict.
	c = framework.Get(t, ns, "demo")
	require.EqualValues(t, 5, c.Generation)
	require.Equal(t, c.Generation, c.Status.ObservedGeneration)
	for _, mf := range c.ManagedFields {
		if mf.Subresource == "" && mf.FieldsV1 != nil && strings.Contains(string(mf.FieldsV1.Raw), `"f:spec"`) {
			require.Equal(t, "kustomize-controller", mf.Manager, "spec fields managed by %s", mf.Manager)
		}
	}
}
