package agent

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// What the renderer writes is what the command reads: each command parses its Argv back
// into the same arguments.
func TestArgvParsesBack(t *testing.T) {
	dest := v1alpha1.BackupDestination{PVC: &v1alpha1.PVCDestination{ClaimName: "backups", SubPath: "demo"}}
	src := v1alpha1.SnapshotSource{Key: "k.db", BackupDestination: v1alpha1.BackupDestination{S3: &v1alpha1.S3Destination{
		Bucket: "b", Prefix: "p", CredentialsSecret: "s3"}}}
	at := time.Date(2026, 11, 26, 4, 0, 0, 0, time.UTC)
	for _, a := range []interface {
		Argv() []string
	}{
		Preflight{DataDir: "/var/lib/etcd/data", ExpectData: true},
		Preflight{DataDir: "/d"},
		Preflight{DataDir: "/d", Resolve: "demo-0.demo.ns.svc"},
		Preflight{DataDir: "/d", Trust: "ab.cd", TrustFiles: []string{"/etc/etcd/tls/trust/ca.crt", "/etc/etcd/tls/peer/ca.crt"}},
		RestoreFetch{Source: src, SHA256: "abc", Out: "/var/lib/etcd/restore/snapshot.db"},
		RestorePlace{From: "/var/lib/etcd/restore/data", DataDir: "/var/lib/etcd/data"},
		Snapshot{Destination: dest, Endpoint: "http://127.0.0.1:2379", Member: "demo-0", MemberID: "8e9e05c52164694d",
			ClusterID: "cdf818194e3a8c32", Namespace: "ns", Cluster: "demo", At: at, Unique: "x1", Result: TerminationLog},
		DeleteObject{Destination: dest, Key: "ns/demo/k.db"},
	} {
		argv := a.Argv()
		require.Equal(t, Binary, argv[0])
		var got interface{ parse([]string) error }
		switch argv[1] {
		case CmdPreflight:
			got = &Preflight{}
		case CmdRestoreFetch:
			got = &RestoreFetch{}
		case CmdRestorePlace:
			got = &RestorePlace{}
		case CmdSnapshot:
			got = &Snapshot{}
		case CmdDeleteObject:
			got = &DeleteObject{}
		}
		require.NoError(t, got.parse(argv[2:]), "%v", argv)
		require.Equal(t, a, deref(got), "%v", argv)
	}
}

func deref(v any) any {
	switch v := v.(type) {
	case *Preflight:
		return *v
	case *RestoreFetch:
		return *v
	case *RestorePlace:
		return *v
	case *Snapshot:
		return *v
	case *DeleteObject:
		return *v
	}
	return nil
}

// Pods already running carry these commands: their flags do not change.
func TestArgvIsStable(t *testing.T) {
	require.Equal(t, []string{"/manager", "preflight", "--data-dir=/var/lib/etcd/data", "--expect-data=false"},
		Preflight{DataDir: "/var/lib/etcd/data"}.Argv())
	require.Equal(t, []string{"/manager", "restore-place", "--from=/r/data", "--data-dir=/d"}, RestorePlace{From: "/r/data", DataDir: "/d"}.Argv())
	pvc := v1alpha1.BackupDestination{PVC: &v1alpha1.PVCDestination{ClaimName: "c"}}
	require.Equal(t, []string{"/manager", "delete-object", `--destination={"pvc":{"claimName":"c"}}`, "--key=k"},
		DeleteObject{Destination: pvc, Key: "k"}.Argv())
	require.Equal(t, []string{"/manager", "restore-fetch", `--source={"pvc":{"claimName":"c"},"key":"k"}`, "--sha256=", "--out=/o"},
		RestoreFetch{Source: v1alpha1.SnapshotSource{Key: "k", BackupDestination: pvc}, Out: "/o"}.Argv())
	require.Equal(t, []string{"/manager", "snapshot", `--destination={"pvc":{"claimName":"c"}}`, "--endpoint=e", "--member=m",
		"--member-id=1", "--cluster-id=2", "--namespace=ns", "--cluster=demo", "--at=2026-11-26T04:00:00Z", "--unique=u"},
		Snapshot{Destination: pvc, Endpoint: "e", Member: "m", MemberID: "1", ClusterID: "2", Namespace: "ns", Cluster: "demo",
			At: time.Date(2026, 11, 26, 5, 0, 0, 0, time.FixedZone("CET", 3600)), Unique: "u"}.Argv())
}

func TestRunExitsUsageOnBadFlags(t *testing.T) {
	_, ok := Run("no-such-command", nil)
	require.False(t, ok)
	for _, args := range [][]string{
		{CmdPreflight, "--no-such-flag"},
		{CmdRestoreFetch},
		{CmdRestoreFetch, "--source={"},
		{CmdSnapshot, `--destination={"pvc":{"claimName":"c"}}`, "--at=yesterday"},
		{CmdDeleteObject, "--key=k"},
	} {
		code, ok := Run(args[0], args[1:])
		require.True(t, ok)
		require.Equal(t, ExitUsage, code, "%v", args)
	}
}
