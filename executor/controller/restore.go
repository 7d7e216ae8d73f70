package controller

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/planner"
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
				return nil, &stepError{reason: "RestoreSourceNotFound", msg: fmt.Sprintf(
					"EtcdBackup %s does not exist in %s", spec.BackupName, c.Namespace)}
			}
			return nil, err
		}
		a := b.Status.Artifact
		switch {
		case b.Status.Phase == v1alpha1.BackupFailed:
			return nil, &stepError{reason: "RestoreSourceFailed", msg: fmt.Sprintf(
				"EtcdBackup %s failed, so there is nothing to restore: name a backup that succeeded", b.Name)}
		case b.Status.Phase != v1alpha1.BackupSucceeded || a == nil:
			return nil, waiting("waiting for EtcdBackup %s to succeed before restoring from it", b.Name)
		}
		src, err := snapshotOf(b)
		if err != nil {
			return nil, err
		}
		if newerMinor(a.EtcdVersion, c.Spec.Version) {
			return nil, &stepError{reason: "RestoreVersionTooOld", msg: fmt.Sprintf(
				"EtcdBackup %s was taken from etcd %s, which spec.version %s cannot restore: set spec.version to %s or later",
				b.Name, a.EtcdVersion, c.Spec.Version, a.EtcdVersion)}
		}
		rs.Source, rs.SHA256 = src, a.SHA256
	}
	if pvc := rs.Source.PVC; pvc != nil {
		// Only a Pod that mounts the claim reads it: the seed's fetch says what it finds.
		err := r.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: pvc.ClaimName}, &corev1.PersistentVolumeClaim{})
		if apierrors.IsNotFound(err) {
			return nil, &stepError{reason: "RestoreSourceRefused", msg: fmt.Sprintf("cannot read %s to restore from: PersistentVolumeClaim %s does not exist in %s",
				rs.Source.URI(rs.Source.Key), pvc.ClaimName, c.Namespace)}
		}
		return rs, err
	}
	st, err := openDestination(ctx, r.APIReader, r.Open, c.Namespace, rs.Source.BackupDestination)
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

// failedContainer says which of the containers ended in failure and how ("restore-fetch
// (exit code 1): ..."), leaving out those named skip; "" when none did.
func failedContainer(statuses []corev1.ContainerStatus, skip ...string) string {
	for _, cs := range statuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 && !slices.Contains(skip, cs.Name) {
			return fmt.Sprintf("%s (exit code %d): %s", cs.Name, t.ExitCode, strings.TrimSpace(t.Message))
		}
	}
	return ""
}

// snapshotOf is where a backup that succeeded stored its snapshot.
func snapshotOf(b *v1alpha1.EtcdBackup) (v1alpha1.SnapshotSource, error) {
	uri := b.Status.Artifact.URI
	key, ok := b.Spec.Destination.KeyOf(uri)
	if !ok {
		return v1alpha1.SnapshotSource{}, &stepError{reason: "RestoreSourceFailed", msg: fmt.Sprintf("EtcdBackup %s: %s is not at its destination", b.Name, uri)}
	}
	return v1alpha1.SnapshotSource{BackupDestination: b.Spec.Destination, Key: key}, nil
}

// newerMinor: have is of a later minor version than want.
func newerMinor(have, want string) bool {
	h, err1 := planner.ParseVersion(have)
	w, err2 := planner.ParseVersion(want)
	return err1 == nil && err2 == nil && !h.SameMinor(w) && h.Compare(w) > 0
}

// restoreError says why a snapshot cannot be read; a store that did not answer is retried.
func restoreError(rs *resources.Restore, err error) error {
	if reason(err) == "StoreUnavailable" {
		return err
	}
	return &stepError{reason: "RestoreSourceRefused", msg: fmt.Sprintf("cannot read %s to restore from: %v",
		rs.Source.URI(rs.Source.Key), err)}
}

// restoreFailed says why an ended seed Pod's restore failed, when it was restoring from the
// snapshot its step names now; "" when it was not, or did not fail restoring. That Pod is
// kept for its logs: another would fail alike, until the source is fixed.
func restoreFailed(p *corev1.Pod, from string) string {
	if from == "" || p.Annotations[vocab.AnnotationRestore] != from {
		return ""
	}
	fix := fmt.Sprintf("fix the snapshot or spec.bootstrap.restore (the Pod %s is kept for its logs and goes once the spec changes)", p.Name)
	if b := p.Annotations[vocab.AnnotationRestoreSeed]; b != "" {
		fix = fmt.Sprintf("fix the snapshot, or delete EtcdBackup %s and the volume claim %s, and the recovery is planned anew from the newest backup left "+
			"(the Pod %s is kept for its logs until the new cluster answers)", b, p.Name, p.Name)
	}
	if why := failedContainer(p.Status.InitContainerStatuses, "preflight"); why != "" {
		return fmt.Sprintf("restoring from %s failed in %s; %s", from, why, fix)
	}
	return ""
}
