package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/snapshot"
	"github.com/etcdplan/etcdplan/executor/store"
)

// RestoreFetch is the arguments of a restoring seed's (or a drill's) first restore step.
// The source's credentials are not arguments: they come from the environment
// (CredentialEnv), filled from its Secret.
type RestoreFetch struct {
	// Source is the snapshot's store and key (an EtcdCluster's spec.bootstrap.restore.source).
	Source v1alpha1.SnapshotSource
	// SHA256 is the checksum the stored object must have; "" checks etcd's own hash only.
	SHA256 string
	// Out is where the snapshot is written.
	Out string
}

// Argv is the init container's command.
func (a RestoreFetch) Argv() []string {
	return []string{Binary, CmdRestoreFetch, "--source=" + jsonArg(a.Source), "--sha256=" + a.SHA256, "--out=" + a.Out}
}

func (a *RestoreFetch) parse(args []string) error {
	fs := flags(CmdRestoreFetch)
	fs.Var(jsonFlag{&a.Source}, "source", "the snapshot's store and key, as JSON (an EtcdCluster's spec.bootstrap.restore.source)")
	fs.StringVar(&a.SHA256, "sha256", "", "the SHA-256 the stored object must have; empty checks etcd's own hash only")
	fs.StringVar(&a.Out, "out", vocab.RestoreDir+"/snapshot.db", "where to write the snapshot")
	return parse(fs, args, "source")
}

// CredentialEnv is the environment variable a restore's fetch reads a credential key from.
func CredentialEnv(key string) string {
	return "ETCDPLAN_CREDENTIAL_" + strings.ToUpper(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '_'
	}, key))
}

// restoreFetch runs in a restoring seed's Pod: it streams the snapshot from its store into
// a file on the data volume, checking it against the checksum its EtcdBackup recorded and
// against the hash etcd appended to it. A snapshot that fails either check is not left
// behind, and the Pod stops with the reason.
func restoreFetch(args []string) int {
	var a RestoreFetch
	if err := a.parse(args); err != nil {
		return ExitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	err := retrying(fetchRetryFor, fetchPause, func() error {
		st, err := store.Open(ctx, a.Source.BackupDestination, credentials(a.Source))
		if err != nil {
			return err
		}
		defer st.Close()
		return fetch(ctx, st, a.Source.Key, a.SHA256, a.Out)
	})
	if err != nil {
		return fail(ExitFailed, "fetching %s: %v", a.Source.URI(a.Source.Key), err)
	}
	return 0
}

// A fetch that fails but for a refusal or a corrupt snapshot is tried again, fetchPause
// apart, for up to fetchRetryFor: a store that does not answer for a moment (a busy node,
// a link that drops) costs a restore seconds, not a person's work. Each try already calls
// the store store.Attempts times.
const (
	fetchRetryFor = 2 * time.Minute
	fetchPause    = time.Second
)

// retrying calls try until it succeeds, fails for good (the store refused, or the snapshot
// is corrupt), or the next try would start after until; it says on stderr why it tries
// again.
func retrying(until, pause time.Duration, try func() error) error {
	deadline := time.Now().Add(until)
	for {
		err := try()
		if err == nil || errors.Is(err, store.ErrRefused) || errors.Is(err, snapshot.ErrCorrupt) || time.Now().Add(pause).After(deadline) {
			return err
		}
		fmt.Fprintf(os.Stderr, "%v; trying again in %s\n", err, pause)
		time.Sleep(pause)
	}
}

// credentials reads the source's credentials from the environment; nil when it names no
// Secret.
func credentials(src v1alpha1.SnapshotSource) store.Credentials {
	if src.CredentialsSecret() == "" {
		return nil
	}
	creds := store.Credentials{}
	for _, k := range src.CredentialKeys() {
		creds[k] = []byte(os.Getenv(CredentialEnv(k)))
	}
	return creds
}

// fetch streams the object under key into out, checking it; nothing is left at out when
// it fails.
func fetch(ctx context.Context, st store.Store, key, want, out string) error {
	rc, err := st.Get(ctx, key)
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
	fmt.Printf("fetched %s: %d bytes, SHA-256 %s\n", st.URI(key), sr.Size(), sr.SHA256())
	return nil
}

// RestorePlace is the arguments of a restoring seed's last restore step.
type RestorePlace struct {
	// From is the data directory etcdutl restored.
	From string
	// DataDir is etcd's data directory.
	DataDir string
}

// Argv is the init container's command.
func (a RestorePlace) Argv() []string {
	return []string{Binary, CmdRestorePlace, "--from=" + a.From, "--data-dir=" + a.DataDir}
}

func (a *RestorePlace) parse(args []string) error {
	fs := flags(CmdRestorePlace)
	fs.StringVar(&a.From, "from", vocab.RestoreDir+"/data", "the data directory etcdutl restored")
	fs.StringVar(&a.DataDir, "data-dir", vocab.DataDir, "etcd data directory")
	return parse(fs, args)
}

// restorePlace moves a restored data directory into place, unless the data directory
// already holds a member: a seed that ended after its restore keeps what it has.
func restorePlace(args []string) int {
	var a RestorePlace
	if err := a.parse(args); err != nil {
		return ExitUsage
	}
	if err := place(a.From, a.DataDir); err != nil {
		return fail(ExitFailed, "placing the restored data: %v", err)
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
