package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/test/framework"
)

// kstatus computes the status Flux and kubectl-style tools derive from the conditions.
func kstatus(t *testing.T, c *v1alpha1.EtcdCluster) status.Status {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	require.NoError(t, err)
	res, err := status.Compute(&unstructured.Unstructured{Object: obj})
	require.NoError(t, err)
	return res.Status
}

func TestSuspendStopsAllChanges(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	framework.CreateReady(t, ns, 1)
	require.Equal(t, status.CurrentStatus, kstatus(t, framework.Get(t, ns, "demo")))

	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Suspend = true })
	framework.WaitFor(t, ns, "demo", time.Minute, "suspended", func(c *v1alpha1.EtcdCluster) bool {
		r := framework.Condition(c, "Ready")
		return c.Status.ObservedGeneration == c.Generation && r != nil && r.Reason == "Suspended"
	})
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 3 })
	time.Sleep(5 * time.Second)
	require.Len(t, framework.Endpoints(t, ns, "demo"), 1, "a suspended cluster does not change")

	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Suspend = false })
	framework.WaitReady(t, ns, "demo")
	framework.CheckMembership(t, ns, "demo")
}

func TestManualApprovalHoldsThePlan(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "demo", 1)
	c.Spec.UpdateStrategy.Approval = v1alpha1.ApprovalManual
	require.NoError(t, framework.Env.Client.Create(context.Background(), c))
	c = framework.WaitFor(t, ns, "demo", time.Minute, "a plan awaiting approval", func(c *v1alpha1.EtcdCluster) bool {
		return c.Status.Plan != nil && c.Status.Plan.Phase == v1alpha1.PlanAwaitingApproval
	})
	require.Equal(t, status.InProgressStatus, kstatus(t, c))
	time.Sleep(3 * time.Second)
	require.Empty(t, framework.Endpoints(t, ns, "demo"), "nothing runs before approval")

	id := c.Status.Plan.ID
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[v1alpha1.AnnotationApprove] = id
	})
	c = framework.WaitReady(t, ns, "demo")
	require.Equal(t, id, c.Status.History[0].ID)
	require.Equal(t, v1alpha1.PlanSucceeded, c.Status.History[0].Phase)
}

func TestStepPastItsDeadlineStalls(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	c := framework.NewCluster(ns, "demo", 3)
	c.Spec.UpdateStrategy.ProgressDeadlineSeconds = 10
	c.Spec.NodeSelector = map[string]string{"etcdplan.io/no-such-node": "true"} // the seed never runs
	require.NoError(t, framework.Env.Client.Create(context.Background(), c))
	c = framework.WaitFor(t, ns, "demo", 2*time.Minute, "Stalled", func(c *v1alpha1.EtcdCluster) bool {
		s := framework.Condition(c, "Stalled")
		return s != nil && s.Status == "True"
	})
	require.Equal(t, status.FailedStatus, kstatus(t, c))
	require.Contains(t, framework.Condition(c, "Stalled").Message, "did not finish within 10s")
	require.Equal(t, "False", string(framework.Condition(c, "Ready").Status))
}

func TestDeletedClusterKeepsItsVolumes(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	before := framework.CreateReady(t, ns, 3)
	w := writeAWhile(t, ns, "demo")

	require.NoError(t, framework.Env.Client.Delete(context.Background(), before))
	require.Eventually(t, func() bool {
		var pods corev1.PodList
		var svcs corev1.ServiceList
		_ = framework.Env.Client.List(context.Background(), &pods, client.InNamespace(ns))
		_ = framework.Env.Client.List(context.Background(), &svcs, client.InNamespace(ns))
		return len(pods.Items) == 0 && len(svcs.Items) == 0
	}, 2*time.Minute, time.Second, "Pods and Services go with the cluster")
	var pvcs corev1.PersistentVolumeClaimList
	require.NoError(t, framework.Env.Client.List(context.Background(), &pvcs, client.InNamespace(ns)))
	require.Len(t, pvcs.Items, 3, "volumes stay (retainPolicy Retain)")

	after := framework.CreateReady(t, ns, 3)
	require.Equal(t, before.Status.ClusterID, after.Status.ClusterID, "the re-created cluster is the same etcd cluster")
	w.stillThere() // the writes from before must be there too
}

// TestOperatorCrashAfterEachStep stops the operator right after every step's effect, before
// the step is recorded, through bootstrap, scale up, scale down and a restart of every member.
func TestOperatorCrashAfterEachStep(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	markers := filepath.Join(t.TempDir(), "failpoints")
	op := framework.StartOperator(t, ns, "--test-crash-after-effect="+markers)
	framework.CreateReady(t, ns, 3)
	w := startWriter(t, ns, "demo")
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 4 })
	framework.WaitReady(t, ns, "demo")
	framework.CheckMembership(t, ns, "demo")
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 3 })
	framework.WaitReady(t, ns, "demo")
	q := int64(256 << 20)
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Options.QuotaBackendBytes = &q })
	c := framework.WaitReady(t, ns, "demo")
	framework.CheckMembership(t, ns, "demo")
	w.stopAndVerify()

	crashes, err := os.ReadDir(markers)
	require.NoError(t, err)
	t.Logf("the operator stopped %d times after a step's effect and resumed each time", len(crashes))
	require.GreaterOrEqual(t, op.Restarts(), len(crashes))
	require.GreaterOrEqual(t, len(crashes), 7+3+2+4, "every step of every plan was interrupted once")
	for _, m := range c.Status.Members {
		require.Equal(t, v1alpha1.RoleVoter, m.Role, "no learner is left behind")
	}
}
