package store_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/executor/store"
	"github.com/etcdplan/etcdplan/executor/store/storetest"
)

// The directory store of a pvc destination: the same round trips as the object stores, no
// partial file left by a broken stream, and no key may leave the directory.
func TestDirStore(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	st := store.NewDir(filepath.Join(root, "etcd"), func(key string) string { return "pvc://backups/etcd/" + key })
	storetest.RoundTrips(t, st, "pvc://backups/etcd/")
	left, err := filepath.Glob(filepath.Join(root, "etcd", "ns", "demo", ".*"))
	require.NoError(t, err)
	require.Empty(t, left, "no partial file behind")
	require.ErrorIs(t, st.Put(context.Background(), "../escape.db", bytes.NewReader([]byte("x"))), store.ErrRefused)
	_, err = os.Stat(filepath.Join(root, "escape.db"))
	require.True(t, os.IsNotExist(err))
}

// A volume out of space is ErrFull, which a try after space is freed can overcome, and the
// partial file goes.
func TestDirStoreThatFillsUp(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	if err := syscall.Mount("etcdplan-test", root, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatalf("mounting a small volume (needs root, as the local stack does): %v", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(root, syscall.MNT_DETACH) })
	st := store.NewDir(root, func(key string) string { return "pvc://backups/" + key })
	ctx := context.Background()
	require.NoError(t, st.Put(ctx, "ns/demo/small.db", bytes.NewReader(make([]byte, 1000))))
	err := st.Put(ctx, "ns/demo/big.db", bytes.NewReader(make([]byte, 2<<20)))
	require.ErrorIs(t, err, store.ErrFull)
	require.NotErrorIs(t, err, store.ErrRefused)
	objs, err := st.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, objs, 1, "only what was stored before")
	left, err := filepath.Glob(filepath.Join(root, "ns", "demo", ".*"))
	require.NoError(t, err)
	require.Empty(t, left, "no partial file behind")
}
