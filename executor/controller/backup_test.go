package controller

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/store"
	"github.com/etcdplan/etcdplan/executor/store/storefake"
)

// backupFixture is the cluster fixture with a backup reconciler whose destinations all
// open one in-memory store.
type backupFixture struct {
	*fixture
	br    *BackupReconciler
	store *storefake.Store
	creds store.Credentials // what the last Open was given
}

func newBackupFixture(t *testing.T) *backupFixture {
	f := &backupFixture{fixture: newFixture(t, 3, nil), store: storefake.New()}
	f.etcd.Database, f.etcd.Revision = []byte(strings.Repeat("kv", 1000)), 4711
	f.br = &BackupReconciler{Client: f.kube, APIReader: f.kube, Dial: f.etcd.Dial, Now: func() time.Time { return f.now },
		Open: func(_ context.Context, d v1alpha1.BackupDestination, creds store.Credentials) (store.Store, error) {
			f.creds = creds
			return f.store.Open(d), nil
		}}
	return f
}

func (f *backupFixture) create(secret string) {
	b := &v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b1", UID: "0123456789abcdef", CreationTimestamp: metav1.NewTime(f.now)}}
	b.Spec.ClusterRef.Name = "demo"
	b.Spec.Destination.S3 = &v1alpha1.S3Destination{Bucket: "backups", CredentialsSecret: secret}
	require.NoError(f.t, f.kube.Create(context.Background(), b))
}

func (f *backupFixture) reconcile() (*v1alpha1.EtcdBackup, reconcile.Result) {
	f.t.Helper()
	res, err := f.br.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "b1"}})
	require.NoError(f.t, err)
	b := &v1alpha1.EtcdBackup{}
	require.NoError(f.t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "b1"}, b))
	return b, res
}

func TestBackupStoresACheckedSnapshotOfAFollower(t *testing.T) {
	f := newBackupFixture(t)
	f.create("")
	b, res := f.reconcile()
	require.Equal(t, v1alpha1.BackupSucceeded, b.Status.Phase)
	require.Zero(t, res.RequeueAfter)
	require.True(t, conditions.IsReady(b), "Ready: %v", b.Status.Conditions)
	require.Equal(t, []string{"Snapshot 2"}, f.etcd.Calls(), "a follower, by its member ID, and nothing else")
	require.Nil(t, f.creds, "no Secret named, none read")
	a := b.Status.Artifact
	require.NotNil(t, a)
	require.Equal(t, "demo-1", a.Member)
	require.Equal(t, int64(4711), a.Revision)
	require.Equal(t, int64(2000+32), a.Size, "the database and etcd's hash")
	require.Equal(t, "3.6.16", a.EtcdVersion)
	require.Len(t, a.SHA256, 64)
	key := "ns/demo/demo-20270115T080000Z-r4711-01234567.db"
	require.Equal(t, []string{key}, f.store.Keys())
	require.Equal(t, "s3://backups/"+key, a.URI)

	f.reconcile()
	require.Len(t, f.etcd.Calls(), 1, "a backup that succeeded is not taken again")
}

func TestBackupWaitsForItsSecretAndFailsWhenTheStoreRefuses(t *testing.T) {
	f := newBackupFixture(t)
	f.create("s3-creds")
	b, res := f.reconcile()
	require.Equal(t, v1alpha1.BackupPending, b.Status.Phase)
	require.Equal(t, backupRetry, res.RequeueAfter)
	require.Equal(t, "CredentialsNotFound", conditions.GetReason(b, meta.ReadyCondition))
	require.Contains(t, conditions.GetMessage(b, meta.ReadyCondition), "Secret s3-creds does not exist")

	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s3-creds"},
		Data: map[string][]byte{"accessKeyID": []byte("AKIDSECRETLOOKING"), "secretAccessKey": []byte("very-secret-value")}}
	require.NoError(t, f.kube.Create(context.Background(), secret))
	f.store.Err = fmt.Errorf("%w: bucket backups: NoSuchBucket: The specified bucket does not exist", store.ErrRefused)
	b, res = f.reconcile()
	require.Equal(t, secret.Data["secretAccessKey"], f.creds["secretAccessKey"])
	require.Equal(t, v1alpha1.BackupFailed, b.Status.Phase)
	require.Zero(t, res.RequeueAfter, "a refusal is not retried")
	require.True(t, conditions.IsStalled(b))
	require.Equal(t, "StoreRefused", conditions.GetReason(b, meta.StalledCondition))
	require.Contains(t, conditions.GetMessage(b, meta.StalledCondition), "NoSuchBucket")
	require.NotContains(t, fmt.Sprint(b.Status), "very-secret-value")
}

func TestBackupRetriesUntilItsDeadline(t *testing.T) {
	f := newBackupFixture(t)
	f.etcd.SetView(nil) // no member answers
	f.create("")
	b, res := f.reconcile()
	require.Equal(t, v1alpha1.BackupPending, b.Status.Phase)
	require.Equal(t, "NoMemberAnswers", conditions.GetReason(b, meta.ReadyCondition))
	require.Equal(t, backupRetry, res.RequeueAfter)
	require.True(t, conditions.IsReconciling(b))

	f.now = f.now.Add(backupDeadline + time.Second)
	b, res = f.reconcile()
	require.Equal(t, v1alpha1.BackupFailed, b.Status.Phase)
	require.Zero(t, res.RequeueAfter)
	require.Equal(t, "DeadlineExceeded", conditions.GetReason(b, meta.StalledCondition))
	require.Contains(t, conditions.GetMessage(b, meta.StalledCondition), "no member answers")
	require.Empty(t, f.store.Keys())
}
