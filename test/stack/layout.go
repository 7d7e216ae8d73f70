// Package stack runs the local Kubernetes stack used by the end-to-end tests and the demo: an
// etcd, kube-apiserver, kube-controller-manager and kube-scheduler built from source, plus the
// local kubelet (test/kubelet) serving three nodes whose Pods run as processes on this machine.
//
// Tests call Start, which reuses a running stack when its kubeconfig answers and starts one
// otherwise; the stackctl command (make stack-up, stack-down, stack-status) drives the same code.
package stack

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Versions of the binaries the stack runs. test/stack.mk builds them; a test checks both agree.
const (
	KubeVersion     = "v1.36.3"
	EtcdVersion     = "v3.6.16"
	EtcdPrevVersion = "v3.5.35"
	// MinioVersion is the MinIO server backup tests write to (package objstore).
	MinioVersion = "v0.0.0-20260212201848-7aac2a2c5b7c"
	// FakeGCSVersion is the fake-gcs-server backup tests write to for GCS (package objstore).
	FakeGCSVersion = "v1.56.1"
	// Flux's controllers the GitOps tests run on the stack, with the CRDs of their modules.
	FluxSourceVersion    = "v1.9.6"
	FluxKustomizeVersion = "v1.9.5"
	// CertManagerVersion is the cert-manager the TLS tests run on the stack (CA and
	// self-signed issuers, test/tools/cert-manager), with the CRDs of its module.
	CertManagerVersion = "v1.21.2"
)

// Network layout of stack 0; stack N adds 100*N to each port (see Instance).
const (
	apiServerPort   = 6443
	etcdClientPort  = 2479
	etcdPeerPort    = 2480
	controllerPort  = 10257
	schedulerPort   = 10259
	serviceCIDR     = "10.96.0.0/16"
	serviceIP       = "10.96.0.1"
	clusterDomain   = "cluster.local"
	adminPortBase   = 10250
	kubeletPortBase = 10260
	StorageClass    = "local"
	Provisioner     = "etcdplan.io/local"
	nodeCount       = 3
	defaultSAIssuer = "https://kubernetes.default.svc." + clusterDomain
)

// Nodes returns the names of the stack's nodes: node-1, node-2, node-3.
func Nodes() []string {
	out := make([]string, nodeCount)
	for i := range out {
		out[i] = nodeName(i + 1)
	}
	return out
}

func nodeName(i int) string { return "node-" + strconv.Itoa(i) }

// nodeIndex returns N for "node-N", or an error for a name that is not a stack node.
func nodeIndex(name string) (int, error) {
	for i := 1; i <= nodeCount; i++ {
		if nodeName(i) == name {
			return i, nil
		}
	}
	return 0, fmt.Errorf("stack: no node %q (nodes are node-1..node-%d)", name, nodeCount)
}

// layout names the files and addresses of a stack rooted at a checkout of the repository.
type layout struct {
	root string // repository root (holds go.mod, bin/, .stack/)
	n    Instance
}

// adminAddr is the host:port of node-N's local kubelet admin HTTP server.
func (l layout) adminAddr(node string) (string, error) {
	i, err := nodeIndex(node)
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", l.n.port(adminPortBase+i)), nil
}

// kubeletAPIAddr is the host:port of node-N's kubelet API (on the bridge: the address the
// Node reports).
func (l layout) kubeletAPIAddr(node string) string {
	i, _ := nodeIndex(node)
	return fmt.Sprintf("%s:%d", l.n.BridgeIP(), l.n.port(kubeletPortBase+i))
}

func (l layout) bin(parts ...string) string {
	return filepath.Join(append([]string{l.root, "bin"}, parts...)...)
}
func (l layout) state(parts ...string) string {
	return filepath.Join(append([]string{l.root, ".stack"}, parts...)...)
}
func (l layout) kubeconfig() string              { return l.state("kubeconfig") }
func (l layout) kubeconfigFor(who string) string { return l.state("kubeconfigs", who+".kubeconfig") }
func (l layout) cert(name string) string         { return l.state("certs", name) }
func (l layout) pidFile(name string) string      { return l.state("pids", name+".pid") }
func (l layout) logFile(name string) string      { return l.state("logs", name+".log") }
func (l layout) volumes() string                 { return l.state("volumes") }

// etcdURL is the control plane's etcd's client URL.
func (l layout) etcdURL() string { return fmt.Sprintf("http://127.0.0.1:%d", l.n.port(etcdClientPort)) }

func (l layout) etcdBin(version, cmd string) string { return l.bin("etcd-"+version, cmd) }
func (l layout) kubeBin(cmd string) string          { return l.bin("kube-"+KubeVersion, cmd) }
func (l layout) localkubelet() string               { return l.bin("localkubelet") }

// RepoRoot finds the repository root by walking up from the working directory to the
// directory that holds go.mod of module github.com/etcdplan/etcdplan.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && isMainModule(b) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("stack: no go.mod of github.com/etcdplan/etcdplan above the working directory")
		}
		dir = parent
	}
}

func isMainModule(gomod []byte) bool {
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return strings.Trim(f[1], `"`) == "github.com/etcdplan/etcdplan"
		}
	}
	return false
}
