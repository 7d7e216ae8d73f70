// Package node is the local kubelet's node agent: it registers a Node, keeps it Ready, and
// runs the Pods bound to it as processes in network namespaces (see DESIGN §6.3 and
// test/kubelet/README.md for what it does and what it leaves out).
package node

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/etcdplan/etcdplan/test/kubelet/netsetup"
)

// Config configures one node.
type Config struct {
	NodeName string
	// StateDir holds this node's state: Pod IPs, Pod directories, container pids and logs.
	StateDir string
	PodCIDR  netip.Prefix
	// Bridge is the host bridge Pods attach to (netsetup.Bridge unless set).
	Bridge string
	// NetnsPrefix starts the names of the Pods' network namespaces (netsetup.NetnsPrefix
	// unless set); the kubelet cleans up only namespaces named so.
	NetnsPrefix string
	// Gateway is the bridge's address; Pods use it as default route and its prefix length.
	Gateway netip.Prefix
	// NodeIP is reported as the Node's InternalIP and the Pods' hostIP.
	NodeIP string
	// AdminAddr serves health and fault injection over HTTP; empty disables it.
	AdminAddr string
	// APIAddr serves the kubelet API (logs, exec, port-forward) over TLS with TLSCertFile
	// and TLSKeyFile, to clients with a certificate of ClientCAFile or a bearer token;
	// empty disables it.
	APIAddr                               string
	TLSCertFile, TLSKeyFile, ClientCAFile string
	ImagesPath                            string
	// ClusterDomain and DNSServer go to the Pods' resolv.conf.
	ClusterDomain string
	DNSServer     string
	// APIHost and APIPort are the in-cluster API endpoint given to containers.
	APIHost string
	APIPort string
	// Capacity is what the Node reports to the scheduler.
	Capacity v1.ResourceList
	// Restart back-off of crashed containers: doubles from BackoffInitial up to BackoffMax.
	BackoffInitial time.Duration
	BackoffMax     time.Duration
	// Executable is the localkubelet binary, re-run as the container shim.
	Executable string
	// KubeletVersion is reported in the Node's status.
	KubeletVersion string
	// APILink is the node's connection to the API server, which the cut-api fault breaks;
	// the client's transport should go through it (APILink.WrapTransport). A new one
	// unless set.
	APILink *APILink
}

// DefaultCapacity is a node's capacity unless configured otherwise.
func DefaultCapacity() v1.ResourceList {
	return v1.ResourceList{
		v1.ResourceCPU:              resource.MustParse("4"),
		v1.ResourceMemory:           resource.MustParse("8Gi"),
		v1.ResourcePods:             resource.MustParse("110"),
		v1.ResourceEphemeralStorage: resource.MustParse("50Gi"),
	}
}

func (c *Config) complete() error {
	if c.NodeName == "" || c.StateDir == "" || !c.PodCIDR.IsValid() {
		return fmt.Errorf("node name, state dir and pod CIDR are required")
	}
	abs, err := filepath.Abs(c.StateDir)
	if err != nil {
		return err
	}
	c.StateDir = abs
	if !c.Gateway.IsValid() {
		c.Gateway = netip.MustParsePrefix("10.88.0.1/16")
	}
	if !c.Gateway.Contains(c.PodCIDR.Addr()) {
		return fmt.Errorf("pod CIDR %s is outside the bridge network %s", c.PodCIDR, c.Gateway.Masked())
	}
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.Bridge, netsetup.Bridge)
	def(&c.NetnsPrefix, netsetup.NetnsPrefix)
	def(&c.NodeIP, c.Gateway.Addr().String())
	def(&c.ClusterDomain, "cluster.local")
	def(&c.DNSServer, c.Gateway.Addr().String())
	def(&c.APIHost, c.Gateway.Addr().String())
	def(&c.APIPort, "6443")
	def(&c.KubeletVersion, "v1.36.3")
	if c.APIAddr != "" && (c.TLSCertFile == "" || c.TLSKeyFile == "" || c.ClientCAFile == "") {
		return fmt.Errorf("the kubelet API needs a serving certificate, its key and a client CA")
	}
	if c.Capacity == nil {
		c.Capacity = DefaultCapacity()
	}
	if c.BackoffInitial <= 0 {
		c.BackoffInitial = time.Second
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 30 * time.Second
	}
	if c.APILink == nil {
		c.APILink = NewAPILink()
	}
	if c.Executable == "" {
		if c.Executable, err = os.Executable(); err != nil {
			return err
		}
	}
	return nil
}
