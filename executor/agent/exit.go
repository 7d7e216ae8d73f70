package agent

import (
	"fmt"
	"os"
)

// Exit codes of the in-Pod commands. The operator reads them back from a container's
// terminated state: observe reads the preflight's, the backup reconciler the snapshot's.
const (
	// ExitFailed: the command failed; its termination message says why.
	ExitFailed = 1
	// ExitUsage: the command's flags do not parse.
	ExitUsage = 2
	// ExitDataLost: a member that joined the cluster finds its data directory empty
	// (preflight). The planner replaces such a member.
	ExitDataLost = 3
	// ExitStoreFull: the volume claim a snapshot is stored on is out of space (snapshot).
	ExitStoreFull = 4
	// ExitDataUnreadable: the data directory cannot be read (a permission or I/O error, a
	// file or a dangling link in its place) (preflight). The data may be intact, so the
	// member is down, not lost.
	ExitDataUnreadable = 5
	// ExitTrustChanged: the trust bundles the Pod mounted are not those it was made for
	// (its annotation etcdplan.io/trust) and did not become them (preflight). The Pod ends
	// before etcd reads them, and a new one mounts them as they are.
	ExitTrustChanged = 6
)

// TerminationLog is the file Kubernetes reads a container's termination message from.
// The snapshot command writes its result there. Every container the operator renders has
// the policy FallbackToLogsOnError, so a command that fails without writing it is read
// back by what it printed last to stderr.
const TerminationLog = "/dev/termination-log"

// fail prints why the command failed, its termination message, and returns code.
func fail(code int, format string, a ...any) int {
	fmt.Fprintf(os.Stderr, format+"\n", a...)
	return code
}
