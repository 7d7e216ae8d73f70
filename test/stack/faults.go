package stack

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KillContainer kills a container's processes with SIGKILL, as if it crashed; the kubelet
// restarts it according to the Pod's restartPolicy. On the real node it kills the
// container's main process.
func (s *Stack) KillContainer(ctx context.Context, namespace, pod, container string) error {
	p, err := s.client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if p.Spec.NodeName == RealNodeName {
		return s.l.killRealNodeContainer(ctx, p, container)
	}
	return s.l.podFault(ctx, "kill", p, url.Values{"container": {container}})
}

// PauseContainer stops a container's processes (SIGSTOP): they hang with their sockets open,
// accepting connections and answering nothing, until ResumeContainer.
func (s *Stack) PauseContainer(ctx context.Context, namespace, pod, container string) error {
	return s.podFault(ctx, "pause", namespace, pod, url.Values{"container": {container}})
}

// ResumeContainer undoes PauseContainer.
func (s *Stack) ResumeContainer(ctx context.Context, namespace, pod, container string) error {
	return s.podFault(ctx, "resume", namespace, pod, url.Values{"container": {container}})
}

// CutPod cuts a Pod off the network: nothing reaches it and it reaches nothing, until HealPod.
func (s *Stack) CutPod(ctx context.Context, namespace, pod string) error {
	return s.podFault(ctx, "cut", namespace, pod, nil)
}

// HealPod undoes CutPod.
func (s *Stack) HealPod(ctx context.Context, namespace, pod string) error {
	return s.podFault(ctx, "heal", namespace, pod, nil)
}

func (s *Stack) podFault(ctx context.Context, fault, namespace, pod string, q url.Values) error {
	p, err := s.client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return err
	}
	return s.l.podFault(ctx, fault, p, q)
}

// podFault asks the admin server of the Pod's node for the fault.
func (l layout) podFault(ctx context.Context, fault string, p *corev1.Pod, q url.Values) error {
	if p.Spec.NodeName == "" {
		return fmt.Errorf("stack: %s %s/%s: the Pod is not scheduled", fault, p.Namespace, p.Name)
	}
	if q == nil {
		q = url.Values{}
	}
	q.Set("namespace", p.Namespace)
	q.Set("pod", p.Name)
	return l.adminPost(ctx, p.Spec.NodeName, "/faults/"+fault, q)
}

// StopNode stops a node as if it lost power: its containers are SIGKILLed, its kubelet exits
// and the Node goes NotReady once the node monitor grace period (20 s) has passed.
func (s *Stack) StopNode(ctx context.Context, name string) error {
	p := nodeProc(s.l, name)
	pid := p.pid(s.l)
	if pid == 0 {
		return fmt.Errorf("stack: node %s does not run", name)
	}
	if err := s.l.adminPost(ctx, name, "/faults/stop-node", nil); err != nil {
		return err
	}
	// The kubelet exits on its own; make sure it has before reporting the node stopped.
	return stopPID(ctx, pid, p.bin, 30*time.Second)
}

// StartNode starts a stopped node's kubelet again and waits until its admin server answers;
// the Node turns Ready with its next heartbeat.
func (s *Stack) StartNode(ctx context.Context, name string) error {
	if _, err := nodeIndex(name); err != nil {
		return err
	}
	p := nodeProc(s.l, name)
	if _, err := p.start(s.l); err != nil {
		return err
	}
	addr, _ := s.l.adminAddr(name)
	return poll(ctx, 200*time.Millisecond, "the admin server of "+name, func(ctx context.Context) error {
		if err := p.exited(s.l); err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/healthz", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("healthz: %s", resp.Status)
		}
		return nil
	})
}

// CutNodeFromAPI cuts a node's kubelet off the API server while its containers run on, as
// when a node loses the control plane: the kubelet no longer sees changes to its Pods (a
// Pod deleted meanwhile stays Terminating and keeps running, a new one does not start),
// reports no status and renews no Lease, so the Node goes NotReady after the node monitor
// grace period (20 s). Containers still restart by their restart policy. Undone by
// ReconnectNodeToAPI.
func (s *Stack) CutNodeFromAPI(ctx context.Context, name string) error {
	return s.l.adminPost(ctx, name, "/faults/cut-api", nil)
}

// ReconnectNodeToAPI undoes CutNodeFromAPI: the kubelet reports its Node and Pods again and
// acts on what changed meanwhile (it stops and deletes the Pods deleted while it was cut
// off).
func (s *Stack) ReconnectNodeToAPI(ctx context.Context, name string) error {
	return s.l.adminPost(ctx, name, "/faults/heal-api", nil)
}

// ClaimDir is the directory on the host that holds a bound claim's volume, one of the
// stack's own.
func (s *Stack) ClaimDir(ctx context.Context, namespace, pvc string) (string, error) {
	claim, err := s.client.CoreV1().PersistentVolumeClaims(namespace).Get(ctx, pvc, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if claim.Spec.VolumeName == "" {
		return "", fmt.Errorf("stack: PVC %s/%s is not bound", namespace, pvc)
	}
	pv, err := s.client.CoreV1().PersistentVolumes().Get(ctx, claim.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if pv.Spec.HostPath == nil {
		return "", fmt.Errorf("stack: PV %s is not a hostPath volume", pv.Name)
	}
	dir := filepath.Clean(pv.Spec.HostPath.Path)
	if !strings.HasPrefix(dir, s.l.volumes()+"/") {
		return "", fmt.Errorf("stack: PV %s is at %s, not under %s", pv.Name, dir, s.l.volumes())
	}
	return dir, nil
}

// WipePVC deletes everything in the volume bound to a PVC, as a lost disk would; the Pods
// using it see an empty directory.
func (s *Stack) WipePVC(ctx context.Context, namespace, pvc string) error {
	dir, err := s.ClaimDir(ctx, namespace, pvc)
	if err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// ContainerLog is a container's output so far, as the local kubelet keeps it; on the real
// node, what its kubelet serves through the API server.
func (s *Stack) ContainerLog(ctx context.Context, namespace, pod, container string) (string, error) {
	p, err := s.client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if p.Spec.NodeName == RealNodeName {
		body, err := s.client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
		return string(body), err
	}
	q := url.Values{"namespace": {namespace}, "pod": {pod}, "container": {container}}
	body, err := s.l.admin(ctx, http.MethodGet, p.Spec.NodeName, "/logs", q, 64<<20)
	return string(body), err
}

func (l layout) adminPost(ctx context.Context, node, path string, q url.Values) error {
	_, err := l.admin(ctx, http.MethodPost, node, path, q, 4096)
	return err
}

// admin calls a node's admin endpoint and returns up to limit bytes of its answer.
func (l layout) admin(ctx context.Context, method, node, path string, q url.Values, limit int64) ([]byte, error) {
	addr, err := l.adminAddr(node)
	if err != nil {
		return nil, err
	}
	u := "http://" + addr + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("stack: %s on %s: %w", path, node, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("stack: %s on %s: %s: %s", path, node, resp.Status, strings.TrimSpace(string(body)))
	}
	return body, err
}
