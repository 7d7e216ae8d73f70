package controller

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/internal/kubetest"
	"github.com/etcdplan/etcdplan/executor/pki"
	"github.com/etcdplan/etcdplan/planner"
)

// sourceMember is a member of a running cluster outside Kubernetes.
func sourceMember(id, name string) planner.EtcdMember {
	return planner.EtcdMember{ID: id, Name: name, PeerURLs: []string{"http://" + name + ".elsewhere:2380"}, ClientURLs: []string{"http://" + name + ".elsewhere:2379"},
		Answering: true, Leader: "a1", Version: "3.6.16", RaftIndex: 100}
}

// adoptFixture is cluster demo of 3 adopting a running cluster of three members, a1..a3.
func adoptFixture(t *testing.T) *fixture {
	f := newFixture(t, 0, func(c *v1alpha1.EtcdCluster) {
		c.Spec.Replicas, c.Status.ClusterID, c.Status.NextOrdinal = 3, "", 0
		c.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Join: &v1alpha1.JoinSpec{Endpoints: []string{"http://127.0.0.1:1"}}}
	})
	f.etcd.SetView(&planner.EtcdView{ClusterID: "c9", Linearizable: true, LeaderID: "a1",
		Members: []planner.EtcdMember{sourceMember("a1", "old-0"), sourceMember("a2", "old-1"), sourceMember("a3", "old-2")}})
	return f
}

// The source's first answer gives the cluster its ID and records the source's members; the
// plan joins the cluster's first member as a learner. The last source member leaves only
// once approved, and when it did the adoption is done, with an Event saying what is left to
// do by hand.
func TestAdoptionRecordsTheSourceAndHoldsItsLastMember(t *testing.T) {
	f := adoptFixture(t)
	c, _ := f.reconcile()
	require.Equal(t, "c9", c.Status.ClusterID)
	require.Equal(t, v1alpha1.JoinAdopting, c.Status.Join.Phase)
	require.Len(t, c.Status.Join.Source, 3)
	require.Equal(t, "http://old-0.elsewhere:2379", c.Status.Join.Source[0].ClientURLs[0], "no endpoint of the spec answered as it")
	require.Contains(t, c.Finalizers, v1alpha1.FinalizerAdoption, "its deletion waits for a rollback")
	require.NotNil(t, c.Status.Plan)
	require.Equal(t, plan.AddLearner, c.Status.Plan.Steps[0].Action)
	require.Equal(t, plan.WhyAdoptJoin, c.Status.Plan.Steps[0].Why)

	// The cluster's three members joined and lead; old-0 is the last source member.
	f.setView(func(v *planner.EtcdView) {
		v.Members, v.LeaderID = v.Members[:1], "1"
		v.Members[0].Leader = "1"
		for i, name := range []string{"demo-0", "demo-1", "demo-2"} {
			id := string(rune('1' + i))
			v.Members = append(v.Members, planner.EtcdMember{ID: id, Name: name, PeerURLs: []string{"http://" + name + ".demo.ns.svc:2380"},
				Answering: true, Leader: "1", Version: "3.6.16", RaftIndex: 100})
		}
	})
	for i, name := range []string{"demo-0", "demo-1", "demo-2"} {
		require.NoError(t, client.IgnoreAlreadyExists(f.kube.Create(context.Background(), kubetest.MemberPod(c, name))))
		require.NoError(t, client.IgnoreAlreadyExists(f.kube.Create(context.Background(), kubetest.MemberPVC(c, name, string(rune('1'+i))))))
	}
	c, _ = f.reconcile()
	require.True(t, c.Status.Join.SourceLeft)
	require.Equal(t, v1alpha1.PlanAwaitingApproval, c.Status.Plan.Phase, "%+v", c.Status.Plan)
	require.Equal(t, plan.WhySourceLast, c.Status.Plan.Steps[c.Status.Plan.Current].Why)
	require.Contains(t, conditions.GetMessage(c, meta.ReadyCondition), "removes the last source member old-0")
	require.NotContains(t, f.etcd.Calls(), "Remove a1")

	f.approve(c.Status.Plan.ID)
	f.reconcile()
	require.Contains(t, f.etcd.Calls(), "Remove a1")
	c, _ = f.reconcile()
	require.Equal(t, v1alpha1.JoinSourceRemoved, c.Status.Join.Phase)
	c, _ = f.reconcile()
	require.NotContains(t, c.Finalizers, v1alpha1.FinalizerAdoption, "no rollback once a source member left")
	require.True(t, slices.ContainsFunc(f.drain(), func(e string) bool { return strings.Contains(e, "every source member left") }))

	// The user's word that the removed members are stopped and wiped ends the adoption.
	require.Equal(t, plan.Acknowledge, c.Status.Plan.Steps[c.Status.Plan.Current].Action)
	require.Equal(t, v1alpha1.PlanAwaitingApproval, c.Status.Plan.Phase)
	require.Contains(t, conditions.GetMessage(c, meta.ReadyCondition), "old-0 (peer URLs")
	f.approve(c.Status.Plan.ID)
	f.reconcile()
	c, _ = f.reconcile()
	require.Equal(t, v1alpha1.JoinAdopted, c.Status.Join.Phase)
	require.Nil(t, c.Status.Plan, "the adoption is done")
	require.True(t, slices.ContainsFunc(f.drain(), func(e string) bool { return strings.Contains(e, "the adoption is done") }))
}

