package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/store"
	"github.com/etcdplan/etcdplan/executor/store/storetest"
	"github.com/etcdplan/etcdplan/test/objstore"
)

// The GCS store against a real fake-gcs-server: the same round trips as S3's, a missing
// bucket refused, an unreachable endpoint not, and a Secret that holds no key refused with
// a message that names the key it needs.
func TestGCSAgainstFakeServer(t *testing.T) {
	t.Parallel()
	g := objstore.StartFakeGCS(t, "")
	g.Bucket(t, "backups")
	ctx := context.Background()
	open := func(bucket, endpoint string) store.Store {
		st, err := store.NewGCS(ctx, store.GCSConfig{Bucket: bucket, Prefix: "etcd", Endpoint: endpoint})
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, st.Close()) })
		return st
	}
	storetest.RoundTrips(t, open("backups", g.Endpoint), "gs://backups/etcd/")

	err := open("nope", g.Endpoint).Put(ctx, "x", bytes.NewReader([]byte("x")))
	require.ErrorIs(t, err, store.ErrRefused, "a missing bucket")
	err = open("backups", "http://127.0.0.1:1").Put(ctx, "x", bytes.NewReader([]byte("x")))
	require.Error(t, err)
	require.False(t, errors.Is(err, store.ErrRefused), "an unreachable store may come back: %v", err)

	dest := v1alpha1.BackupDestination{GCS: &v1alpha1.GCSDestination{Bucket: "backups", Endpoint: g.Endpoint, CredentialsSecret: "gcs"}}
	_, err = store.Open(ctx, dest, store.Credentials{"key.json": []byte("{}")})
	require.ErrorIs(t, err, store.ErrRefused)
	require.Contains(t, err.Error(), "Secret gcs needs the keys serviceAccount.json")
	_, err = store.Open(ctx, dest, store.Credentials{"serviceAccount.json": []byte(`{"type":"service_account","private_key":"secret-bits"}`)})
	require.ErrorIs(t, err, store.ErrRefused, "a key that is not one")
	require.NotContains(t, err.Error(), "secret-bits")
}
