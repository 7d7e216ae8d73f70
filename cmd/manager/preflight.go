package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/etcdplan/etcdplan/executor/resources"
)

// preflight runs in member Pods before etcd. A member that has joined the cluster must
// find its data: etcd started on an empty directory in an existing cluster would crash
// with a raft log mismatch, so the Pod stops here and the operator replaces the member.
func preflight(args []string) int {
	fs := flag.NewFlagSet("preflight", flag.ContinueOnError)
	dataDir := fs.String("data-dir", resources.DataDir, "etcd data directory")
	expectData := fs.Bool("expect-data", false, "the member joined the cluster before, so its data must be there")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !*expectData {
		return 0
	}
	entries, err := os.ReadDir(filepath.Join(*dataDir, "member"))
	if err == nil && len(entries) > 0 {
		return 0
	}
	fmt.Fprintf(os.Stderr, "data directory %s is empty, but this member joined the cluster before: its data was lost\n", *dataDir)
	return resources.PreflightDataLost
}
