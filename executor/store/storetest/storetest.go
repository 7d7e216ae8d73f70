// Package storetest holds the round trips every store.Store passes: the directory store's
// unit test and the S3 and GCS tests against real servers (test/objstore) run them.
package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/executor/store"
)

// RoundTrips puts objects of one part and of several and reads them back whole, lists them
// relative to the store's prefix, sees a stream that fails after two parts leave no object,
// and deletes one twice.
func RoundTrips(t *testing.T, st store.Store, uriPrefix string) {
	t.Helper()
	ctx := context.Background()
	for name, size := range map[string]int{"small.db": 1000, "large.db": 20<<20 + 123} {
		data := random(size)
		require.NoError(t, st.Put(ctx, "ns/demo/"+name, bytes.NewReader(data)))
		rc, err := st.Get(ctx, "ns/demo/"+name)
		require.NoError(t, err)
		got, err := io.ReadAll(rc)
		rc.Close()
		require.NoError(t, err)
		require.Equal(t, sha256.Sum256(data), sha256.Sum256(got), "%s comes back whole", name)
	}
	objs, err := st.List(ctx, "ns/demo/")
	require.NoError(t, err)
	require.Len(t, objs, 2)
	require.Equal(t, "ns/demo/large.db", objs[0].Key, "keys relative to the prefix")
	require.Equal(t, int64(20<<20+123), objs[0].Size)
	require.Equal(t, uriPrefix+"ns/demo/large.db", st.URI("ns/demo/large.db"))

	broken := io.MultiReader(bytes.NewReader(random(17<<20)), failing{})
	require.ErrorIs(t, st.Put(ctx, "ns/demo/broken.db", broken), errBroken)
	objs, err = st.List(ctx, "ns/demo/broken")
	require.NoError(t, err)
	require.Empty(t, objs, "a failed upload leaves no object")

	require.NoError(t, st.Delete(ctx, "ns/demo/small.db"))
	require.NoError(t, st.Delete(ctx, "ns/demo/small.db"), "deleting what is gone is no error")
	_, err = st.Get(ctx, "ns/demo/small.db")
	require.ErrorIs(t, err, store.ErrRefused, "a missing object")
}

var errBroken = errors.New("the stream broke")

type failing struct{}

func (failing) Read([]byte) (int, error) { return 0, errBroken }

func random(n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(7, uint64(n)))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}
