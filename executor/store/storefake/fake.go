// Package storefake is an in-memory store.Store for the executor's unit tests.
package storefake

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/store"
)

// Store keeps objects in memory.
type Store struct {
	mu      sync.Mutex
	objects map[string][]byte
	// Err, when set, fails every call.
	Err error
	// dest is the destination the store was last opened for.
	dest v1alpha1.BackupDestination
}

// Open returns the store, as opened for d.
func (s *Store) Open(d v1alpha1.BackupDestination) *Store {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dest = d
	return s
}

var _ store.Store = (*Store)(nil)

// New returns an empty store.
func New() *Store { return &Store{objects: map[string][]byte{}} }

// Put keeps the object only when r ends without an error.
func (s *Store) Put(_ context.Context, key string, r io.Reader) error {
	if s.Err != nil {
		return s.Err
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.objects[key] = b
	return nil
}

// Close does nothing.
func (s *Store) Close() error { return nil }

func (s *Store) Get(_ context.Context, key string) (io.ReadCloser, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objects[key]
	if !ok {
		return nil, fmt.Errorf("%w: no object %s", store.ErrRefused, key)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (s *Store) Delete(_ context.Context, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objects, key)
	return s.Err
}

func (s *Store) List(_ context.Context, prefix string) ([]store.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []store.Object
	for k, b := range s.objects {
		if strings.HasPrefix(k, prefix) {
			out = append(out, store.Object{Key: k, Size: int64(len(b))})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, s.Err
}

// URI names the object as a store at dest would.
func (s *Store) URI(key string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.dest.URI(key)
}

// Keys lists the stored keys.
func (s *Store) Keys() []string {
	objs, _ := s.List(context.Background(), "")
	var keys []string
	for _, o := range objs {
		keys = append(keys, o.Key)
	}
	return keys
}