// An EtcdCluster deleted while its adoption can be rolled back takes its members out of the
// source first; once they are out, it goes.
func TestDeletedAdoptionRollsBackFirst(t *testing.T) {
	f := adoptFixture(t)
	f.reconcile()
	f.reconcile() // demo-0 was added as a learner
	require.Contains(t, f.etcd.Calls(), "AddLearner http://demo-0.demo.ns.svc:2380")
	require.NoError(t, f.kube.Delete(context.Background(), f.cluster()))
	c, _ := f.reconcile()
	require.NotNil(t, c.DeletionTimestamp)
	require.Contains(t, f.etcd.Calls(), "Remove 101", "the learner left the source: %v", f.etcd.Calls())
	for range 5 {
		if err := f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "demo"}, c); err != nil {
			require.True(t, apierrors.IsNotFound(err))
			return
		}
		f.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "demo"}}) //nolint:errcheck
	}
	t.Fatalf("the EtcdCluster is still there: %+v", c.Status.Plan)
}

// A source with authentication on gets the operator's users first, as the source user the
// join's credentials name: the common names of both certificates the operator offers (its
// own, and the source's client certificate). Auth stays on.
func TestAdoptedAuthMakesTheOperatorsUsersFirst(t *testing.T) {
	f := newFixture(t, 0, func(c *v1alpha1.EtcdCluster) {
		c.Spec.Replicas, c.Status.ClusterID, c.Status.NextOrdinal = 3, "", 0
		c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto, Peer: &v1alpha1.TLSSideSpec{Mode: v1alpha1.TLSDisabled}}
		c.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true, RootPasswordSecret: "src-root"}
		c.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Join: &v1alpha1.JoinSpec{Endpoints: []string{"https://127.0.0.1:1"},
			TLSSecretName: "src-client", CredentialsSecretName: "src-root"}}
	})
	ca, err := pki.NewCA("source CA", f.now, time.Hour)
	require.NoError(t, err)
	leaf, err := pki.Issue(ca, pki.Request{CommonName: "adopter", Client: true, NotBefore: f.now, Validity: time.Hour})
	require.NoError(t, err)
	ctx := context.Background()
	require.NoError(t, f.kube.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "src-client"},
		Data: map[string][]byte{"ca.crt": ca.Cert, "tls.crt": leaf.Cert, "tls.key": leaf.Key}}))
	require.NoError(t, f.kube.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "src-root"},
		Data: map[string][]byte{"username": []byte("root"), "password": []byte("pw")}}))
	on := true
	f.etcd.SetView(&planner.EtcdView{ClusterID: "c9", Linearizable: true, LeaderID: "a1", Auth: &on,
		Members: []planner.EtcdMember{sourceMember("a1", "old-0"), sourceMember("a2", "old-1"), sourceMember("a3", "old-2")}})

	c, _ := f.reconcile()
	require.Equal(t, plan.WhyAuthAdopted, c.Status.Plan.Steps[0].Why, "%+v", c.Status.Plan)
	c, _ = f.reconcile()
	require.Contains(t, f.etcd.Calls(), "AdoptUsers etcdplan-operator,adopter as root")
	require.True(t, c.Status.Join.UsersMade)
	require.True(t, c.Status.Auth.Enabled)
	calls := f.etcd.Calls()
	require.Less(t, slices.Index(calls, "AdoptUsers etcdplan-operator,adopter as root"),
		slices.IndexFunc(calls, func(call string) bool { return strings.HasPrefix(call, "AddLearner") }), "the users before any member joins: %v", calls)
}

