package objstore_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/executor/store"
	"github.com/etcdplan/etcdplan/executor/store/storetest"
	"github.com/etcdplan/etcdplan/test/objstore"
)

// The S3 store against a real MinIO server: objects of one part and of several go in and
// come out whole, a failed upload leaves nothing behind, and what the store refuses says so.
func TestS3AgainstMinIO(t *testing.T) {
	t.Parallel()
	m := objstore.StartMinIO(t, "")
	m.Bucket(t, "backups")
	ctx := context.Background()
	open := func(cfg store.S3Config) store.Store {
		cfg.Endpoint, cfg.ForcePathStyle = m.Endpoint, true
		st, err := store.NewS3(ctx, cfg)
		require.NoError(t, err)
		return st
	}
	st := open(store.S3Config{Bucket: "backups", Prefix: "etcd", AccessKeyID: m.User, SecretAccessKey: m.Password})
	storetest.RoundTrips(t, st, "s3://backups/etcd/")
	ups, err := m.Client().ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("backups")})
	require.NoError(t, err)
	require.Empty(t, ups.Uploads, "the failed upload was aborted")

	for what, s := range map[string]store.Store{
		"a missing bucket":  open(store.S3Config{Bucket: "nope", AccessKeyID: m.User, SecretAccessKey: m.Password}),
		"a wrong secret":    open(store.S3Config{Bucket: "backups", AccessKeyID: m.User, SecretAccessKey: "wrong-secret-value"}),
		"an unknown key ID": open(store.S3Config{Bucket: "backups", AccessKeyID: "nobody", SecretAccessKey: m.Password}),
	} {
		err := s.Put(ctx, "x", bytes.NewReader([]byte("x")))
		require.ErrorIs(t, err, store.ErrRefused, what)
		require.NotContains(t, err.Error(), "wrong-secret-value", "no credentials in messages")
		require.NotContains(t, err.Error(), m.Password, "no credentials in messages")
	}
	unreachable, err := store.NewS3(ctx, store.S3Config{Bucket: "backups", Endpoint: "http://127.0.0.1:1", ForcePathStyle: true,
		AccessKeyID: m.User, SecretAccessKey: m.Password})
	require.NoError(t, err)
	err = unreachable.Put(ctx, "x", bytes.NewReader([]byte("x")))
	require.Error(t, err)
	require.False(t, errors.Is(err, store.ErrRefused), "an unreachable store may come back: %v", err)
}

// A store that fills up says so where its answer reaches the client (retrying after space
// is freed can succeed), leaves no part of the object behind, and takes it once there is
// room.
func TestS3StoreThatFillsUp(t *testing.T) {
	t.Parallel()
	m := objstore.StartSmallMinIO(t, "", 4<<20)
	m.Bucket(t, "backups")
	ctx := context.Background()
	st, err := store.NewS3(ctx, store.S3Config{Bucket: "backups", Endpoint: m.Endpoint, ForcePathStyle: true,
		AccessKeyID: m.User, SecretAccessKey: m.Password})
	require.NoError(t, err)
	require.NoError(t, st.Put(ctx, "small.db", bytes.NewReader(make([]byte, 1000))))
	// One part: MinIO refuses it before it takes the body. On a loaded machine the closed
	// connection has once reached the client before the answer, three attempts running: a
	// later try gets the answer, and no try may read as a refusal.
	for try := 1; ; try++ {
		err = st.Put(ctx, "big.db", bytes.NewReader(make([]byte, 3<<20)))
		require.Error(t, err)
		require.False(t, errors.Is(err, store.ErrRefused), "space can be freed: %v", err)
		if errors.Is(err, store.ErrFull) || try == 5 {
			break
		}
		t.Logf("try %d did not get the store's answer: %v", try, err)
	}
	require.ErrorIs(t, err, store.ErrFull)
	// Several parts: MinIO takes a part's body and answers when its disk fills, then closes
	// the connection; whether that answer or the closed connection reaches the client first
	// is a race. Either way the upload fails and is aborted.
	err = st.Put(ctx, "big.db", bytes.NewReader(make([]byte, 20<<20)))
	require.Error(t, err)
	require.False(t, errors.Is(err, store.ErrRefused), "space can be freed: %v", err)
	objs, err := st.List(ctx, "")
	require.NoError(t, err)
	require.Len(t, objs, 1, "only what was stored before")
	ups, err := m.Client().ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String("backups")})
	require.NoError(t, err)
	require.Empty(t, ups.Uploads, "the failed upload was aborted")

	m.Resize(t, 128<<20)
	require.Eventually(t, func() bool { return st.Put(ctx, "big.db", bytes.NewReader(make([]byte, 20<<20))) == nil },
		30*time.Second, 500*time.Millisecond, "room again")
}
