package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/test/argocd"
	"github.com/etcdplan/etcdplan/test/framework"
)

// Argo CD's tracking label and annotation, set on the EtcdCluster as Argo CD sets them.
const (
	argoLabel      = "app.kubernetes.io/instance"
	argoAnnotation = "argocd.argoproj.io/tracking-id"
)

// phaseChecker computes Flux's kstatus and Argo CD's health (examples/argocd) of live
// objects. With ETCDPLAN_CAPTURE=DIR it also writes each object to DIR/<phase>.json: the
// fixtures of test/argocd come from there.
type phaseChecker struct {
	t    *testing.T
	argo *argocd.Scripts
}

func (p phaseChecker) object(c *v1alpha1.EtcdCluster) map[string]any {
	c = c.DeepCopy()
	c.ManagedFields = nil
	c.APIVersion, c.Kind = v1alpha1.GroupVersion.String(), "EtcdCluster"
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(c)
	require.NoError(p.t, err)
	// The API server always returns observedGeneration (the CRD defaults it to 0); the Go
	// type's omitempty drops a 0, which would make a just-created object look Current.
	require.NoError(p.t, unstructured.SetNestedField(obj, c.Status.ObservedGeneration, "status", "observedGeneration"))
	return obj
}

func (p phaseChecker) check(phase string, c *v1alpha1.EtcdCluster, kstatus status.Status, health string) {
	p.t.Helper()
	obj := p.object(c)
	res, err := status.Compute(&unstructured.Unstructured{Object: obj})
	require.NoError(p.t, err)
	h, err := p.argo.Health(obj)
	require.NoError(p.t, err)
	p.t.Logf("%-17s kstatus %-11s Argo CD %-11s %s", phase, res.Status, h.Status, h.Message)
	require.Equal(p.t, kstatus, res.Status, "%s: kstatus %s", phase, res.Message)
	require.Equal(p.t, health, h.Status, "%s: Argo CD health: %s", phase, h.Message)
	if dir := os.Getenv("ETCDPLAN_CAPTURE"); dir != "" {
		b, err := json.MarshalIndent(obj, "", "  ")
		require.NoError(p.t, err)
		require.NoError(p.t, os.WriteFile(filepath.Join(dir, phase+".json"), append(b, '\n'), 0o644))
	}
}

// act runs an Argo CD action and sends what it changed (annotations, spec.suspend), as
// Argo CD patches the live object with the action's result.
func (p phaseChecker) act(name string, c *v1alpha1.EtcdCluster) {
	p.t.Helper()
	avail, err := p.argo.Available(p.object(c))
	require.NoError(p.t, err)
	require.True(p.t, avail[name], "action %s offered: %v", name, avail)
	out, err := p.argo.Act(name, p.object(c))
	require.NoError(p.t, err)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": out["metadata"].(map[string]any)["annotations"]},
		"spec": map[string]any{"suspend": out["spec"].(map[string]any)["suspend"]}})
	require.NoError(p.t, err)
	require.NoError(p.t, framework.Env.Client.Patch(context.Background(), c, client.RawPatch("application/merge-patch+json", patch)))
}

func running(c *v1alpha1.EtcdCluster) bool {
	return c.Status.ObservedGeneration == c.Generation && c.Status.Plan != nil && c.Status.Plan.Phase == v1alpha1.PlanRunning
}

