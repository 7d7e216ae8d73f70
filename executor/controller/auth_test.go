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
	"github.com/etcdplan/etcdplan/executor/pki"
	"github.com/etcdplan/etcdplan/planner"
)

// Auth asked for on a running TLS cluster waits for approval, then makes root's password
// Secret and switches auth on with the operator as the user its certificate names; status
// says so. Asked off, it waits for approval again.
func TestAuthIsSwitchedOnOnceApproved(t *testing.T) {
	f := autoTLS(t)
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

// The users of spec.auth.users are made before auth goes on, each with its certificate in a
// Secret of its own; status records them, and a user taken out of the list is deleted.
func TestUsersAreMadeWithTheirCertificates(t *testing.T) {
	f := autoTLS(t)
	f.setView(func(v *planner.EtcdView) { v.Auth = new(false) })
	f.reconcile()
	f.update(func(c *v1alpha1.EtcdCluster) {
		c.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true, Users: []v1alpha1.AuthUser{
			{Name: "app", Permissions: []v1alpha1.AuthPermission{{Prefix: "/app/", Access: v1alpha1.AuthReadWrite}}}, {Name: "reader"}}}
	})
	c, _ := f.reconcile()
	require.Equal(t, []string{"SyncUsers [app reader] gone []"}, f.etcd.Calls(), "made before auth goes on, which waits for approval")
	require.Equal(t, []string{"app", "reader"}, c.Status.Auth.Users)
	for _, u := range []string{"app", "reader"} {
		var s corev1.Secret
		require.NoError(t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "demo-user-" + u + "-tls"}, &s))
		cert, err := pki.Read(s.Data["tls.crt"])
		require.NoError(t, err)
		require.Equal(t, u, cert.Subject, "the certificate's common name is the user")
	}

	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Auth.Users = c.Spec.Auth.Users[:1] })
	c, _ = f.reconcile()
	require.Contains(t, f.etcd.Calls(), "SyncUsers [app] gone [reader]")
	require.Equal(t, []string{"app"}, c.Status.Auth.Users)
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
