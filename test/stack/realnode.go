package stack

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The real node: node-4 runs the real kubelet over containerd and runc, beside the local
// kubelet's node-1..3, when the stack starts with ETCDPLAN_REAL_NODE=1 (make REAL_NODE=1). Its
// Pods run from OCI images (realnode_images.go) on the stack's bridge, with their own /24 of
// the Pod network. It carries the label and taint RealNodeLabel, so only Pods that ask for it
// (nodeSelector and toleration) land there. Taking it down puts the machine back as it was
// (realnode_down.go).

// Versions of the real node's binaries (test/stack.mk builds them).
const (
	ContainerdVersion = "v2.2.9"
	CNIPluginsVersion = "v1.9.1"
)

const (
	// RealNodeName is the real node's name.
	RealNodeName = "node-4"
	// RealNodeLabel is the label (value "true") and the NoSchedule taint of the real node.
	RealNodeLabel = "etcdplan.io/real-node"
	realNodeIndex = 4
	// realNodeEnv asks for the real node when the stack starts.
	realNodeEnv = "ETCDPLAN_REAL_NODE"
)

// RealNodeWanted reports whether ETCDPLAN_REAL_NODE=1 asks for the real node.
func RealNodeWanted() bool { return os.Getenv(realNodeEnv) == "1" }

// realNode names the real node's files under .stack/realnode.
func (l layout) realNode(parts ...string) string {
	return l.state(append([]string{"realnode"}, parts...)...)
}

// realNodeOn reports whether the stack has (or had, until taken down) the real node.
func (l layout) realNodeOn() bool {
	_, err := os.Stat(l.realNode())
	return err == nil
}

func (l layout) containerdBin(cmd string) string {
	return l.bin("containerd-"+ContainerdVersion, cmd)
}
func (l layout) cniBin() string { return l.bin("cni-plugins-" + CNIPluginsVersion) }

// cgroupRoot is the real kubelet's cgroup root: its own per stack, so that two stacks' real
// nodes never share one.
func (n Instance) cgroupRoot() string { return fmt.Sprintf("/etcdplan-stack%d", n) }

// realNodePodRange is the first and last Pod address of the real node: 10.(88+N).4.0/24.
func (n Instance) realNodePodRange() (string, string) {
	return fmt.Sprintf("10.%d.%d.2", 88+int(n), realNodeIndex), fmt.Sprintf("10.%d.%d.254", 88+int(n), realNodeIndex)
}

// realNodeKubeletAddr is the real kubelet's API address, on the bridge like the local nodes'.
func (l layout) realNodeKubeletPort() int { return l.n.port(kubeletPortBase + realNodeIndex) }

func containerdProc(l layout) process {
	return process{name: RealNodeName + "-containerd", bin: l.containerdBin("containerd"),
		args: []string{"--config=" + l.realNode("containerd.toml")}}
}

func realKubeletProc(l layout) process {
	return process{name: RealNodeName, bin: l.kubeBin("kubelet"), args: []string{
		"--config=" + l.realNode("kubelet.yaml"),
		"--kubeconfig=" + l.kubeconfigFor(RealNodeName),
		"--root-dir=" + l.realNode("kubelet"),
		"--hostname-override=" + RealNodeName,
		"--node-ip=" + l.n.BridgeIP(),
		"--node-labels=" + RealNodeLabel + "=true",
		"--v=1",
	}}
}

// realNodeProcs are the real node's processes in start order, when the stack has it.
func realNodeProcs(l layout) []process {
	if !l.realNodeOn() {
		return nil
	}
	return []process{containerdProc(l), realKubeletProc(l)}
}

// runcPath is Debian's runc (make real-node-deps).
func runcPath() (string, error) {
	p, err := exec.LookPath("runc")
	if err != nil {
		return "", errors.New("stack: the real node needs runc: run `make real-node-deps` (as root)")
	}
	return filepath.Abs(p)
}

