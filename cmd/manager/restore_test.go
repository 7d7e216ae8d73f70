package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/executor/snapshot"
	"github.com/etcdplan/etcdplan/executor/store"
	"github.com/etcdplan/etcdplan/test/objstore"
)

// The seed's fetch against a real MinIO, with credentials from the environment as the Pod
// gets them: a good snapshot lands whole; one whose etcd hash or recorded checksum does not
// match leaves nothing; place moves the restored member into the data directory, and keeps
// a data directory that already holds one.
func TestRestoreFetchAndPlace(t *testing.T) {
	m := objstore.StartMinIO(t, "")
	m.Bucket(t, "backups")
	ctx := context.Background()
	st, err := store.NewS3(ctx, store.S3Config{Bucket: "backups", Endpoint: m.Endpoint, ForcePathStyle: true, AccessKeyID: m.User, SecretAccessKey: m.Password})
	require.NoError(t, err)
	db := bytes.Repeat([]byte("etcd"), 100_000)
	sum := sha256.Sum256(db)
	good := append(db, sum[:]...)
	corrupt := bytes.Clone(good)
	corrupt[10] ^= 1
	require.NoError(t, st.Put(ctx, "good.db", bytes.NewReader(good)))
	require.NoError(t, st.Put(ctx, "corrupt.db", bytes.NewReader(corrupt)))
	t.Setenv(resources.CredentialEnv("accessKeyID"), m.User)
	t.Setenv(resources.CredentialEnv("secretAccessKey"), m.Password)
	src := func(key string) v1alpha1.SnapshotSource {
		return v1alpha1.SnapshotSource{Key: key, BackupDestination: v1alpha1.BackupDestination{S3: &v1alpha1.S3Destination{
			Bucket: "backups", Endpoint: m.Endpoint, ForcePathStyle: true, CredentialsSecret: "s3"}}}
	}
	whole := sha256.Sum256(good)
	out := filepath.Join(t.TempDir(), "restore", "snapshot.db")

	require.NoError(t, fetch(ctx, src("good.db"), hex.EncodeToString(whole[:]), out))
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, good, got)

	require.ErrorIs(t, fetch(ctx, src("corrupt.db"), "", out), snapshot.ErrCorrupt)
	require.NoFileExists(t, out)
	err = fetch(ctx, src("good.db"), "00"+hex.EncodeToString(whole[1:]), out)
	require.ErrorIs(t, err, snapshot.ErrCorrupt)
	require.Contains(t, err.Error(), "its EtcdBackup recorded 00")
	require.NoFileExists(t, out)
	t.Setenv(resources.CredentialEnv("secretAccessKey"), "wrong")
	require.ErrorIs(t, fetch(ctx, src("good.db"), "", out), store.ErrRefused)

	dir := t.TempDir()
	from, data := filepath.Join(dir, "restore", "data"), filepath.Join(dir, "data")
	require.NoError(t, os.MkdirAll(filepath.Join(from, "member", "snap"), 0o700))
	require.NoError(t, place(from, data))
	require.DirExists(t, filepath.Join(data, "member", "snap"))
	require.NoDirExists(t, filepath.Join(dir, "restore"), "the staging directory goes")
	require.NoError(t, os.MkdirAll(filepath.Join(from, "member", "other"), 0o700))
	require.NoError(t, place(from, data))
	require.NoDirExists(t, filepath.Join(data, "member", "other"), "a member already there is kept")
	require.DirExists(t, filepath.Join(data, "member", "snap"))
}
