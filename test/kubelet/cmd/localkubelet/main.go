// Command localkubelet runs the local Kubernetes stack's nodes (see test/kubelet/README.md):
//
//	localkubelet cluster --kubeconfig K --state-dir .stack [--dns-listen 10.88.0.1:53] [--bridge etcdplan0]
//	localkubelet node --kubeconfig K --name node-1 --state-dir .stack/nodes/node-1 \
//	    --pod-cidr 10.88.1.0/24 --admin 127.0.0.1:10251 --images .stack/images.json \
//	    [--bridge etcdplan0 --bridge-addr 10.88.0.1/16 --netns-prefix lk-]
//	localkubelet cleanup --state-dir .stack [--bridge etcdplan0 --netns-prefix lk-]
//	localkubelet container-exec SPEC   (internal: the container shim)
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/etcdplan/etcdplan/test/kubelet/clusterdns"
	"github.com/etcdplan/etcdplan/test/kubelet/netsetup"
	"github.com/etcdplan/etcdplan/test/kubelet/node"
	"github.com/etcdplan/etcdplan/test/kubelet/provision"
	"github.com/etcdplan/etcdplan/test/kubelet/shim"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	log.SetFlags(log.LstdFlags | log.Lmicroseconds)
	var err error
	switch os.Args[1] {
	case "container-exec":
		if len(os.Args) != 3 {
			usage()
		}
		err = shim.Main(os.Args[2])
		fmt.Fprintf(os.Stderr, "container-exec: %v\n", err)
		os.Exit(128) // like a runtime's start error
	case "cluster":
		err = cluster(os.Args[2:])
	case "node":
		err = runNode(os.Args[2:])
	case "cleanup":
		err = cleanup(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		log.Fatal(err)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: localkubelet cluster|node|cleanup [flags]")
	os.Exit(2)
}

func signalContext() context.Context {
	ctx, _ := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	return ctx
}

// client is a client for kubeconfig; with link, its requests go through that link (which
// the node's cut-api fault breaks).
func client(kubeconfig string, link *node.APILink) (kubernetes.Interface, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 50, 100
	cfg.UserAgent = "localkubelet"
	if link != nil {
		cfg.Wrap(link.WrapTransport)
	}
	return kubernetes.NewForConfig(cfg)
}

// cluster runs the shared parts: bridge, DNS, volume provisioner.
func cluster(args []string) error {
	fs := flag.NewFlagSet("cluster", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (cluster admin)")
	stateDir := fs.String("state-dir", ".stack", "stack state directory; volumes go to <state-dir>/volumes")
	dnsListen := fs.String("dns-listen", "10.88.0.1:53", "cluster DNS address (UDP and TCP)")
	gateway := fs.String("bridge-addr", "10.88.0.1/16", "bridge address and Pod network")
	bridge := fs.String("bridge", netsetup.Bridge, "the Pods' bridge")
	domain := fs.String("cluster-domain", "cluster.local", "cluster DNS zone")
	_ = fs.Parse(args)
	gw, err := netip.ParsePrefix(*gateway)
	if err != nil {
		return err
	}
	if err := netsetup.EnsureBridge(*bridge, gw); err != nil {
		return err
	}
	c, err := client(*kubeconfig, nil)
	if err != nil {
		return err
	}
	ctx := signalContext()
	f := informers.NewSharedInformerFactory(c, 5*time.Minute)
	handler := clusterdns.NewHandler(*domain, f)
	prov, err := provision.New(c, filepath.Join(*stateDir, "volumes"), f)
	if err != nil {
		return err
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	go prov.Run(ctx)
	log.Printf("cluster DNS on %s, volumes in %s", *dnsListen, prov.Dir)
	return clusterdns.Serve(ctx, *dnsListen, handler)
}

func runNode(args []string) error {
	fs := flag.NewFlagSet("node", flag.ExitOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig (the node's credentials)")
	var cfg node.Config
	fs.StringVar(&cfg.NodeName, "name", "", "node name")
	fs.StringVar(&cfg.StateDir, "state-dir", "", "node state directory")
	podCIDR := fs.String("pod-cidr", "", "Pod addresses, inside the bridge network, e.g. 10.88.1.0/24")
	gateway := fs.String("bridge-addr", "10.88.0.1/16", "bridge address and Pod network")
	fs.StringVar(&cfg.Bridge, "bridge", netsetup.Bridge, "the Pods' bridge")
	fs.StringVar(&cfg.NetnsPrefix, "netns-prefix", netsetup.NetnsPrefix, "start of the Pods' network namespace names")
	fs.StringVar(&cfg.AdminAddr, "admin", "", "admin HTTP address (health, fault injection)")
	fs.StringVar(&cfg.APIAddr, "kubelet-api", "", "kubelet API address (kubectl logs, exec, port-forward); needs the three TLS flags")
	fs.StringVar(&cfg.TLSCertFile, "tls-cert-file", "", "kubelet API serving certificate")
	fs.StringVar(&cfg.TLSKeyFile, "tls-private-key-file", "", "its key")
	fs.StringVar(&cfg.ClientCAFile, "client-ca-file", "", "CA of the client certificates the kubelet API accepts")
	fs.StringVar(&cfg.ImagesPath, "images", ".stack/images.json", "image-to-binary rules")
	fs.StringVar(&cfg.APIHost, "api-host", "", "in-cluster API host for containers (default: bridge address)")
	fs.StringVar(&cfg.APIPort, "api-port", "6443", "in-cluster API port for containers")
	fs.StringVar(&cfg.ClusterDomain, "cluster-domain", "cluster.local", "cluster DNS zone")
	fs.DurationVar(&cfg.BackoffInitial, "backoff-initial", time.Second, "first restart back-off")
	fs.DurationVar(&cfg.BackoffMax, "backoff-max", 30*time.Second, "longest restart back-off")
	cpu := fs.String("cpu", "4", "CPU capacity")
	memory := fs.String("memory", "8Gi", "memory capacity")
	pods := fs.String("max-pods", "110", "Pod capacity")
	_ = fs.Parse(args)
	var err error
	if cfg.PodCIDR, err = netip.ParsePrefix(*podCIDR); err != nil {
		return fmt.Errorf("--pod-cidr: %w", err)
	}
	if cfg.Gateway, err = netip.ParsePrefix(*gateway); err != nil {
		return fmt.Errorf("--bridge-addr: %w", err)
	}
	cfg.Capacity = node.DefaultCapacity()
	for name, v := range map[string]string{"cpu": *cpu, "memory": *memory, "pods": *pods} {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return fmt.Errorf("--%s: %w", name, err)
		}
		cfg.Capacity[v1.ResourceName(name)] = q
	}
	cfg.APILink = node.NewAPILink()
	c, err := client(*kubeconfig, cfg.APILink)
	if err != nil {
		return err
	}
	return node.Run(signalContext(), cfg, c)
}

func cleanup(args []string) error {
	fs := flag.NewFlagSet("cleanup", flag.ExitOnError)
	stateDir := fs.String("state-dir", ".stack", "stack state directory")
	bridge := fs.String("bridge", netsetup.Bridge, "the Pods' bridge")
	prefix := fs.String("netns-prefix", netsetup.NetnsPrefix, "start of the Pods' network namespace names")
	_ = fs.Parse(args)
	return node.Cleanup(*stateDir, *bridge, *prefix)
}
