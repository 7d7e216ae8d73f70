package controller

import (
	"context"
	"testing"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/certs"
	"github.com/etcdplan/etcdplan/planner"
)

// Auth asked for on a running TLS cluster waits for approval, then makes root's password
// Secret and switches auth on with the operator as the user its certificate names; status
// says so. Asked off, it waits for approval again.
func TestAuthIsSwitchedOnOnceApproved(t *testing.T) {
	f := newFixture(t, 3, func(c *v1alpha1.EtcdCluster) {
		c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto}
	})
	boot := f.cluster()
	boot.Status.ClusterID = ""
	_, err := f.r.certs().Ensure(context.Background(), boot, nil, f.now)
	require.NoError(t, err)
	f.setView(func(v *planner.EtcdView) { v.Auth = new(false) })
	f.reconcile()
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true} })

	c, _ := f.reconcile()
	require.NotNil(t, c.Status.Plan)
	require.Equal(t, v1alpha1.PlanAwaitingApproval, c.Status.Plan.Phase)
	require.Contains(t, conditions.GetMessage(c, meta.ReadyCondition), "switches etcd's authentication on")
	require.NotContains(t, f.etcd.Calls(), "EnableAuth "+certs.OperatorCommonName)

	f.approve(c.Status.Plan.ID)
	c, _ = f.reconcile()
	require.Contains(t, f.etcd.Calls(), "EnableAuth "+certs.OperatorCommonName)
	var s corev1.Secret
	require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "demo-root"}, &s))
	require.GreaterOrEqual(t, len(s.Data[certs.RootPasswordKey]), 24, "a random password")
	c, _ = f.reconcile()
	require.Equal(t, &v1alpha1.AuthStatus{Enabled: true, ClusterID: c.Status.ClusterID, User: certs.OperatorCommonName,
		RootPasswordSecret: "demo-root"}, c.Status.Auth)
	require.Nil(t, c.Status.Plan)

	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Auth = nil })
	c, _ = f.reconcile()
	require.Equal(t, v1alpha1.PlanAwaitingApproval, c.Status.Plan.Phase)
	require.Contains(t, conditions.GetMessage(c, meta.ReadyCondition), "switches etcd's authentication off")
	f.approve(c.Status.Plan.ID)
	f.reconcile()
	require.Contains(t, f.etcd.Calls(), "DisableAuth")
	c, _ = f.reconcile()
	require.False(t, c.Status.Auth.Enabled)
}

// A root password Secret without its key stalls the step with a reason, and is not
// overwritten.
func TestRootPasswordSecretWithoutPasswordStalls(t *testing.T) {
	f := newFixture(t, 3, func(c *v1alpha1.EtcdCluster) {
		c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto}
		c.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true, RootPasswordSecret: "mine"}
	})
	require.NoError(t, f.kube.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "mine"}, Data: map[string][]byte{"other": []byte("x")}}))
	_, err := f.r.certs().RootPassword(context.Background(), f.cluster())
	require.ErrorContains(t, err, `Secret mine has no key "password"`)
}
