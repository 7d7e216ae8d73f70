package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/cmd/kubectl-etcd/cli"
	"github.com/etcdplan/etcdplan/test/framework"
)

// kubectlEtcd runs kubectl-etcd in-process against the stack, in namespace ns.
func kubectlEtcd(t *testing.T, ns string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	args = append(args, "--kubeconfig", framework.Env.Stack.Kubeconfig(), "-n", ns)
	code := cli.Run(args, &out, &errOut)
	t.Logf("$ kubectl-etcd %s\n%s%s(exit %d)", strings.Join(args, " "), out.String(), errOut.String(), code)
	return code, out.String(), errOut.String()
}

// writeManifest writes the manifest of a Manual-approval cluster, as a user keeps it in Git,
// with the ID of the plan it approves, if any.
func writeManifest(t *testing.T, path, ns string, replicas int, approve string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: etcdplan.io/v1alpha1
kind: EtcdCluster
metadata:
  name: demo
  namespace: %s
  annotations:
    etcdplan.io/approve: %q
spec:
  replicas: %d
  version: 3.6.16
  storage:
    size: 64Mi
  updateStrategy:
    approval: Manual
    progressDeadlineSeconds: 180
`, ns, approve, replicas)), 0o644))
}

// livePlan plans the manifest against the live cluster and returns the plan.
func livePlan(t *testing.T, ns, manifest string, wantCode int) plan.Plan {
	t.Helper()
	code, out, _ := kubectlEtcd(t, ns, "plan", "-f", manifest, "-o", "json", "--detailed-exitcode")
	require.Equal(t, wantCode, code)
	var p plan.Plan
	require.NoError(t, json.Unmarshal([]byte(out), &p))
	return p
}

// The plan a pull request shows (kubectl-etcd plan against the live cluster) is the plan
// the operator records once the manifest is applied, ID and all; status shows it; approve
// lets exactly that plan run.
func TestKubectlEtcdLive(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	manifest := filepath.Join(t.TempDir(), "demo.yaml")
	writeManifest(t, manifest, ns, 3, "")

	bootstrap := livePlan(t, ns, manifest, cli.ExitChanges)
	require.Equal(t, plan.CreateSeed, bootstrap.Steps[0].Action)
	require.NoError(t, framework.Kubectl(t.Context(), "apply", "-f", manifest))
	c := awaitingApproval(t, ns)
	require.Equal(t, bootstrap.ID, c.Status.Plan.ID, "the live plan predicts the recorded plan's ID")
	require.Equal(t, bootstrap.Steps, c.Status.Plan.Steps)

	code, out, _ := kubectlEtcd(t, ns, "status", "demo")
	require.Equal(t, cli.ExitOK, code)
	require.Contains(t, out, "Review the steps, then: kubectl etcd approve demo --plan "+bootstrap.ID)

	code, _, errOut := kubectlEtcd(t, ns, "approve", "demo", "--plan", "000000000000")
	require.Equal(t, cli.ExitError, code)
	require.Contains(t, errOut, "plan 000000000000 is not the pending plan")
	time.Sleep(2 * time.Second)
	require.Empty(t, framework.Endpoints(t, ns, "demo"), "a refused approval runs nothing")

	code, out, _ = kubectlEtcd(t, ns, "approve", "demo", "--plan", bootstrap.ID)
	require.Equal(t, cli.ExitOK, code)
	require.Contains(t, out, "plan "+bootstrap.ID+" approved")
	readyApproving(t, ns)
	w := startWriter(t, ns, "demo")

	// Converged: no changes, live and from the saved observed state alike.
	saved := filepath.Join(t.TempDir(), "observed.json")
	code, out, _ = kubectlEtcd(t, ns, "plan", "-f", manifest, "--detailed-exitcode", "--save-observed", saved)
	require.Equal(t, cli.ExitOK, code)
	require.Contains(t, out, "No changes")
	var offline, errBuf bytes.Buffer
	require.Equal(t, cli.ExitOK, cli.Run([]string{"plan", "-f", manifest, "--observed", saved, "--detailed-exitcode"}, &offline, &errBuf), errBuf.String())

	code, out, _ = kubectlEtcd(t, ns, "status", "demo")
	require.Equal(t, cli.ExitOK, code)
	require.Equal(t, 1, strings.Count(out, "  leader  "), "one leader")
	require.Equal(t, 2, strings.Count(out, "  follower  "), "two followers")
	require.Contains(t, out, bootstrap.ID+"  Succeeded")

	// Scale to 5 in Git: the pull request's plan is the one the operator then waits on, as
	// long as the cluster does not move in between. A Pod turning Ready is such a move, so
	// the plan is made once every Pod's readiness has caught up with etcd's health.
	waitPodsReady(t, ns, 3)
	writeManifest(t, manifest, ns, 5, "")
	scale := livePlan(t, ns, manifest, cli.ExitChanges)
	require.Equal(t, plan.AddLearner, scale.Steps[0].Action)
	// The pull request approves the plan it shows: the annotation is committed with the
	// change, and the operator runs the plan without waiting.
	writeManifest(t, manifest, ns, 5, scale.ID)
	require.Equal(t, scale.ID, livePlan(t, ns, manifest, cli.ExitChanges).ID, "the annotation is not part of the plan")
	require.NoError(t, framework.Kubectl(t.Context(), "apply", "-f", manifest))
	c = framework.WaitReady(t, ns, "demo")
	require.EqualValues(t, 5, c.Status.ReadyReplicas)
	require.Equal(t, scale.ID, c.Status.History[0].ID)
	w.stopAndVerify()
	framework.CheckMembership(t, ns, "demo")
	framework.WaitFor(t, ns, "demo", time.Minute, "the cluster version in status", func(c *v1alpha1.EtcdCluster) bool {
		return c.Status.ClusterVersion == "3.6.0"
	})
}

// waitPodsReady waits until the cluster's n member Pods are all Ready.
func waitPodsReady(t *testing.T, ns string, n int) {
	t.Helper()
	require.NoError(t, wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := framework.Env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelCluster: "demo"}); err != nil {
			return false, nil
		}
		ready := 0
		for i := range pods.Items {
			if framework.PodReady(&pods.Items[i]) {
				ready++
			}
		}
		return len(pods.Items) == n && ready == n, nil
	}), "member Pods Ready")
}

// readyApproving waits for the cluster to be Ready, approving with the CLI, as its user
// would, each plan that comes to await approval meanwhile: a fault while a plan runs (a
// late DNS answer ends a joining member's etcd) has the operator plan anew, and the new plan
// awaits its own approval.
func readyApproving(t *testing.T, ns string) {
	t.Helper()
	framework.WaitFor(t, ns, "demo", 5*time.Minute, "Ready, each plan approved", func(c *v1alpha1.EtcdCluster) bool {
		if p := c.Status.Plan; p != nil && p.Phase == v1alpha1.PlanAwaitingApproval {
			t.Logf("plan %s awaits approval: %s", p.ID, p.Summary)
			kubectlEtcd(t, ns, "approve", "demo", "--plan", p.ID)
		}
		return framework.Ready(c)
	})
}

// awaitingApproval waits for the plan of the current spec to await approval.
func awaitingApproval(t *testing.T, ns string) *v1alpha1.EtcdCluster {
	t.Helper()
	return framework.WaitFor(t, ns, "demo", time.Minute, "a plan awaiting approval", func(c *v1alpha1.EtcdCluster) bool {
		p := c.Status.Plan
		return p != nil && p.Generation == c.Generation && p.Phase == v1alpha1.PlanAwaitingApproval
	})
}
