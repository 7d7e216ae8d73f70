package backupctl

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/backup"
	"github.com/etcdplan/etcdplan/executor/status"
	"github.com/etcdplan/etcdplan/executor/store"
	"github.com/etcdplan/etcdplan/planner"
)

// OpenFunc prepares a destination's store; store.Open outside tests (and when nil).
type OpenFunc func(ctx context.Context, d v1alpha1.BackupDestination, creds store.Credentials) (store.Store, error)

// OpenDestination opens a destination with the credentials its Secret in namespace holds.
func OpenDestination(ctx context.Context, secrets client.Reader, open OpenFunc, namespace string, d v1alpha1.BackupDestination) (store.Store, error) {
	var creds store.Credentials
	if name := d.CredentialsSecret(); name != "" {
		var s corev1.Secret
		if err := secrets.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s); err != nil {
			if apierrors.IsNotFound(err) {
				return nil, status.Stuck(v1alpha1.ReasonCredentialsNotFound, "Secret %s does not exist", name)
			}
			return nil, err
		}
		creds = s.Data
	}
	if open == nil {
		open = store.Open
	}
	return open(ctx, d, creds)
}

// SnapshotOf is where a backup that succeeded stored its snapshot.
func SnapshotOf(b *v1alpha1.EtcdBackup) (v1alpha1.SnapshotSource, error) {
	uri := b.Status.Artifact.URI
	key, ok := b.Spec.Destination.KeyOf(uri)
	if !ok {
		return v1alpha1.SnapshotSource{}, fmt.Errorf("EtcdBackup %s: %s is not at its destination", b.Name, uri)
	}
	return v1alpha1.SnapshotSource{BackupDestination: b.Spec.Destination, Key: key}, nil
}

// NewerMinor: have is of a later minor version than want.
func NewerMinor(have, want string) bool {
	h, err1 := planner.ParseVersion(have)
	w, err2 := planner.ParseVersion(want)
	return err1 == nil && err2 == nil && !h.SameMinor(w) && h.Compare(w) > 0
}

// FailureReason is the condition reason for a failure to take or read a snapshot.
func FailureReason(err error) string {
	var se *status.StepError
	switch {
	case errors.As(err, &se) && se.Reason != "":
		return se.Reason
	case errors.Is(err, backup.ErrSnapshot):
		return v1alpha1.ReasonSnapshotFailed
	case errors.Is(err, store.ErrFull):
		return v1alpha1.ReasonStoreFull
	case errors.Is(err, store.ErrRefused):
		return v1alpha1.ReasonStoreRefused
	}
	return v1alpha1.ReasonStoreUnavailable
}
