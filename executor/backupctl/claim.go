package backupctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/agent"
	"github.com/etcdplan/etcdplan/executor/backup"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/executor/status"
	"github.com/etcdplan/etcdplan/planner"
)

// errSnapshotRunning: a Pod is storing the snapshot on the backup's claim.
var errSnapshotRunning = errors.New("the snapshot Pod runs")

// claimSnapshot looks at the Pod that stores the backup on its claim: done with the
// artifact once it succeeded, done with a retried failure once it failed (the Pod goes, so
// the next try makes a new one), done with errSnapshotRunning while it runs; not done when
// there is no such Pod, or no claim (ClaimNotFound).
func (r *BackupReconciler) claimSnapshot(ctx context.Context, b *v1alpha1.EtcdBackup) (*v1alpha1.Artifact, bool, error) {
	claim := b.Spec.Destination.PVC.ClaimName
	if err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: claim}, &corev1.PersistentVolumeClaim{}); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, true, status.Stuck(v1alpha1.ReasonClaimNotFound, "PersistentVolumeClaim %s does not exist in %s", claim, b.Namespace)
		}
		return nil, true, err
	}
	p, err := backupPod(ctx, r, b, "snapshot")
	switch {
	case errors.Is(err, errInTheWay):
		return nil, true, status.Stuck(v1alpha1.ReasonPodInTheWay, "%v", err)
	case err != nil:
		return nil, true, err
	case p == nil:
		return nil, false, nil
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		a, err := claimArtifact(b, p)
		if err != nil {
			return nil, true, err
		}
		return a, true, deleteBackupPod(ctx, r, b, "snapshot")
	case corev1.PodFailed:
		why := observe.FailedContainer(p.Status.ContainerStatuses)
		if err := deleteBackupPod(ctx, r, b, "snapshot"); err != nil {
			return nil, true, err
		}
		reason := v1alpha1.ReasonSnapshotFailed
		if slices.ContainsFunc(p.Status.ContainerStatuses, func(cs corev1.ContainerStatus) bool {
			return cs.State.Terminated != nil && cs.State.Terminated.ExitCode == agent.ExitStoreFull
		}) {
			reason = v1alpha1.ReasonStoreFull
		}
		return nil, true, status.Stuck(reason, "the snapshot Pod %s failed in %s", p.Name, why)
	}
	return nil, true, errSnapshotRunning
}

// claimArtifact reads what the snapshot Pod stored from its termination message.
func claimArtifact(b *v1alpha1.EtcdBackup, p *corev1.Pod) (*v1alpha1.Artifact, error) {
	var msg string
	for _, cs := range p.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			msg = t.Message
		}
	}
	var t backup.Taken
	if err := json.Unmarshal([]byte(msg), &t); err != nil || t.Key == "" {
		return nil, status.Stuck(v1alpha1.ReasonSnapshotFailed, "the snapshot Pod %s ended without saying what it stored: %q", p.Name, msg)
	}
	at, err := time.Parse(time.RFC3339, p.Annotations[vocab.AnnotationTakenAt])
	if err != nil {
		return nil, status.Stuck(v1alpha1.ReasonSnapshotFailed, "the snapshot Pod %s has no time it was taken at", p.Name)
	}
	return artifact(b.Spec.Destination.URI(t.Key), t, p.Annotations[vocab.AnnotationVersion], p.Annotations[vocab.AnnotationMember],
		p.Annotations[vocab.AnnotationClusterID], at), nil
}

// startClaimSnapshot makes the Pod that streams a snapshot of member m onto the backup's
// claim.
func (r *BackupReconciler) startClaimSnapshot(ctx context.Context, b *v1alpha1.EtcdBackup, c *v1alpha1.EtcdCluster, m planner.EtcdMember,
	clusterID, endpoint string, at time.Time, unique string) error {
	p := resources.SnapshotPod(b, c, r.Images, agent.Snapshot{Endpoint: endpoint, Member: m.Name, MemberID: m.ID,
		ClusterID: clusterID, Namespace: c.Namespace, Cluster: c.Name, At: at, Unique: unique})
	p.Annotations = map[string]string{vocab.AnnotationMember: m.Name, vocab.AnnotationVersion: m.Version, vocab.AnnotationClusterID: clusterID,
		vocab.AnnotationTakenAt: at.UTC().Format(time.RFC3339)}
	if err := createBackupPod(ctx, r, b, p); err != nil {
		return err
	}
	return errSnapshotRunning
}

// errInTheWay: a Pod of the name a backup's Pod takes is not the backup's.
var errInTheWay = errors.New("is not the backup's and is in the way: rename or delete it")

// backupPod reads the backup's Pod that does what ("snapshot", "prune", "drill"): nil when
// there is none, errInTheWay when the Pod of that name is another's.
func backupPod(ctx context.Context, c client.Client, b *v1alpha1.EtcdBackup, what string) (*corev1.Pod, error) {
	p := &corev1.Pod{}
	err := c.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: resources.BackupPodName(b.Name, what)}, p)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, err
	case !metav1.IsControlledBy(p, b):
		return nil, fmt.Errorf("the Pod %s %w", p.Name, errInTheWay)
	}
	return p, nil
}

// createPod creates a Pod the backup owns (it goes with the backup); one there is no error.
func createBackupPod(ctx context.Context, c client.Client, b *v1alpha1.EtcdBackup, p *corev1.Pod) error {
	if err := controllerutil.SetControllerReference(b, p, c.Scheme()); err != nil {
		return err
	}
	return client.IgnoreAlreadyExists(c.Create(ctx, p))
}

// deletePod deletes the backup's Pod that does what, when it is the backup's; one gone is
// no error.
func deleteBackupPod(ctx context.Context, c client.Client, b *v1alpha1.EtcdBackup, what string) error {
	p, err := backupPod(ctx, c, b, what)
	if p == nil || errors.Is(err, errInTheWay) {
		return nil // none, or another's: nothing of the backup's to delete
	}
	if err != nil {
		return err
	}
	return client.IgnoreNotFound(c.Delete(ctx, p, client.Preconditions{UID: &p.UID}))
}
