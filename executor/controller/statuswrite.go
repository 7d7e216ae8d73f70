package controller

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/vocab"
)

// statusWriter writes an object's status in one merge patch of what changed since the
// object was read or its status last written. The operator alone writes these statuses,
// so the patch carries no resourceVersion to check: a write never waits for a cache to
// catch up with the one before, and each step of a plan is on record one request after it
// took effect.
type statusWriter struct {
	client client.Client
	before client.Object
}

func newStatusWriter(c client.Client, obj client.Object) *statusWriter {
	return &statusWriter{client: c, before: obj.DeepCopyObject().(client.Object)}
}

// write patches obj's status; an object deleted meanwhile is no error. obj itself is left
// as it is: the server's answer goes to a copy. The caller sets observedGeneration once it
// has judged that generation of the spec.
func (w *statusWriter) write(ctx context.Context, obj client.Object) error {
	return w.send(ctx, obj)()
}

// send is write with the request under way while the caller goes on: the patch is taken
// from obj as it is now, and wait returns the request's outcome. Nothing else may write
// before wait returned.
func (w *statusWriter) send(ctx context.Context, obj client.Object) (wait func() error) {
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
