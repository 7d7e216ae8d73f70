package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/clustermetrics"
)

// newManager makes the controller manager: its cache, leader election, metrics (with the
// clusters' state) and health probes.
func newManager(o options) (manager.Manager, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                  scheme,
		Cache:                   cacheOptions(o.namespaces),
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
		return nil, err
	}
	// The clusters' state for alerts, read from the cache at each scrape.
	metrics.Registry.MustRegister(clustermetrics.Collector{Reader: mgr.GetClient()})
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", warm(mgr.GetCache())); err != nil {
		return nil, err
	}
	return mgr, nil
}

// cacheOptions watch the comma-separated namespaces, or all when there are none.
func cacheOptions(namespaces string) cache.Options {
	opts := cache.Options{}
	if namespaces != "" {
		opts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range strings.Split(namespaces, ",") {
			opts.DefaultNamespaces[strings.TrimSpace(ns)] = cache.Config{}
		}
	}
	return opts
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
