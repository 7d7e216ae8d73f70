package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/executor/snapshot"
	"github.com/etcdplan/etcdplan/executor/store"
)

// restoreFetch runs in a restoring seed's Pod: it streams the snapshot from its store into
// a file on the data volume, checking it against the checksum its EtcdBackup recorded and
// against the hash etcd appended to it. A snapshot that fails either check is not left
// behind, and the Pod stops with the reason.
func restoreFetch(args []string) int {
	fs := flag.NewFlagSet("restore-fetch", flag.ContinueOnError)
	source := fs.String("source", "", "the snapshot's store and key, as JSON (an EtcdCluster's spec.bootstrap.restore.source)")
	want := fs.String("sha256", "", "the SHA-256 the stored object must have; empty checks etcd's own hash only")
	out := fs.String("out", vocab.RestoreDir+"/snapshot.db", "where to write the snapshot")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	var src v1alpha1.SnapshotSource
	if err := json.Unmarshal([]byte(*source), &src); err != nil {
		fmt.Fprintf(os.Stderr, "--source: %v\n", err)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	if err := fetch(ctx, src, *want, *out); err != nil {
		fmt.Fprintf(os.Stderr, "fetching %s: %v\n", src.URI(src.Key), err)
		return 1
	}
	return 0
}

func fetch(ctx context.Context, src v1alpha1.SnapshotSource, want, out string) error {
	var creds store.Credentials
	if src.CredentialsSecret() != "" {
		creds = store.Credentials{}
		for _, k := range src.CredentialKeys() {
			creds[k] = []byte(os.Getenv(resources.CredentialEnv(k)))
		}
	}
	st, err := store.Open(ctx, src.BackupDestination, creds)
	if err != nil {
		return err
	}
	defer st.Close()
	rc, err := st.Get(ctx, src.Key)
	if err != nil {
		return err
	}
	defer rc.Close()
	// A staging directory of an earlier try may hold anything: start it anew.
	if err := os.RemoveAll(filepath.Dir(out)); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	sr := snapshot.NewReader(rc)
	_, err = io.Copy(f, sr)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && want != "" && sr.SHA256() != want {
		err = fmt.Errorf("%w: the object's SHA-256 is %s, its EtcdBackup recorded %s", snapshot.ErrCorrupt, sr.SHA256(), want)
	}
	if err != nil {
		_ = os.Remove(out)
		return err
	}
	fmt.Printf("fetched %s: %d bytes, SHA-256 %s\n", src.URI(src.Key), sr.Size(), sr.SHA256())
	return nil
}

// restorePlace moves a restored data directory into place, unless the data directory
// already holds a member: a seed that ended after its restore keeps what it has.
func restorePlace(args []string) int {
	fs := flag.NewFlagSet("restore-place", flag.ContinueOnError)
	from := fs.String("from", vocab.RestoreDir+"/data", "the data directory etcdutl restored")
	dataDir := fs.String("data-dir", vocab.DataDir, "etcd data directory")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := place(*from, *dataDir); err != nil {
		fmt.Fprintf(os.Stderr, "placing the restored data: %v\n", err)
		return 1
	}
	return 0
}

func place(from, dataDir string) error {
	staging := filepath.Dir(from)
	if _, err := os.Stat(filepath.Join(dataDir, "member")); err == nil {
		fmt.Printf("%s already holds a member: keeping it\n", dataDir)
		return os.RemoveAll(staging)
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(from, "member"), filepath.Join(dataDir, "member")); err != nil {
		return err
	}
	fmt.Printf("restored data placed in %s\n", dataDir)
	return os.RemoveAll(staging)
}
