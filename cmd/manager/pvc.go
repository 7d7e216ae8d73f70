package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/backup"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/executor/store"
	"github.com/etcdplan/etcdplan/planner"
)

// snapshotToPVC runs in a backup's Pod that mounts a pvc destination: it streams a snapshot
// of one member into a file there, checked as every backup is, and writes what it stored
// (key, size, checksum, revision, contents) as JSON to its termination message, where the
// operator reads it.
func snapshotToPVC(args []string) int {
	fs := flag.NewFlagSet("snapshot", flag.ContinueOnError)
	endpoint := fs.String("endpoint", "", "the member's client URL")
	member := fs.String("member", "", "the member's name")
	memberID := fs.String("member-id", "", "the member's ID, in hex: the member at the endpoint must be that one")
	clusterID := fs.String("cluster-id", "", "the etcd cluster ID every answer must carry")
	dest := fs.String("destination", "", "the backup's destination, as JSON")
	namespace := fs.String("namespace", "", "the cluster's namespace, for the key")
	cluster := fs.String("cluster", "", "the cluster's name, for the key")
	at := fs.String("at", "", "when the backup is taken (RFC 3339), for the key")
	unique := fs.String("unique", "", "the backup's unique suffix, for the key")
	result := fs.String("result", "/dev/termination-log", "where the JSON result goes")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	takenAt, err := time.Parse(time.RFC3339, *at)
	if err != nil {
		fmt.Fprintf(os.Stderr, "--at: %v\n", err)
		return 2
	}
	taken, err := snapshotTo(*endpoint, *member, *memberID, *clusterID, *dest, func(rev int64) string {
		return backup.Key(*namespace, *cluster, takenAt, rev, *unique)
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "snapshot of %s: %v\n", *member, err)
		_ = os.WriteFile(*result, []byte(err.Error()), 0o600)
		if errors.Is(err, store.ErrFull) {
			return resources.SnapshotStoreFull
		}
		return 1
	}
	out, _ := json.Marshal(taken)
	if err := os.WriteFile(*result, out, 0o600); err != nil {
		fmt.Fprintf(os.Stderr, "writing the result: %v\n", err)
		return 1
	}
	fmt.Printf("stored %s\n", out)
	return 0
}

func snapshotTo(endpoint, member, memberID, clusterID, dest string, key func(rev int64) string) (backup.Taken, error) {
	d, err := destination(dest)
	if err != nil {
		return backup.Taken{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	st, err := store.Open(ctx, d, nil)
	if err != nil {
		return backup.Taken{}, err
	}
	defer st.Close()
	endpoints := map[string]string{member: endpoint}
	conn, err := etcd.Dial(endpoints)
	if err != nil {
		return backup.Taken{}, err
	}
	defer conn.Close()
	conn.SetCluster(clusterID, endpoints)
	return backup.Take(ctx, conn, planner.EtcdMember{ID: memberID, Name: member}, st, key)
}

// deleteObject runs in a Pod that mounts a pvc destination: it deletes one stored snapshot,
// for a schedule's retention.
func deleteObject(args []string) int {
	fs := flag.NewFlagSet("delete-object", flag.ContinueOnError)
	dest := fs.String("destination", "", "the backup's destination, as JSON")
	key := fs.String("key", "", "the object's key under the destination")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	d, err := destination(*dest)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	st, err := store.Open(context.Background(), d, nil)
	if err == nil {
		defer st.Close()
		err = st.Delete(context.Background(), *key)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "deleting %s: %v\n", d.URI(*key), err)
		return 1
	}
	fmt.Printf("deleted %s\n", d.URI(*key))
	return 0
}

// destination reads a --destination flag.
func destination(s string) (v1alpha1.BackupDestination, error) {
	var d v1alpha1.BackupDestination
	if err := json.Unmarshal([]byte(s), &d); err != nil {
		return d, fmt.Errorf("--destination: %w", err)
	}
	return d, nil
}