// writeRealNodeConfig writes containerd's configuration, the CNI network, the kubelet's
// configuration and its credentials.
func writeRealNodeConfig(l layout) error {
	runc, err := runcPath()
	if err != nil {
		return err
	}
	for _, d := range []string{"containerd/root", "containerd/state", "containerd/opt", "runc", "cni/net.d", "cni/ipam", "kubelet", "pod-logs"} {
		if err := os.MkdirAll(l.realNode(d), 0o755); err != nil {
			return err
		}
	}
	r := l.realNode()
	containerd := fmt.Sprintf(`version = 3
root = %q
state = %q

[grpc]
  address = %q

[ttrpc]
  address = %q

[metrics]
  address = ""

[plugins]
  [plugins.'io.containerd.internal.v1.opt']
    path = %q
  [plugins.'io.containerd.nri.v1.nri']
    disable = true
  [plugins.'io.containerd.cri.v1.images']
    snapshotter = "overlayfs"
    [plugins.'io.containerd.cri.v1.images'.pinned_images]
      sandbox = %q
  [plugins.'io.containerd.cri.v1.runtime']
    enable_cdi = false
    disable_apparmor = true
    # No CAP_SYS_RESOURCE here: without this every sandbox fails to start.
    restrict_oom_score_adj = true
    # Pod network namespaces under the state directory, not /run/netns.
    netns_mounts_under_state_dir = true
    [plugins.'io.containerd.cri.v1.runtime'.containerd]
      default_runtime_name = "runc"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        runtime_path = %q
        [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
          BinaryName = %q
          Root = %q
          SystemdCgroup = false
    [plugins.'io.containerd.cri.v1.runtime'.cni]
      bin_dirs = [%q]
      conf_dir = %q
  [plugins.'io.containerd.grpc.v1.cri']
    stream_server_address = "127.0.0.1"
    stream_server_port = "0"
`, filepath.Join(r, "containerd/root"), filepath.Join(r, "containerd/state"),
		l.realNode("containerd.sock"), l.realNode("containerd.sock.ttrpc"), filepath.Join(r, "containerd/opt"),
		PauseImage, l.containerdBin("containerd-shim-runc-v2"), runc, filepath.Join(r, "runc"),
		l.cniBin(), filepath.Join(r, "cni/net.d"))
	if err := writeFile(l.realNode("containerd.toml"), []byte(containerd), 0o644); err != nil {
		return err
	}

	first, last := l.n.realNodePodRange()
	cni := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "etcdplan-" + RealNodeName,
		"plugins": []any{map[string]any{
			"type": "bridge", "bridge": l.n.Bridge(),
			"isGateway": false, "ipMasq": false, "hairpinMode": true,
			"ipam": map[string]any{
				"type": "host-local",
				"ranges": [][]map[string]string{{{"subnet": l.n.podNetwork(), "rangeStart": first, "rangeEnd": last,
					"gateway": l.n.BridgeIP()}}},
				"routes":  []map[string]string{{"dst": "0.0.0.0/0", "gw": l.n.BridgeIP()}},
				"dataDir": filepath.Join(r, "cni/ipam"),
			},
		}},
	}
	b, err := json.MarshalIndent(cni, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFile(l.realNode("cni/net.d/10-etcdplan.conflist"), b, 0o644); err != nil {
		return err
	}

	kubelet := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzPort: 0
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %s
authorization:
  mode: Webhook
containerRuntimeEndpoint: unix://%s
# This machine has cgroup v1 only: the kubelet then warns, and enforces limits all the same.
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: %s
failSwapOn: false
clusterDNS: [%s]
clusterDomain: %s
resolvConf: ""
podLogsDir: %s
staticPodPath: ""
registerWithTaints:
- key: %s
  value: "true"
  effect: NoSchedule
# The images cannot be pulled again: never collect them, and no eviction for a full disk.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  imagefs.available: 1%%
  nodefs.inodesFree: 1%%
nodeStatusUpdateFrequency: 5s
`, l.n.BridgeIP(), l.realNodeKubeletPort(), l.cert("kubelet.crt"), l.cert("kubelet.key"), l.cert("ca.crt"),
		l.realNode("containerd.sock"), l.n.cgroupRoot(), l.n.BridgeIP(), clusterDomain, filepath.Join(r, "pod-logs"),
		RealNodeLabel)
	if err := writeFile(l.realNode("kubelet.yaml"), []byte(kubelet), 0o644); err != nil {
		return err
	}
	return writeRealNodeKubeconfig(l)
}

// podNetwork is the stack's Pod network, 10.(88+N).0.0/16.
func (n Instance) podNetwork() string { return fmt.Sprintf("10.%d.0.0/16", 88+int(n)) }

// writeRealNodeKubeconfig issues the real kubelet's client certificate (system:node:node-4
// in system:nodes, as the Node authorizer wants) from the stack's CA.
func writeRealNodeKubeconfig(l layout) error {
	caPEM, err := os.ReadFile(l.cert("ca.crt"))
	if err != nil {
		return err
	}
	keyPEM, err := os.ReadFile(l.cert("ca.key"))
	if err != nil {
		return err
	}
	cb, _ := pem.Decode(caPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return errors.New("stack: cannot read the stack's CA")
	}
	ca, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return err
	}
	caKey, err := x509.ParsePKCS8PrivateKey(kb.Bytes)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	user := "system:node:" + RealNodeName
	now := time.Now().Add(-time.Hour)
	der, err := x509.CreateCertificate(rand.Reader, &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: user, Organization: []string{"system:nodes"}},
		NotBefore:    now,
		NotAfter:     now.Add(5 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	server := fmt.Sprintf("https://127.0.0.1:%d", l.n.APIServerPort())
	return writeKubeconfig(l.kubeconfigFor(RealNodeName), server, caPEM, pemCert(der),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), user)
}

// realNodeUp starts the real node (or what of it does not run): its configuration, the
// record of the machine's state it changes, containerd, the images, the kubelet. The caller
// waits for it with realNodeReady.
func realNodeUp(ctx context.Context, l layout, log logger) error {
	for _, b := range []string{l.kubeBin("kubelet"), l.containerdBin("containerd"), l.containerdBin("containerd-shim-runc-v2"),
		l.containerdBin("ctr"), filepath.Join(l.cniBin(), "bridge"), filepath.Join(l.cniBin(), "host-local"),
		filepath.Join(l.cniBin(), "loopback")} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("stack: the real node: %w (build it with `make real-node-bins`)", err)
		}
	}
	fresh := !l.realNodeOn()
	if fresh {
		if err := recordMachine(l); err != nil {
			return err
		}
		if err := writeRealNodeConfig(l); err != nil {
			return err
		}
	}
	cd := containerdProc(l)
	if pid, err := cd.start(l); err != nil {
		return err
	} else {
		log.printf("%s runs (pid %d)", cd.name, pid)
	}
	if err := poll(ctx, 200*time.Millisecond, "containerd", func(ctx context.Context) error {
		if err := cd.exited(l); err != nil {
			return err
		}
		return exec.CommandContext(ctx, l.containerdBin("ctr"), "--address", l.realNode("containerd.sock"), "version").Run()
	}); err != nil {
		return withLog(l, cd, err)
	}
	if kubelet := realKubeletProc(l); kubelet.pid(l) == 0 {
		if err := makeCgroups(l.n.cgroupRoot()); err != nil {
			return err
		}
		start := time.Now()
		if err := importImages(ctx, l, log); err != nil {
			return err
		}
		log.printf("images imported into %s in %.1f s", RealNodeName, time.Since(start).Seconds())
		pid, err := kubelet.start(l)
		if err != nil {
			return err
		}
		log.printf("%s (the real kubelet) runs (pid %d)", kubelet.name, pid)
	}
	return nil
}

// realNodeReady waits until node-4 is Ready.
func realNodeReady(ctx context.Context, l layout, log logger, client kubernetes.Interface) error {
	log.printf("waiting for %s (the real kubelet) Ready", RealNodeName)
	start := time.Now()
	var fatal error
	err := poll(ctx, 500*time.Millisecond, RealNodeName+" Ready", func(ctx context.Context) error {
		for _, p := range realNodeProcs(l) {
			if fatal = p.exited(l); fatal != nil {
				return nil
			}
		}
		n, err := client.CoreV1().Nodes().Get(ctx, RealNodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return errors.New("not Ready")
	})
	if fatal != nil {
		return fatal
	}
	if err == nil {
		log.printf("%s Ready after %.1f s", RealNodeName, time.Since(start).Seconds())
	}
	return err
}

// realNodeProc reports whether a process belongs to the stack's real node: containerd, its
// shims, or a process in the real kubelet's cgroups.
func (l layout) realNodeProc(pid int, argv0 string) bool {
	if argv0 == l.containerdBin("containerd") || argv0 == l.containerdBin("containerd-shim-runc-v2") {
		return true
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	return err == nil && strings.Contains(string(b), ":"+l.n.cgroupRoot()+"/")
}

// makeCgroups makes the kubelet's cgroup root in every hierarchy, as it wants; a new cpuset
// gets its parent's CPUs and memory nodes.
func makeCgroups(root string) error {
	hs, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, h := range hs {
		if _, err := os.Stat(filepath.Join(h, "cgroup.procs")); err != nil {
			continue // not a hierarchy
		}
		d := filepath.Join(h, root)
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("stack: the real node's cgroups: %w", err)
		}
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if b, err := os.ReadFile(filepath.Join(h, f)); err == nil {
					if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil {
						return fmt.Errorf("stack: the real node's cgroups: %w", err)
					}
				}
			}
		}
	}
	return nil
}
