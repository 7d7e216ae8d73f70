package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/planner"
)

// A member's claim records the version it answered with; a member that stops answering
// (a failed upgrade) keeps it, in status too, so its data's version is still known.
func TestClaimRecordsTheVersionAMemberAnswered(t *testing.T) {
	f := newFixture(t, 3, nil)
	c, _ := f.reconcile()
	for _, m := range c.Status.Members {
		var pvc corev1.PersistentVolumeClaim
		require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: m.Name}, &pvc))
		require.Equal(t, "3.6.16", pvc.Annotations[vocab.AnnotationRanVersion])
	}
	f.setView(func(v *planner.EtcdView) {
		v.Members[1].Answering, v.Members[1].Leader, v.Members[1].Version = false, "", ""
	})
	c, _ = f.reconcile()
	require.Equal(t, "3.6.16", c.Status.Members[1].Version, "the version it last answered with")
	require.False(t, c.Status.Members[1].Healthy)
}

// A voter whose Pod went gets a new Pod that carries the voter role from the start: the
// client Service selects it as soon as it is ready, with no patch after it runs. A learner's
// Pod starts as a learner.
func TestNewPodCarriesItsRole(t *testing.T) {
	f := newFixture(t, 3, func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 4 })
	require.NoError(t, f.kube.Delete(context.Background(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-1"}}))
	f.setView(func(v *planner.EtcdView) {
		v.Members[1].Answering, v.Members[1].Leader = false, ""
		f.learnerAdded(v)
	})
	for _, want := range []struct {
		name string
		role v1alpha1.MemberRole
	}{{"demo-1", v1alpha1.RoleVoter}, {"demo-3", v1alpha1.RoleLearner}} {
		f.reconcile() // creates the Pod; a later reconcile's housekeeping would mend its label
		p := &corev1.Pod{}
		require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: want.name}, p), "the Pod of %s is created", want.name)
		require.Equal(t, string(want.role), p.Labels[v1alpha1.LabelRole], want.name)
		f.now = f.now.Add(time.Second)
	}
}

// A restarted operator does not apply again the Services and the PodDisruptionBudget that
// are as it would render them: the hash of the last rendering applied is on each.
func TestRestartedOperatorSkipsWhatIsApplied(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.reconcile()
	c := f.cluster()
	objs := []client.Object{resources.Headless(c), resources.Client(c), resources.PDB(c, 3)}
	versions := map[string]string{}
	for _, o := range objs {
		require.NoError(t, f.kube.Get(context.Background(), client.ObjectKeyFromObject(o), o))
		require.NotEmpty(t, o.GetAnnotations()[vocab.AnnotationApplied])
		versions[o.GetName()] = o.GetResourceVersion()
	}
	counted := &applyCounter{Client: f.kube}
	f.r = &Reconciler{Client: counted, APIReader: f.kube, Recorder: f.events, Dial: f.etcd.Dial, Now: f.r.Now} // nothing applied in memory
	f.reconcile()
	require.Zero(t, counted.applies, "nothing is applied again")
	for _, o := range objs {
		require.NoError(t, f.kube.Get(context.Background(), client.ObjectKeyFromObject(o), o))
		require.Equal(t, versions[o.GetName()], o.GetResourceVersion(), "%s is not written again", o.GetName())
	}
}

// applyCounter counts server-side applies.
type applyCounter struct {
	client.Client
	applies int
}

func (a *applyCounter) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	if p.Type() == types.ApplyPatchType {
		a.applies++
	}
	return a.Client.Patch(ctx, obj, p, opts...)
}

// Delete -> Retain takes the cluster's ownership off the volume claims, and back.
func TestRetainPolicyFollowsTheSpec(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.RetainPolicy = v1alpha1.RetainPolicyDelete })
	f.reconcile()
	owners := func() int {
		var pvc corev1.PersistentVolumeClaim
		require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "demo-0"}, &pvc))
		return len(pvc.OwnerReferences)
	}
	require.Equal(t, 1, owners())
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.RetainPolicy = v1alpha1.RetainPolicyRetain })
	f.reconcile()
	require.Equal(t, 0, owners())
}
