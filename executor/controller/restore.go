package controller

import (
	"context"
	"fmt"
	"io"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/backupctl"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/executor/status"
)

// restoreSource resolves a restore (spec.bootstrap.restore, or a recovery's backup) into
// the snapshot a seed is restored from, and checks that the store serves it before a Pod
// is made to fetch it: a wrong Secret or key is told here, once, not by a seed Pod failing
// again and again.
func (r *Reconciler) restoreSource(ctx context.Context, c *v1alpha1.EtcdCluster, spec *v1alpha1.RestoreSpec) (*resources.Restore, error) {
	rs := &resources.Restore{From: observe.RestoreName(spec)}
	if spec.Source != nil {
		rs.Source = *spec.Source
	} else {
		b := &v1alpha1.EtcdBackup{}
		if err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: spec.BackupName}, b); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, stuck(v1alpha1.ReasonRestoreSourceNotFound,
					"EtcdBackup %s does not exist in %s", spec.BackupName, c.Namespace)
			}
			return nil, err
		}
		a := b.Status.Artifact
		switch {
		case b.Status.Phase == v1alpha1.BackupFailed:
			return nil, stuck(v1alpha1.ReasonRestoreSourceFailed,
				"EtcdBackup %s failed, so there is nothing to restore: name a backup that succeeded", b.Name)
		case b.Status.Phase != v1alpha1.BackupSucceeded || a == nil:
			return nil, status.Waiting("waiting for EtcdBackup %s to succeed before restoring from it", b.Name)
		}
		src, err := backupctl.SnapshotOf(b)
		if err != nil {
			return nil, stuck(v1alpha1.ReasonRestoreSourceFailed, "%v", err)
		}
		if backupctl.NewerMinor(a.EtcdVersion, c.Spec.Version) {
			return nil, stuck(v1alpha1.ReasonRestoreVersionTooOld,
				"EtcdBackup %s was taken from etcd %s, which spec.version %s cannot restore: set spec.version to %s or later",
				b.Name, a.EtcdVersion, c.Spec.Version, a.EtcdVersion)
		}
		rs.Source, rs.SHA256 = src, a.SHA256
	}
	if pvc := rs.Source.PVC; pvc != nil {
		// Only a Pod that mounts the claim reads it: the seed's fetch says what it finds.
		err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: pvc.ClaimName}, &corev1.PersistentVolumeClaim{})
		if apierrors.IsNotFound(err) {
			return nil, stuck(v1alpha1.ReasonRestoreSourceRefused, "cannot read %s to restore from: PersistentVolumeClaim %s does not exist in %s",
				rs.Source.URI(rs.Source.Key), pvc.ClaimName, c.Namespace)
		}
		return rs, err
	}
	st, err := backupctl.OpenDestination(ctx, r.APIReader, r.Open, c.Namespace, rs.Source.BackupDestination)
	if err == nil {
		defer st.Close()
		var rc io.ReadCloser
		if rc, err = st.Get(ctx, rs.Source.Key); err == nil {
			_ = rc.Close()
		}
	}
	if err != nil {
		return nil, restoreError(rs, err)
	}
	return rs, nil
}

// restoreError says why a snapshot cannot be read; a store that did not answer is retried.
func restoreError(rs *resources.Restore, err error) error {
	if backupctl.FailureReason(err) == v1alpha1.ReasonStoreUnavailable {
		return err
	}
	return stuck(v1alpha1.ReasonRestoreSourceRefused, "cannot read %s to restore from: %v",
		rs.Source.URI(rs.Source.Key), err)
}

// restoreFailed says why an ended seed Pod's restore failed, when it was restoring from the
// snapshot its step names now; "" when it was not, or did not fail restoring. That Pod is
// kept for its logs: another would fail alike, until the source is fixed.
func restoreFailed(p *corev1.Pod, from string, seeds []string) string {
	if from == "" || p.Annotations[vocab.AnnotationRestore] != from {
		return ""
	}
	fix := fmt.Sprintf("fix the snapshot or spec.bootstrap.restore (the Pod %s is kept for its logs and goes once the spec changes)", p.Name)
	if b := p.Annotations[vocab.AnnotationRestoreSeed]; b != "" {
		claims := "the volume claim " + p.Name
		if len(seeds) > 1 {
			claims = "the volume claims " + strings.Join(seeds, ", ")
		}
		fix = fmt.Sprintf("fix the snapshot, or delete EtcdBackup %s and %s, and the recovery is planned anew from the newest backup left "+
			"(the Pod %s is kept for its logs until the new cluster answers)", b, claims, p.Name)
	}
	if why := observe.FailedContainer(p.Status.InitContainerStatuses, vocab.ContainerPreflight); why != "" {
		return fmt.Sprintf("restoring from %s failed in %s; %s", from, why, fix)
	}
	return ""
}