// With a backup schedule, leadership moves to demo-0 only once raft messages pass between it
// and every source member (their metrics say), and a snapshot of the cluster is stored as an
// EtcdBackup of demo-0 before the first source member leaves.
func TestAdoptionConnectsAndSnapshotsBeforeTheFirstRemoval(t *testing.T) {
	f := adoptFixture(t)
	ctx := context.Background()
	sched := &v1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly"}}
	sched.Spec.ClusterRef.Name, sched.Spec.Schedule = "demo", "0 3 * * *"
	sched.Spec.Destination.S3 = &v1alpha1.S3Destination{Bucket: "backups", Prefix: "etcd"}
	require.NoError(t, f.kube.Create(ctx, sched))
	c, _ := f.reconcile()
	require.Contains(t, f.etcd.Calls(), "AddLearner http://demo-0.demo.ns.svc:2380")
	f.setView(func(v *planner.EtcdView) { // demo-0 (member 101) started and was promoted
		v.Members = append(v.Members[:3], planner.EtcdMember{ID: "101", Name: "demo-0", PeerURLs: []string{"http://demo-0.demo.ns.svc:2380"},
			Answering: true, Leader: "a1", Version: "3.6.16", RaftIndex: 100})
	})
	require.NoError(t, client.IgnoreAlreadyExists(f.kube.Create(ctx, kubetest.MemberPod(c, "demo-0"))))
	require.NoError(t, client.IgnoreAlreadyExists(f.kube.Create(ctx, kubetest.MemberPVC(c, "demo-0", "101"))))

	f.etcd.Cut = []string{"101"}
	f.reconcile()
	c, _ = f.reconcile()
	rec := c.Status.Plan
	require.Equal(t, plan.TransferLeadership, rec.Steps[rec.Current].Action, "%+v", rec.Steps)
	require.Equal(t, plan.PrePeersConnected, rec.Steps[rec.Current].Precondition.Kind)
	require.Contains(t, rec.Progress[rec.Current].Message, "old-0 does not count demo-0 an active peer")
	require.NotContains(t, strings.Join(f.etcd.Calls(), " "), "MoveLeader")

	f.etcd.Cut = nil
	f.reconcile()
	require.Contains(t, f.etcd.Calls(), "MoveLeader a1 101")
	c, _ = f.reconcile()
	rec = c.Status.Plan
	require.Equal(t, plan.SnapshotSource, rec.Steps[rec.Current].Action, "%+v", rec.Steps)
	snap := &v1alpha1.EtcdBackup{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-adopted"}, snap))
	require.Equal(t, "101", snap.Spec.Member, "read from the cluster's own new leader")
	require.Equal(t, "backups", snap.Spec.Destination.S3.Bucket, "the schedule's destination")
	f.reconcile()
	require.NotContains(t, strings.Join(f.etcd.Calls(), " "), "Remove a", "no source member leaves before the snapshot is stored")

	snap.Status.Phase = v1alpha1.BackupSucceeded
	snap.Status.Artifact = &v1alpha1.Artifact{URI: "s3://backups/etcd/demo-adopted.db", Revision: 7, ClusterID: "c9", TakenAt: metav1.NewTime(f.now)}
	require.NoError(t, f.kube.Status().Update(ctx, snap))
	f.reconcile()
	f.reconcile()
	require.Contains(t, f.etcd.Calls(), "Remove a1", "a source member leaves once the snapshot is stored")
}
