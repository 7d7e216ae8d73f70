package main

import (
	"flag"
	"time"

	"go.uber.org/zap/zapcore"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/etcdplan/etcdplan/executor/backupctl"
)

type options struct {
	metricsAddr, probeAddr     string
	leaderElect                bool
	leaderElectionNamespace    string
	lease, renew, retry        time.Duration
	namespaces                 string
	etcdRepository, selfImage  string
	workers                    int
	drillDeadline              time.Duration
	crashAfterEffectMarkersDir string
}

// parseFlags reads the operator's flags and sets up its logger.
func parseFlags() options {
	var o options
	flag.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address the metrics endpoint binds to (0 disables it)")
	flag.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address the health and readiness probes bind to")
	flag.BoolVar(&o.leaderElect, "leader-elect", false, "elect a leader, so only one replica of the operator acts")
	flag.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election lease (default: the operator's own)")
	// client-go's lease and renewal deadline; an API server too slow to renew within them
	// makes the operator exit and start again (its plan is in status, so nothing is lost but
	// time). The retry period is shorter than client-go's 2 s: a waiting replica (the new
	// Pod of a rollout) takes a released lease at its next try, so the retry period is how
	// long a rollout leaves every cluster unattended; the price is the leader renewing its
	// Lease twice a second.
	flag.DurationVar(&o.lease, "leader-elect-lease-duration", 15*time.Second, "how long a lease holds without renewal before another replica may take it")
	flag.DurationVar(&o.renew, "leader-elect-renew-deadline", 10*time.Second, "how long the leader tries to renew its lease before it gives up and exits")
	flag.DurationVar(&o.retry, "leader-elect-retry-period", 500*time.Millisecond, "how often a replica tries to take or renew the lease")
	flag.StringVar(&o.namespaces, "namespaces", "", "comma-separated namespaces to watch (default: all)")
	flag.StringVar(&o.etcdRepository, "etcd-image-repository", "quay.io/coreos/etcd", "etcd image repository; tags are v<version>")
	flag.StringVar(&o.selfImage, "operator-image", "", "the operator's own image, run by member Pods for their preflight check (default: read from the operator's Pod, named by POD_NAME and POD_NAMESPACE)")
	// A reconcile mostly waits on the API server and etcd, so many run at once: a restarted
	// operator looks at every cluster within moments instead of a few at a time.
	flag.IntVar(&o.workers, "workers", 16, "clusters reconciled at once")
	// A drill's Pod that never serves (no node fits it, an image that does not pull, a store
	// too slow for the snapshot) ends the drill as not run, and it is tried again later.
	flag.DurationVar(&o.drillDeadline, "drill-deadline", backupctl.DefaultDrillDeadline,
		"how long a restore drill's scratch etcd has to serve, from its Pod's creation, before the drill is taken as not run (DrillDeadlineExceeded) and tried again later")
	flag.StringVar(&o.crashAfterEffectMarkersDir, "test-crash-after-effect", "", "testing only: exit right after each step's effect, once per step, leaving markers in this directory")
	// Milliseconds in log times: steps take a few hundred of them.
	zapOpts := zap.Options{TimeEncoder: zapcore.ISO8601TimeEncoder}
	zapOpts.BindFlags(flag.CommandLine)
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	return o
}
