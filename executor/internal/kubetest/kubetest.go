// Package kubetest is what the reconcilers' tests run against: a fake Kubernetes API that
// checks every status written by Flux's conditions rules, holding one EtcdCluster "demo" of
// running members, and the view a fake etcd behind them gives.
package kubetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/fluxcd/pkg/runtime/conditions/check"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/planner"
)

// Demo is the cluster "demo" with that many running members and their claims, edited by edit,
// and etcd's view of it: every member answers, member 1 leads.
func Demo(members int, edit func(c *v1alpha1.EtcdCluster)) ([]client.Object, *planner.EtcdView) {
	c := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns", UID: "uid-demo", Generation: 1}}
	c.Spec.Replicas, c.Spec.Version = int32(members), "3.6.16"
	c.Spec.Storage.Size, c.Spec.Storage.RetainPolicy = resource.MustParse("1Gi"), v1alpha1.RetainPolicyRetain
	c.Spec.UpdateStrategy = v1alpha1.UpdateStrategy{Approval: v1alpha1.ApprovalAutomatic, ProgressDeadlineSeconds: 60}
	c.Status.ClusterID, c.Status.NextOrdinal = "c1", int32(members)
	if edit != nil {
		edit(c)
	}
	objs := []client.Object{c}
	view := &planner.EtcdView{ClusterID: "c1", Linearizable: true, LeaderID: "1"}
	for i := 0; i < members; i++ {
		name, id := vocab.MemberName("demo", i), strconv.Itoa(i+1)
		objs = append(objs, MemberPod(c, name), MemberPVC(c, name, id))
		view.Members = append(view.Members, planner.EtcdMember{ID: id, Name: name, PeerURLs: []string{resources.PeerURL(c, name)},
			Answering: true, Leader: "1", Version: "3.6.16", RaftIndex: 100})
	}
	return objs, view
}

// Client is a fake API server holding objs. listErr, when it returns an error, fails every
// List, as an API server that does not answer.
func Client(t *testing.T, listErr func() error, objs ...client.Object) client.Client {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	list := func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
		if err := listErr(); err != nil {
			return err
		}
		return c.List(ctx, l, opts...)
	}
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).WithStatusSubresource(&v1alpha1.EtcdCluster{}, &v1alpha1.EtcdBackup{}, &v1alpha1.EtcdBackupSchedule{}).
		WithInterceptorFuncs(interceptor.Funcs{Create: createAtGeneration1, SubResourcePatch: checkedStatusPatch(t), List: list}).Build()
}

// createAtGeneration1 creates objects as the API server does: at generation 1.
func createAtGeneration1(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
	if obj.GetGeneration() == 0 {
		obj.SetGeneration(1)
	}
	return c.Create(ctx, obj, opts...)
}

// checkedStatusPatch runs Flux's conditions check (fluxcd/pkg/runtime conditions/check, the
// rules Flux's own controllers are tested with) on every status the operator writes: Ready is
// always there, False while Reconciling or Stalled, never both of those, and observedGeneration
// never ahead of the generation.
func checkedStatusPatch(t *testing.T) func(context.Context, client.Client, string, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	return func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
		if err := c.SubResource(sub).Patch(ctx, obj, p, opts...); err != nil || sub != "status" {
			return err
		}
		// Writes may run on another goroutine: report with Errorf, and fail the write.
		getter, ok := obj.(conditions.Getter)
		if !ok {
			t.Errorf("%T has no conditions", obj)
			return fmt.Errorf("%T has no conditions", obj)
		}
		chk := check.NewChecker(c, &check.Conditions{NegativePolarity: []string{meta.StalledCondition, meta.ReconcilingCondition}})
		chk.DisableFetch = true
		if err := errors.Join(chk.Check(ctx, getter)); err != nil {
			t.Errorf("status of %T %s fails Flux's conditions check: %v\nconditions: %v", obj, obj.GetName(), err, getter.GetConditions())
			return err
		}
		return nil
	}
}

// MemberPod is a running member Pod of c, a voter.
func MemberPod(c *v1alpha1.EtcdCluster, name string) *corev1.Pod {
	return MemberPodServing(c, name, plan.Listen{})
}

// MemberPodServing is a running member Pod of c, a voter, serving as l says.
func MemberPodServing(c *v1alpha1.EtcdCluster, name string, l plan.Listen) *corev1.Pod {
	p := resources.MemberPod(c, resources.Images{EtcdRepository: "etcd", Operator: "op"}, resources.MemberSpec{Name: name, Version: c.Spec.Version, Listen: l})
	p.Labels[v1alpha1.LabelRole] = string(v1alpha1.RoleVoter)
	p.OwnerReferences = []metav1.OwnerReference{{APIVersion: v1alpha1.GroupVersion.String(), Kind: "EtcdCluster", Name: c.Name, UID: c.UID, Controller: ptr.To(true)}}
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.88.0." + strings.TrimPrefix(name, "demo-"),
		ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	return p
}

// MemberPVC is a bound claim of c recording member ID id.
func MemberPVC(c *v1alpha1.EtcdCluster, name, id string) *corev1.PersistentVolumeClaim {
	pvc := resources.MemberPVC(c, name)
	pvc.Annotations = map[string]string{vocab.AnnotationMemberID: id}
	pvc.Status.Phase = corev1.ClaimBound
	return pvc
}