// TestStatusInEveryPhase walks a cluster through every phase a GitOps tool sees and checks
// what Flux (kstatus) and Argo CD (the health check of examples/argocd) make of it.
func TestStatusInEveryPhase(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	argo, err := argocd.Load(framework.Env.Root)
	require.NoError(t, err)
	p := phaseChecker{t: t, argo: argo}

	c := framework.NewCluster(ns, "demo", 3)
	c.Labels = map[string]string{argoLabel: "etcd-demo"}
	c.Annotations = map[string]string{argoAnnotation: "etcd-demo:etcdplan.io/EtcdCluster:" + ns + "/demo"}
	require.NoError(t, framework.Env.Client.Create(context.Background(), c))
	p.check("just-created", framework.Get(t, ns, "demo"), status.InProgressStatus, "Progressing")

	// A cluster whose first step passes its deadline.
	stuck := framework.NewCluster(ns, "stuck", 1)
	stuck.Spec.UpdateStrategy.ProgressDeadlineSeconds = 10
	stuck.Spec.NodeSelector = map[string]string{"etcdplan.io/no-such-node": "true"}
	require.NoError(t, framework.Env.Client.Create(context.Background(), stuck))

	framework.StartOperator(t, ns)
	p.check("bootstrapping", framework.WaitFor(t, ns, "demo", time.Minute, "bootstrapping", running), status.InProgressStatus, "Progressing")
	p.check("ready", framework.WaitReady(t, ns, "demo"), status.CurrentStatus, "Healthy")

	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 5 })
	p.check("scaling", framework.WaitFor(t, ns, "demo", time.Minute, "scaling", running), status.InProgressStatus, "Progressing")
	c = framework.WaitReady(t, ns, "demo")
	noTrackingOnChildren(t, ns)

	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) {
		c.Spec.UpdateStrategy.Approval = v1alpha1.ApprovalManual
		c.Spec.Replicas = 3
	})
	c = awaitingApproval(t, ns)
	p.check("awaiting-approval", c, status.InProgressStatus, "Suspended")
	p.act("approve", c)
	c = framework.WaitReady(t, ns, "demo")
	require.Equal(t, v1alpha1.PlanSucceeded, c.Status.History[0].Phase)

	p.act("suspend", c)
	c = framework.WaitFor(t, ns, "demo", time.Minute, "suspended", func(c *v1alpha1.EtcdCluster) bool {
		r := framework.Condition(c, "Ready")
		return c.Status.ObservedGeneration == c.Generation && r != nil && r.Reason == "Suspended"
	})
	p.check("suspended", c, status.InProgressStatus, "Suspended")
	p.act("resume", c)
	framework.WaitReady(t, ns, "demo")

	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Version = "3.8.0" })
	p.check("blocked", framework.Refused(t, ns, "demo", time.Minute, string(plan.BlockSkippedMinor)), status.FailedStatus, "Degraded")
	p.check("stalled", framework.WaitFor(t, ns, "stuck", 2*time.Minute, "Stalled past its deadline", func(c *v1alpha1.EtcdCluster) bool {
		s := framework.Condition(c, "Stalled")
		return s != nil && s.Status == metav1.ConditionTrue
	}), status.FailedStatus, "Degraded")

	// Argo CD deletes in the foreground: the cluster shows deleting until its Pods are gone.
	require.NoError(t, framework.Env.Client.Delete(context.Background(), framework.Get(t, ns, "demo"), client.PropagationPolicy(metav1.DeletePropagationForeground)))
	p.check("deleting", framework.WaitFor(t, ns, "demo", 30*time.Second, "deleting", func(c *v1alpha1.EtcdCluster) bool {
		return c.DeletionTimestamp != nil
	}), status.TerminatingStatus, "Progressing")
}

// noTrackingOnChildren: Argo CD's tracking label and annotation stay on the EtcdCluster; a
// child object carrying them would show in the Application as its own, to be pruned.
func noTrackingOnChildren(t *testing.T, ns string) {
	t.Helper()
	var pods corev1.PodList
	var svcs corev1.ServiceList
	for _, l := range []client.ObjectList{&pods, &corev1.PersistentVolumeClaimList{}, &svcs, &policyv1.PodDisruptionBudgetList{}} {
		require.NoError(t, framework.Env.Client.List(context.Background(), l, client.InNamespace(ns)))
		// Members carry app.kubernetes.io/instance=<cluster name> of their own (Kubernetes'
		// recommended labels), never the value Argo CD put on the EtcdCluster.
		require.NoError(t, apimeta.EachListItem(l, func(item runtime.Object) error {
			o := item.(client.Object)
			_, ann := o.GetAnnotations()[argoAnnotation]
			require.False(t, ann || o.GetLabels()[argoLabel] == "etcd-demo", "%T %s carries Argo CD's tracking: %v %v",
				o, o.GetName(), o.GetLabels(), o.GetAnnotations())
			return nil
		}))
	}
	require.NotEmpty(t, pods.Items)
	require.NotEmpty(t, svcs.Items)
}
