// Command cert-manager runs cert-manager's certificate controllers with its CA and self-signed
// issuers only, for the TLS tests on the local stack (test/stack.mk builds it, make certmgr-bins).
// It has no webhook: cert-manager objects are neither defaulted nor validated, so tests write
// complete ones. /readyz on --health-addr answers 200 once every informer cache is synced.
package main

import (
	"context"
	"flag"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"sync/atomic"
	"syscall"
	"time"

	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

func main() {
	klog.InitFlags(nil)
	var opts controller.ContextOptions
	flag.StringVar(&opts.Kubeconfig, "kubeconfig", "", "kubeconfig file (in-cluster configuration when empty)")
	flag.StringVar(&opts.ClusterResourceNamespace, "cluster-resource-namespace", "cert-manager", "namespace of the Secrets ClusterIssuers refer to")
	flag.DurationVar(&opts.CertificateRequestMinimumBackoffDuration, "min-backoff", 10*time.Second, "first wait after a failed issuance")
	flag.DurationVar(&opts.CertificateRequestMaximumBackoffDuration, "max-backoff", 2*time.Minute, "longest wait after failed issuances")
	workers := flag.Int("workers", 2, "workers per controller")
	healthAddr := flag.String("health-addr", ":9403", "address of /healthz and /readyz")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	factory, err := controller.NewContextFactory(ctx, opts)
	if err != nil {
		klog.Fatalf("cert-manager: %v", err)
	}
	var names []string
	for name := range controller.Known() {
		names = append(names, name)
	}
	sort.Strings(names)
	var loops []controller.Interface
	for _, name := range names {
		c, err := controller.Known()[name](factory)
		if err != nil {
			klog.Fatalf("cert-manager: controller %s: %v", name, err)
		}
		loops = append(loops, c)
	}
	shared, err := factory.Build()
	if err != nil {
		klog.Fatalf("cert-manager: %v", err)
	}
	shared.KubeSharedInformerFactory.Start(ctx.Done())
	shared.SharedInformerFactory.Start(ctx.Done())

	var ready atomic.Bool
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte("ok")) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "informers not synced", http.StatusServiceUnavailable)
			return
		}
		w.Write([]byte("ok"))
	})
	go func() {
		srv := &http.Server{Addr: *healthAddr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		klog.Fatalf("cert-manager: health server: %v", srv.ListenAndServe())
	}()
	for i, c := range loops {
		go func() {
			if err := c.Run(*workers, ctx); err != nil {
				klog.Fatalf("cert-manager: controller %s: %v", names[i], err)
			}
		}()
	}
	shared.KubeSharedInformerFactory.WaitForCacheSync(ctx.Done())
	shared.SharedInformerFactory.WaitForCacheSync(ctx.Done())
	ready.Store(ctx.Err() == nil)
	klog.Infof("cert-manager: controllers %v run", names)
	<-ctx.Done()
}
