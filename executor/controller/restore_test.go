package controller

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/store"
	"github.com/etcdplan/etcdplan/executor/store/storefake"
)

// A cluster restored from an EtcdBackup: its seed waits for the backup to exist and
// succeed and for its object to be readable, then starts with the restore's init
// containers; a seed whose restore failed is kept and named, not re-created in a loop.
func TestSeedIsRestoredFromABackup(t *testing.T) {
	f := newFixture(t, 0, func(c *v1alpha1.EtcdCluster) {
		c.Spec.Replicas, c.Status.ClusterID, c.Status.NextOrdinal = 3, "", 0
		c.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Restore: &v1alpha1.RestoreSpec{BackupName: "nightly"}}
	})
	mem := storefake.New()
	f.r.Open = func(_ context.Context, d v1alpha1.BackupDestination, _ store.Credentials) (store.Store, error) {
		return mem.Open(d), nil
	}
	ctx := context.Background()
	seedPod := func() (*corev1.Pod, error) {
		p := &corev1.Pod{}
		return p, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, p)
	}
	message := func(c *v1alpha1.EtcdCluster) string {
		require.Equal(t, plan.CreateSeed, c.Status.Plan.Steps[0].Action)
		require.Equal(t, "bootstrap: the cluster starts from one seed member restored from EtcdBackup nightly", c.Status.Plan.Steps[0].Reason)
		return c.Status.Plan.Progress[0].Message
	}

	c, _ := f.reconcile()
	require.Contains(t, message(c), "EtcdBackup nightly does not exist in ns")
	b := &v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly"}}
	b.Spec.ClusterRef.Name = "old"
	b.Spec.Destination.S3 = &v1alpha1.S3Destination{Bucket: "backups", Prefix: "etcd", CredentialsSecret: "s3"}
	require.NoError(t, f.kube.Create(ctx, b))
	c, _ = f.reconcile()
	require.Contains(t, message(c), "waiting for EtcdBackup nightly to succeed")

	uri := "s3://backups/etcd/ns/old/old-20270115T080000Z-r42-0123abcd.db"
	b.Status.Phase = v1alpha1.BackupSucceeded
	b.Status.Artifact = &v1alpha1.Artifact{URI: uri, SHA256: strings.Repeat("ab", 32), EtcdVersion: "3.6.16", Revision: 42}
	require.NoError(t, f.kube.Status().Update(ctx, b))
	c, _ = f.reconcile()
	require.Contains(t, message(c), "Secret s3 does not exist")
	require.NoError(t, f.kube.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s3"},
		Data: map[string][]byte{"accessKeyID": []byte("id"), "secretAccessKey": []byte("very-secret")}}))
	c, _ = f.reconcile()
	require.Contains(t, message(c), "cannot read "+uri)
	_, err := seedPod()
	require.True(t, apierrors.IsNotFound(err), "no seed Pod while its snapshot cannot be read")

	require.NoError(t, mem.Put(ctx, "ns/old/old-20270115T080000Z-r42-0123abcd.db", bytes.NewReader([]byte("snapshot"))))
	c, _ = f.reconcile()
	p, err := seedPod()
	require.NoError(t, err)
	require.Equal(t, uri, c.Status.RestoredFrom)
	require.Equal(t, "EtcdBackup nightly", p.Annotations[vocab.AnnotationRestore])
	var names []string
	for _, ic := range p.Spec.InitContainers {
		names = append(names, ic.Name)
	}
	require.Equal(t, []string{"preflight", "restore-fetch", "restore", "restore-place"}, names)
	fetch := p.Spec.InitContainers[1]
	require.Contains(t, fetch.Command, "--sha256="+strings.Repeat("ab", 32))
	require.Contains(t, strings.Join(fetch.Command, " "), `"key":"ns/old/old-20270115T080000Z-r42-0123abcd.db"`)
	require.NotContains(t, strings.Join(fetch.Command, " "), "very-secret", "credentials come from the Secret, not the command line")
	require.Equal(t, "s3", fetch.Env[0].ValueFrom.SecretKeyRef.Name)
	require.Equal(t, "etcdutl", p.Spec.InitContainers[2].Command[0])
	require.Contains(t, p.Spec.InitContainers[2].Command, "--initial-cluster=demo-0="+vocab.PeerURL(c.Name, c.Namespace, "demo-0", false))

	p.Status.Phase = corev1.PodFailed
	p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "preflight", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}},
		{Name: "restore-fetch", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "the object's SHA-256 is 00"}}}}
	require.NoError(t, f.kube.Status().Update(ctx, p))
	c, _ = f.reconcile()
	require.Contains(t, message(c), "restoring from EtcdBackup nightly failed in restore-fetch (exit code 1): the object's SHA-256 is 00")
	_, err = seedPod()
	require.NoError(t, err, "the failed seed is kept for its logs")

	b.Status.Artifact.EtcdVersion = "3.7.0"
	require.NoError(t, f.kube.Status().Update(ctx, b))
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Bootstrap.Restore.BackupName = "nightly" }) // same source: still kept
	c, _ = f.reconcile()
	require.Contains(t, message(c), "restoring from EtcdBackup nightly failed")
	require.NoError(t, f.kube.Delete(ctx, p))
	c, _ = f.reconcile()
	require.Contains(t, message(c), "taken from etcd 3.7.0, which spec.version 3.6.16 cannot restore")
}
