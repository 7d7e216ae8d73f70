package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/snapshot"
	"github.com/etcdplan/etcdplan/executor/store"
)

// The seed's fetch from a real store (a directory, as a pvc source is seen from the Pod): a
// good snapshot lands whole; one whose etcd hash or recorded checksum does not match
// leaves nothing; place moves the restored member into the data directory, and keeps a data
// directory that already holds one.
func TestRestoreFetchAndPlace(t *testing.T) {
	ctx := context.Background()
	dest := v1alpha1.BackupDestination{PVC: &v1alpha1.PVCDestination{ClaimName: "backups"}}
	st := store.NewDir(t.TempDir(), dest.URI)
	db := bytes.Repeat([]byte("etcd"), 100_000)
	sum := sha256.Sum256(db)
	good := append(db, sum[:]...)
	corrupt := bytes.Clone(good)
	corrupt[10] ^= 1
	require.NoError(t, st.Put(ctx, "good.db", bytes.NewReader(good)))
	require.NoError(t, st.Put(ctx, "corrupt.db", bytes.NewReader(corrupt)))
	whole := sha256.Sum256(good)
	out := filepath.Join(t.TempDir(), "restore", "snapshot.db")

	require.NoError(t, fetch(ctx, st, "good.db", hex.EncodeToString(whole[:]), out))
	got, err := os.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, good, got)

	require.ErrorIs(t, fetch(ctx, st, "corrupt.db", "", out), snapshot.ErrCorrupt)
	require.NoFileExists(t, out)
	err = fetch(ctx, st, "good.db", "00"+hex.EncodeToString(whole[1:]), out)
	require.ErrorIs(t, err, snapshot.ErrCorrupt)
	require.Contains(t, err.Error(), "its EtcdBackup recorded 00")
	require.NoFileExists(t, out)
	require.ErrorIs(t, fetch(ctx, st, "missing.db", "", out), store.ErrRefused)

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

// The fetch reads the source's credentials from the environment, under the names the
// renderer gives them; a key its Secret lacks is refused before the store is called.
func TestRestoreFetchCredentials(t *testing.T) {
	src := v1alpha1.SnapshotSource{Key: "good.db", BackupDestination: v1alpha1.BackupDestination{S3: &v1alpha1.S3Destination{
		Bucket: "backups", Endpoint: "http://127.0.0.1:1", ForcePathStyle: true, CredentialsSecret: "s3"}}}
	require.Nil(t, credentials(v1alpha1.SnapshotSource{BackupDestination: v1alpha1.BackupDestination{S3: &v1alpha1.S3Destination{Bucket: "b"}}}),
		"no Secret, no credentials: the store's own chain")
	t.Setenv(CredentialEnv("accessKeyID"), "user")
	t.Setenv(CredentialEnv("secretAccessKey"), "password")
	require.Equal(t, store.Credentials{"accessKeyID": []byte("user"), "secretAccessKey": []byte("password")}, credentials(src))

	t.Setenv(CredentialEnv("secretAccessKey"), "")
	out := filepath.Join(t.TempDir(), "restore", "snapshot.db")
	require.Equal(t, ExitFailed, restoreFetch(RestoreFetch{Source: src, Out: out}.Argv()[2:]))
	_, err := store.Open(context.Background(), src.BackupDestination, credentials(src))
	require.ErrorIs(t, err, store.ErrRefused)
	require.NoFileExists(t, out)
}

// A fetch that fails for a moment is tried again until it succeeds or its time is up; a
// refusal or a corrupt snapshot ends it at once.
func TestRestoreFetchTriesAgain(t *testing.T) {
	transient := errors.New("dial tcp 10.88.0.1:9000: i/o timeout")
	tries := func(fails int, err error) (int, error) {
		n := 0
		got := retrying(time.Second, time.Millisecond, func() error {
			if n++; n <= fails {
				return err
			}
			return nil
		})
		return n, got
	}
	n, err := tries(2, transient)
	require.NoError(t, err)
	require.Equal(t, 3, n)
	n, err = tries(2, fmt.Errorf("open: %w", store.ErrRefused))
	require.ErrorIs(t, err, store.ErrRefused)
	require.Equal(t, 1, n)
	n, err = tries(2, snapshot.ErrCorrupt)
	require.ErrorIs(t, err, snapshot.ErrCorrupt)
	require.Equal(t, 1, n)

	n = 0
	err = retrying(200*time.Millisecond, time.Millisecond, func() error { n++; return transient })
	require.ErrorIs(t, err, transient, "it gives up once its time is up, with the last error")
	require.Greater(t, n, 1, "tried again meanwhile")
}
