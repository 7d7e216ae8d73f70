package store_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/executor/store"
)

// The directory store of a pvc destination: the same round trips as the object stores, no
// partial file left by a broken stream, and no key may leave the directory.
func TestDirStore(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	st := store.NewDir(filepath.Join(root, "etcd"), func(key string) string { return "pvc://backups/etcd/" + key })
	roundTrips(t, st, "pvc://backups/etcd/")
	left, err := filepath.Glob(filepath.Join(root, "etcd", "ns", "demo", ".*"))
	require.NoError(t, err)
	require.Empty(t, left, "no partial file behind")
	require.ErrorIs(t, st.Put(context.Background(), "../escape.db", bytes.NewReader([]byte("x"))), store.ErrRefused)
	_, err = os.Stat(filepath.Join(root, "escape.db"))
	require.True(t, os.IsNotExist(err))
}
