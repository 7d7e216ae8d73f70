package framework

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// ClaimDest is the directory etcd on the volume claim claim.
func ClaimDest(claim string) v1alpha1.BackupDestination {
	return v1alpha1.BackupDestination{PVC: &v1alpha1.PVCDestination{ClaimName: claim, SubPath: "etcd"}}
}

// MinIODest is the bucket etcd-backups of a MinIO served at endpoint, with its credentials
// in the Secret s3.
func MinIODest(endpoint string) v1alpha1.BackupDestination {
	return v1alpha1.BackupDestination{S3: &v1alpha1.S3Destination{Bucket: "etcd-backups", Endpoint: endpoint, ForcePathStyle: true, CredentialsSecret: "s3"}}
}

// CreateBackup creates the EtcdBackup name of the cluster "demo" to d, edited.
func CreateBackup(t *testing.T, ns, name string, d v1alpha1.BackupDestination, edits ...func(*v1alpha1.EtcdBackup)) *v1alpha1.EtcdBackup {
	t.Helper()
	b := &v1alpha1.EtcdBackup{ObjectMeta: MetaName(ns, name)}
	b.Spec.ClusterRef.Name, b.Spec.Destination = "demo", d
	for _, edit := range edits {
		edit(b)
	}
	require.NoError(t, Env.Client.Create(context.Background(), b))
	return b
}

// WaitBackup waits until a backup reaches phase, and fails at once in the other final one.
func WaitBackup(t *testing.T, ns, name string, phase v1alpha1.BackupPhase) *v1alpha1.EtcdBackup {
	t.Helper()
	b := &v1alpha1.EtcdBackup{}
	require.Eventually(t, func() bool {
		require.NoError(t, Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, b))
		done := b.Status.Phase == v1alpha1.BackupSucceeded || b.Status.Phase == v1alpha1.BackupFailed
		if done && b.Status.Phase != phase {
			t.Fatalf("backup %s ended %s, not %s: %+v", name, b.Status.Phase, phase, b.Status.Conditions)
		}
		return b.Status.Phase == phase
	}, 2*time.Minute, 100*time.Millisecond, "backup %s %s", name, phase)
	return b
}
