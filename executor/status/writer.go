// Package status holds what the reconcilers share to report on the objects they own: the
// status writer, the kstatus conditions (Progressing, Stall), the error of a step or
// backup that cannot go on with its condition reason, and the clock.
package status

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/vocab"
)

// Writer writes an object's status in one merge patch of what changed since the
// object was read or its status last written. The operator alone writes these statuses,
// so the patch carries no resourceVersion to check: a write never waits for a cache to
// catch up with the one before, and each step of a plan is on record one request after it
// took effect.
type Writer struct {
	client client.Client
	before client.Object
}

// NewWriter starts from obj as it was read.
func NewWriter(c client.Client, obj client.Object) *Writer {
	return &Writer{client: c, before: obj.DeepCopyObject().(client.Object)}
}

// Write patches obj's status; an object deleted meanwhile is no error. obj itself is left
// as it is: the server's answer goes to a copy. The caller sets observedGeneration once it
// has judged that generation of the spec.
func (w *Writer) Write(ctx context.Context, obj client.Object) error {
	return w.Send(ctx, obj)()
}

// Send is Write with the request under way while the caller goes on: the patch is taken
// from obj as it is now, and wait returns the request's outcome. Nothing else may write
// before wait returned.
func (w *Writer) Send(ctx context.Context, obj client.Object) (wait func() error) {
	patch := client.MergeFrom(w.before)
	data, err := patch.Data(obj)
	if err != nil || string(data) == "{}" {
		return func() error { return err }
	}
	sent, now := obj.DeepCopyObject().(client.Object), obj.DeepCopyObject().(client.Object)
	done := make(chan error, 1)
	go func() {
		done <- w.client.Status().Patch(ctx, sent, client.RawPatch(patch.Type(), data), client.FieldOwner(vocab.ManagerName))
	}()
	return func() error {
		if err := <-done; err != nil {
			return client.IgnoreNotFound(fmt.Errorf("status of %s: %w", obj.GetName(), err))
		}
		w.before = now
		return nil
	}
}
