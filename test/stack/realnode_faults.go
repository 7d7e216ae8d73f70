package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// killRealNodeContainer kills a running container of a Pod on the real node as if it
// crashed: containerd's CRI names the container's main process, which gets SIGKILL from the
// host. The kubelet sees it exit (137) and acts on the Pod's restartPolicy.
func (l layout) killRealNodeContainer(ctx context.Context, p *corev1.Pod, container string) error {
	id := ""
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == container && cs.State.Running != nil {
			id = strings.TrimPrefix(cs.ContainerID, "containerd://")
		}
	}
	if id == "" {
		return fmt.Errorf("stack: kill %s/%s %s: the container does not run", p.Namespace, p.Name, container)
	}
	conn, err := grpc.NewClient("unix://"+l.realNode("containerd.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := runtimeapi.NewRuntimeServiceClient(conn).ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		return fmt.Errorf("stack: kill %s/%s %s: %w", p.Namespace, p.Name, container, err)
	}
	var info struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil || info.PID <= 0 {
		return fmt.Errorf("stack: kill %s/%s %s: no process in containerd's status (%v)", p.Namespace, p.Name, container, err)
	}
	if err := syscall.Kill(info.PID, syscall.SIGKILL); err != nil {
		return fmt.Errorf("stack: kill %s/%s %s (pid %d): %w", p.Namespace, p.Name, container, info.PID, err)
	}
	return nil
}
