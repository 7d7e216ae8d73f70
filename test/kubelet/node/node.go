package node

import (
	"context"
	"log"
	"net"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

const (
	leaseNamespace = "kube-node-lease"
	leaseDuration  = 40 // seconds, as the kubelet
	leaseInterval  = 5 * time.Second
	statusInterval = 15 * time.Second
)

func (k *Kubelet) nodeObject() *v1.Node {
	name := k.cfg.NodeName
	return &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
			"kubernetes.io/hostname":  name,
			"kubernetes.io/os":        runtime.GOOS,
			"kubernetes.io/arch":      runtime.GOARCH,
			"beta.kubernetes.io/os":   runtime.GOOS,
			"beta.kubernetes.io/arch": runtime.GOARCH,
		}},
		Spec: v1.NodeSpec{PodCIDR: k.cfg.PodCIDR.String(), PodCIDRs: []string{k.cfg.PodCIDR.String()}},
	}
}

// registerNode creates the Node if needed and reports it Ready.
func (k *Kubelet) registerNode(ctx context.Context) error {
	nodes := k.client.CoreV1().Nodes()
	node, err := nodes.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		node, err = nodes.Create(ctx, k.nodeObject(), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			node, err = nodes.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		}
	}
	if err != nil {
		return err
	}
	k.nodeUID = node.UID
	return k.updateNodeStatus(ctx)
}

// heartbeat renews the node's Lease and refreshes its status until ctx is done or the node
// halts: the node lifecycle controller then marks it NotReady.
func (k *Kubelet) heartbeat(ctx context.Context) {
	leaseTick := time.NewTicker(leaseInterval)
	statusTick := time.NewTicker(statusInterval)
	defer leaseTick.Stop()
	defer statusTick.Stop()
	var lease *coordinationv1.Lease
	for {
		if k.isHalted() {
			return
		}
		var err error
		if k.link.IsCut() {
			lease = nil // read it again once back: others may have changed it
		} else if lease, err = k.renewLease(ctx, lease); err != nil {
			log.Printf("lease: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-leaseTick.C:
		case <-statusTick.C:
			k.heartbeatStatus(ctx)
		case <-k.beat: // back from a cut: the status too, to undo the node controller's NotReady
			k.heartbeatStatus(ctx)
		}
	}
}

func (k *Kubelet) heartbeatStatus(ctx context.Context) {
	if k.isHalted() || k.link.IsCut() {
		return
	}
	if err := k.updateNodeStatus(ctx); err != nil {
		log.Printf("node status: %v", err)
	}
}

func (k *Kubelet) renewLease(ctx context.Context, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	leases := k.client.CoordinationV1().Leases(leaseNamespace)
	now := metav1.NewMicroTime(time.Now())
	if lease == nil {
		var err error
		lease, err = leases.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			lease = &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: k.cfg.NodeName, Namespace: leaseNamespace,
					OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node",
						Name: k.cfg.NodeName, UID: k.nodeUID}}},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &k.cfg.NodeName,
					LeaseDurationSeconds: ptrTo[int32](leaseDuration), RenewTime: &now},
			}
			return leases.Create(ctx, lease, metav1.CreateOptions{})
		}
		if err != nil {
			return nil, err
		}
	}
	lease = lease.DeepCopy()
	lease.Spec.HolderIdentity = &k.cfg.NodeName
	lease.Spec.LeaseDurationSeconds = ptrTo[int32](leaseDuration)
	lease.Spec.RenewTime = &now
	updated, err := leases.Update(ctx, lease, metav1.UpdateOptions{})
	if err != nil {
		return nil, err // get it again next time
	}
	return updated, nil
}

func (k *Kubelet) updateNodeStatus(ctx context.Context) error {
	nodes := k.client.CoreV1().Nodes()
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := nodes.Get(ctx, k.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		k.fillNodeStatus(&node.Status)
		_, err = nodes.UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
}

func (k *Kubelet) fillNodeStatus(st *v1.NodeStatus) {
	now := metav1.NewTime(time.Now())
	st.Capacity = k.cfg.Capacity.DeepCopy()
	st.Allocatable = k.cfg.Capacity.DeepCopy()
	st.Phase = v1.NodeRunning
	st.Addresses = []v1.NodeAddress{
		{Type: v1.NodeInternalIP, Address: k.cfg.NodeIP},
		{Type: v1.NodeHostName, Address: k.cfg.NodeName},
	}
	st.DaemonEndpoints = v1.NodeDaemonEndpoints{}
	if _, port, err := net.SplitHostPort(k.cfg.APIAddr); err == nil {
		n, _ := strconv.Atoi(port)
		st.DaemonEndpoints.KubeletEndpoint.Port = int32(n)
	}
	st.NodeInfo = v1.NodeSystemInfo{
		KubeletVersion:          k.cfg.KubeletVersion,
		OperatingSystem:         runtime.GOOS,
		Architecture:            runtime.GOARCH,
		OSImage:                 "localkubelet",
		KernelVersion:           kernelVersion(),
		ContainerRuntimeVersion: "localkubelet://" + k.cfg.KubeletVersion,
		MachineID:               k.cfg.NodeName,
		SystemUUID:              k.cfg.NodeName,
		BootID:                  string(k.nodeUID),
	}
	set := func(t v1.NodeConditionType, status v1.ConditionStatus, reason, msg string) {
		for i := range st.Conditions {
			c := &st.Conditions[i]
			if c.Type == t {
				if c.Status != status {
					c.LastTransitionTime = now
				}
				c.Status, c.Reason, c.Message, c.LastHeartbeatTime = status, reason, msg, now
				return
			}
		}
		st.Conditions = append(st.Conditions, v1.NodeCondition{Type: t, Status: status, Reason: reason,
			Message: msg, LastHeartbeatTime: now, LastTransitionTime: now})
	}
	set(v1.NodeMemoryPressure, v1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available")
	set(v1.NodeDiskPressure, v1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure")
	set(v1.NodePIDPressure, v1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available")
	set(v1.NodeReady, v1.ConditionTrue, "KubeletReady", "kubelet is posting ready status")
}

func kernelVersion() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return ""
	}
	return strings.TrimRight(string(u.Release[:]), "\x00")
}

func ptrTo[T any](v T) *T { return &v }
