package agent

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/backup"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/pki"
	"github.com/etcdplan/etcdplan/executor/store"
	"github.com/etcdplan/etcdplan/planner"
)

// Snapshot is the arguments of a backup's Pod that stores a snapshot on a pvc destination,
// mounted at vocab.BackupMount.
type Snapshot struct {
	// Destination is the backup's destination.
	Destination v1alpha1.BackupDestination
	// Endpoint is the member's client URL.
	Endpoint string
	// Member and MemberID (in hex) name the member: the member at the endpoint must be that one.
	Member, MemberID string
	// ClusterID is the etcd cluster ID every answer must carry.
	ClusterID string
	// Namespace, Cluster, At and Unique make the key (backup.Key).
	Namespace, Cluster string
	At                 time.Time
	Unique             string
	// Result is where the JSON result goes; "" for TerminationLog.
	Result string
	// TLSDir, when set, holds the client certificate the member is dialed with (tls.crt,
	// tls.key, ca.crt), and ServerName the name its server certificate is checked for.
	TLSDir, ServerName string
}

// Argv is the container's command.
func (a Snapshot) Argv() []string {
	argv := []string{Binary, CmdSnapshot, "--destination=" + jsonArg(a.Destination),
		"--endpoint=" + a.Endpoint, "--member=" + a.Member, "--member-id=" + a.MemberID, "--cluster-id=" + a.ClusterID,
		"--namespace=" + a.Namespace, "--cluster=" + a.Cluster, "--at=" + timeArg(a.At), "--unique=" + a.Unique}
	if a.Result != "" {
		argv = append(argv, "--result="+a.Result)
	}
	if a.TLSDir != "" {
		argv = append(argv, "--tls-dir="+a.TLSDir, "--server-name="+a.ServerName)
	}
	return argv
}

func (a *Snapshot) parse(args []string) error {
	fs := flags(CmdSnapshot)
	fs.Var(jsonFlag{&a.Destination}, "destination", "the backup's destination, as JSON")
	fs.StringVar(&a.Endpoint, "endpoint", "", "the member's client URL")
	fs.StringVar(&a.Member, "member", "", "the member's name")
	fs.StringVar(&a.MemberID, "member-id", "", "the member's ID, in hex: the member at the endpoint must be that one")
	fs.StringVar(&a.ClusterID, "cluster-id", "", "the etcd cluster ID every answer must carry")
	fs.StringVar(&a.Namespace, "namespace", "", "the cluster's namespace, for the key")
	fs.StringVar(&a.Cluster, "cluster", "", "the cluster's name, for the key")
	fs.Var(timeFlag{&a.At}, "at", "when the backup is taken (RFC 3339), for the key")
	fs.StringVar(&a.Unique, "unique", "", "the backup's unique suffix, for the key")
	fs.StringVar(&a.Result, "result", TerminationLog, "where the JSON result goes")
	fs.StringVar(&a.TLSDir, "tls-dir", "", "the directory of the client certificate (tls.crt, tls.key, ca.crt); none for plain text")
	fs.StringVar(&a.ServerName, "server-name", "", "the name the member's server certificate is checked for")
	return parse(fs, args, "destination", "at")
}

// snapshotToClaim runs in a backup's Pod that mounts a pvc destination: it streams a
// snapshot of one member into a file there, checked as every backup is, and writes what it
// stored (key, size, checksum, revision, contents) as JSON to its termination message,
// where the operator reads it.
func snapshotToClaim(args []string) int {
	var a Snapshot
	if err := a.parse(args); err != nil {
		return ExitUsage
	}
	taken, err := a.take()
	if err != nil {
		_ = os.WriteFile(a.Result, []byte(err.Error()), 0o600)
		code := ExitFailed
		if errors.Is(err, store.ErrFull) {
			code = ExitStoreFull
		}
		return fail(code, "snapshot of %s: %v", a.Member, err)
	}
	out, _ := json.Marshal(taken)
	if err := os.WriteFile(a.Result, out, 0o600); err != nil {
		return fail(ExitFailed, "writing the result: %v", err)
	}
	fmt.Printf("stored %s\n", out)
	return 0
}

func (a Snapshot) take() (backup.Taken, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	st, err := store.Open(ctx, a.Destination, nil)
	if err != nil {
		return backup.Taken{}, err
	}
	defer st.Close()
	endpoints := map[string]string{a.Member: a.Endpoint}
	tlsCfg, err := a.tls()
	if err != nil {
		return backup.Taken{}, err
	}
	conn, err := etcd.Dial(endpoints, tlsCfg)
	if err != nil {
		return backup.Taken{}, err
	}
	defer conn.Close()
	conn.SetCluster(a.ClusterID, endpoints)
	return backup.Take(ctx, conn, planner.EtcdMember{ID: a.MemberID, Name: a.Member}, st, func(rev int64) string {
		return backup.Key(a.Namespace, a.Cluster, a.At, rev, a.Unique)
	})
}

// tls is the client configuration in TLSDir; nil for plain text.
func (a Snapshot) tls() (*tls.Config, error) {
	if a.TLSDir == "" {
		return nil, nil
	}
	var files [3][]byte
	for i, name := range []string{vocab.TLSCertKey, vocab.TLSKeyKey, vocab.CACertKey} {
		b, err := os.ReadFile(filepath.Join(a.TLSDir, name))
		if err != nil {
			return nil, err
		}
		files[i] = b
	}
	cfg, err := pki.ClientConfig(pki.KeyPair{Cert: files[0], Key: files[1]}, files[2])
	if err != nil {
		return nil, fmt.Errorf("the client certificate in %s: %w", a.TLSDir, err)
	}
	cfg.ServerName = a.ServerName
	return cfg, nil
}

// DeleteObject is the arguments of a Pod that deletes a stored snapshot from a pvc
// destination, mounted at vocab.BackupMount.
type DeleteObject struct {
	Destination v1alpha1.BackupDestination
	// Key is the object's key under the destination.
	Key string
}

// Argv is the container's command.
func (a DeleteObject) Argv() []string {
	return []string{Binary, CmdDeleteObject, "--destination=" + jsonArg(a.Destination), "--key=" + a.Key}
}

func (a *DeleteObject) parse(args []string) error {
	fs := flags(CmdDeleteObject)
	fs.Var(jsonFlag{&a.Destination}, "destination", "the backup's destination, as JSON")
	fs.StringVar(&a.Key, "key", "", "the object's key under the destination")
	return parse(fs, args, "destination")
}

// deleteObject runs in a Pod that mounts a pvc destination: it deletes one stored snapshot,
// for a schedule's retention.
func deleteObject(args []string) int {
	var a DeleteObject
	if err := a.parse(args); err != nil {
		return ExitUsage
	}
	st, err := store.Open(context.Background(), a.Destination, nil)
	if err == nil {
		defer st.Close()
		err = st.Delete(context.Background(), a.Key)
	}
	if err != nil {
		return fail(ExitFailed, "deleting %s: %v", a.Destination.URI(a.Key), err)
	}
	fmt.Printf("deleted %s\n", a.Destination.URI(a.Key))
	return 0
}
