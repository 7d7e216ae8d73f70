package stack

import (
	"fmt"
	"strconv"
	"strings"
)

// Controllers run by kube-controller-manager: what a Deployment, Job, StatefulSet, PVC, PDB and
// a failing node need, as in a real cluster.
var controllers = []string{
	"clusterrole-aggregation-controller",
	"cronjob-controller",
	"deployment-controller",
	"disruption-controller",
	"endpoints-controller",
	"endpointslice-controller",
	"endpointslice-mirroring-controller",
	"ephemeral-volume-controller",
	"garbage-collector-controller",
	"job-controller",
	"namespace-controller",
	"node-lifecycle-controller",
	"persistentvolume-binder-controller",
	"persistentvolume-protection-controller",
	"persistentvolumeclaim-protection-controller",
	"pod-garbage-collector-controller",
	"replicaset-controller",
	"root-ca-certificate-publisher-controller",
	"serviceaccount-controller",
	"serviceaccount-token-controller",
	"statefulset-controller",
	"taint-eviction-controller",
	"ttl-after-finished-controller",
}

func etcdProc(l layout) process {
	client := l.etcdURL()
	peer := fmt.Sprintf("http://127.0.0.1:%d", l.n.port(etcdPeerPort))
	return process{
		name: "etcd",
		bin:  l.etcdBin(EtcdVersion, "etcd"),
		args: []string{
			"--name=stack",
			"--data-dir=" + l.state("etcd"),
			"--listen-client-urls=" + client,
			"--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peer,
			"--initial-advertise-peer-urls=" + peer,
			"--initial-cluster=stack=" + peer,
			"--initial-cluster-state=new",
			// A throwaway cluster on a shared CI disk: trade durability for speed.
			"--unsafe-no-fsync",
			"--quota-backend-bytes=" + strconv.Itoa(4<<30),
			"--log-level=warn",
		},
	}
}

func apiserverProc(l layout) process {
	return process{
		name: "kube-apiserver",
		bin:  l.kubeBin("kube-apiserver"),
		args: []string{
			"--etcd-servers=" + l.etcdURL(),
			"--bind-address=0.0.0.0",
			"--secure-port=" + strconv.Itoa(l.n.APIServerPort()),
			"--advertise-address=" + l.n.BridgeIP(),
			"--tls-cert-file=" + l.cert("apiserver.crt"),
			"--tls-private-key-file=" + l.cert("apiserver.key"),
			"--client-ca-file=" + l.cert("ca.crt"),
			// kubectl logs, exec and port-forward reach the nodes' kubelet API.
			"--kubelet-client-certificate=" + l.cert("apiserver-kubelet-client.crt"),
			"--kubelet-client-key=" + l.cert("apiserver-kubelet-client.key"),
			"--kubelet-certificate-authority=" + l.cert("ca.crt"),
			"--kubelet-preferred-address-types=InternalIP",
			"--service-account-issuer=" + defaultSAIssuer,
			"--service-account-key-file=" + l.cert("sa.pub"),
			"--service-account-signing-key-file=" + l.cert("sa.key"),
			"--service-cluster-ip-range=" + serviceCIDR,
			"--authorization-mode=Node,RBAC",
			// The default plugins (PodSecurity among them) plus NodeRestriction, as kubeadm does.
			"--enable-admission-plugins=NodeRestriction",
			"--allow-privileged=true",
			"--profiling=false",
			"--v=1",
		},
	}
}

func controllerManagerProc(l layout) process {
	return controlPlaneClient(l, "kube-controller-manager",
		"--controllers="+strings.Join(controllers, ","),
		"--use-service-account-credentials=true",
		"--root-ca-file="+l.cert("ca.crt"),
		"--service-account-private-key-file="+l.cert("sa.key"),
		"--allocate-node-cidrs=false",
		"--cluster-name=etcdplan-stack",
		// Notice a stopped node within seconds, not the default 50 s.
		"--node-monitor-period=2s",
		"--node-monitor-grace-period=20s",
		"--secure-port="+strconv.Itoa(l.n.port(controllerPort)),
	)
}

func schedulerProc(l layout) process {
	return controlPlaneClient(l, "kube-scheduler", "--secure-port="+strconv.Itoa(l.n.port(schedulerPort)))
}

// controlPlaneClient is a control-plane component that talks to the API server with its own
// kubeconfig, serves on localhost only and runs alone (no leader election).
func controlPlaneClient(l layout, name string, extra ...string) process {
	kc := l.kubeconfigFor(name)
	args := []string{
		"--kubeconfig=" + kc,
		"--authentication-kubeconfig=" + kc,
		"--authorization-kubeconfig=" + kc,
		"--bind-address=127.0.0.1",
		"--leader-elect=false",
	}
	args = append(args, extra...)
	return process{name: name, bin: l.kubeBin(name), args: append(args, "--profiling=false", "--v=1")}
}

func clusterProc(l layout) process {
	return process{
		name: "cluster",
		bin:  l.localkubelet(),
		args: []string{
			"cluster",
			"--kubeconfig=" + l.kubeconfigFor("cluster"),
			"--state-dir=" + l.state(),
			"--dns-listen=" + l.n.BridgeIP() + ":53",
			"--bridge=" + l.n.Bridge(),
			"--bridge-addr=" + l.n.bridgeAddr(),
		},
	}
}

func nodeProc(l layout, name string) process {
	i, err := nodeIndex(name)
	if err != nil {
		panic(err)
	}
	admin, _ := l.adminAddr(name)
	return process{
		name: name,
		bin:  l.localkubelet(),
		args: []string{
			"node",
			"--kubeconfig=" + l.kubeconfigFor(name),
			"--name=" + name,
			"--state-dir=" + l.state("nodes", name),
			"--pod-cidr=" + l.n.podCIDR(i),
			"--bridge=" + l.n.Bridge(),
			"--bridge-addr=" + l.n.bridgeAddr(),
			"--netns-prefix=" + l.n.NetnsPrefix(),
			"--api-port=" + strconv.Itoa(l.n.APIServerPort()),
			"--admin=" + admin,
			"--kubelet-api=" + l.kubeletAPIAddr(name),
			"--tls-cert-file=" + l.cert("kubelet.crt"),
			"--tls-private-key-file=" + l.cert("kubelet.key"),
			"--client-ca-file=" + l.cert("ca.crt"),
			"--images=" + l.state("images.json"),
		},
	}
}

// controlPlane lists the control plane in start order.
func controlPlane(l layout) []process {
	return []process{etcdProc(l), apiserverProc(l), controllerManagerProc(l), schedulerProc(l)}
}

// allProcs lists every process of the stack in start order.
func allProcs(l layout) []process {
	ps := append(controlPlane(l), clusterProc(l))
	for _, n := range Nodes() {
		ps = append(ps, nodeProc(l, n))
	}
	return append(ps, realNodeProcs(l)...)
}
