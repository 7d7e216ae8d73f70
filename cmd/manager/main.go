// Command manager runs the etcdplan operator. `manager preflight` is the check member
// Pods run before etcd starts; `manager restore-fetch` and `restore-place` restore a new
// cluster's seed from a snapshot; `manager snapshot` and `delete-object` store and delete
// snapshots on a volume claim, in Pods that mount it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
	_ "time/tzdata" // CRON_TZ= schedules name zones, and an image may have no zone files

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/backupctl"
	"github.com/etcdplan/etcdplan/executor/clustermetrics"
	"github.com/etcdplan/etcdplan/executor/controller"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/executor/store"
)

func main() {
	if len(os.Args) > 1 {
		if cmd, ok := map[string]func([]string) int{"preflight": preflight, "restore-fetch": restoreFetch, "restore-place": restorePlace,
			"snapshot": snapshotToPVC, "delete-object": deleteObject}[os.Args[1]]; ok {
			os.Exit(cmd(os.Args[2:]))
		}
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

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

func run() error {
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

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	cacheOpts := cache.Options{}
	if o.namespaces != "" {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range strings.Split(o.namespaces, ",") {
			cacheOpts.DefaultNamespaces[strings.TrimSpace(ns)] = cache.Config{}
		}
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOpts,
		Metrics:                 metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:  o.probeAddr,
		LeaderElection:          o.leaderElect,
		LeaderElectionID:        "etcdplan.io",
		LeaderElectionNamespace: o.leaderElectionNamespace,
		LeaseDuration:           &o.lease,
		RenewDeadline:           &o.renew,
		RetryPeriod:             &o.retry,
		// A stopping operator hands the lease back at once, so its successor (a rollout, a
		// drained node) acts as soon as it is ready instead of waiting for the lease to expire.
		// The process exits right after, so nothing acts without the lease.
		LeaderElectionReleaseOnCancel: true,
		// A replica waiting for the lease lists and watches what the controllers read, and
		// queues every cluster, so the moment it is elected it reconciles instead of listing.
		Controller: config.Controller{EnableWarmup: ptr.To(true)},
	})
	if err != nil {
		return err
	}
	if o.selfImage == "" {
		if o.selfImage, err = ownImage(mgr.GetAPIReader()); err != nil {
			return err
		}
	}
	// The clusters' state for alerts, read from the cache at each scrape.
	metrics.Registry.MustRegister(clustermetrics.Collector{Reader: mgr.GetClient()})
	r := &controller.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorderFor("etcdplan"), //nolint:staticcheck // the events/v1 recorder needs a newer API
		Images:    resources.Images{EtcdRepository: o.etcdRepository, Operator: o.selfImage},
		Dial:      etcd.Dial,
	}
	if dir := o.crashAfterEffectMarkersDir; dir != "" {
		r.AfterEffect = crashOnce(dir)
	}
	if err := r.SetupWithManager(mgr, o.workers); err != nil {
		return err
	}
	br := &backupctl.BackupReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Dial: etcd.Dial, Open: store.Open,
		Images: r.Images, Inspect: etcd.ContentsAt, DrillDeadline: o.drillDeadline}
	if err := br.SetupWithManager(mgr); err != nil {
		return err
	}
	sr := &backupctl.ScheduleReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Open: store.Open, Images: r.Images}
	if err := sr.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", warm(mgr.GetCache())); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// ownImage reads the operator's image from its own Pod.
func ownImage(c client.Reader) (string, error) {
	name, ns := os.Getenv("POD_NAME"), os.Getenv("POD_NAMESPACE")
	if name == "" || ns == "" {
		return "", errors.New("set --operator-image, or POD_NAME and POD_NAMESPACE to find it")
	}
	var pod corev1.Pod
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &pod); err != nil {
		return "", fmt.Errorf("reading the operator's own Pod for its image: %w", err)
	}
	for _, ct := range pod.Spec.Containers {
		if ct.Name == "manager" {
			return ct.Image, nil
		}
	}
	return pod.Spec.Containers[0].Image, nil
}

// crashOnce stops the process right after a step's effect, the first time each step
// runs: a test of how the operator resumes from what it had recorded.
func crashOnce(dir string) func(string, int) {
	return func(planID string, step int) {
		marker := filepath.Join(dir, fmt.Sprintf("%s-%d", planID, step))
		if _, err := os.Stat(marker); err == nil {
			return
		}
		_ = os.MkdirAll(dir, 0o755)
		_ = os.WriteFile(marker, []byte(time.Now().Format(time.RFC3339Nano)), 0o644)
		fmt.Fprintf(os.Stderr, "test failpoint: exiting after the effect of plan %s step %d\n", planID, step+1)
		os.Exit(3)
	}
}

// warm is the readiness check: ready once the clusters, their Pods and claims are listed. A
// rollout stops the old operator only when the new one is ready, so the new one can act the
// moment it takes the lease.
func warm(c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		for _, o := range []client.Object{&v1alpha1.EtcdCluster{}, &corev1.Pod{}, &corev1.PersistentVolumeClaim{}} {
			inf, err := c.GetInformer(req.Context(), o, cache.BlockUntilSynced(false))
			if err != nil {
				return err
			}
			if !inf.HasSynced() {
				return fmt.Errorf("%T not listed yet", o)
			}
		}
		return nil
	}
}
