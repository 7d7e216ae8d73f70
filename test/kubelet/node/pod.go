package node

import (
	"context"
	"log"
	"os"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/etcdplan/etcdplan/test/kubelet/netsetup"
)

// podWorker runs one Pod (one UID) from admission to deletion:
//
//	setup (network, volumes) -> init containers one by one -> containers -> [terminal]
//	-> on deletion: stop containers (grace period) -> tear down -> delete the Pod object
type podWorker struct {
	k      *Kubelet
	uid    types.UID
	dir    string
	ctx    context.Context // cancelled when the Pod must stop
	cancel context.CancelFunc
	wake   chan struct{}  // asks for a status update
	done   chan struct{}  // closed when the worker is finished
	loops  sync.WaitGroup // container loops

	statusMu sync.Mutex // serializes status writes

	mu          sync.Mutex
	pod         *v1.Pod // the latest version seen
	isGone      bool    // the Pod is no longer in the API
	stopping    bool
	stopGrace   time.Duration
	net         *netsetup.Pod
	ip          string
	netReady    bool
	startTime   *metav1.Time
	inits       []*container
	ctrs        []*container
	initialized bool
	terminal    v1.PodPhase // Succeeded or Failed once nothing runs any more
	volumes     map[string]string
	tokens      map[string]*token
	volumeEvent string // last volume error reported, to report each once
}

func newPodWorker(k *Kubelet, pod *v1.Pod) *podWorker {
	ctx, cancel := context.WithCancel(context.Background())
	w := &podWorker{k: k, uid: pod.UID, dir: k.podDir(pod.UID), ctx: ctx, cancel: cancel,
		wake: make(chan struct{}, 1), done: make(chan struct{}), pod: pod,
		tokens: map[string]*token{}}
	prev := map[string]v1.ContainerStatus{}
	for _, s := range append(append([]v1.ContainerStatus{}, pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...) {
		prev[s.Name] = s
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		w.inits = append(w.inits, newContainer(w, c, true, prev[c.Name]))
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		w.ctrs = append(w.ctrs, newContainer(w, c, false, prev[c.Name]))
	}
	switch pod.Status.Phase {
	case v1.PodSucceeded, v1.PodFailed:
		w.terminal = pod.Status.Phase
	}
	w.startTime = pod.Status.StartTime
	w.initialized = podInitialized(pod)
	return w
}

// podInitialized tells whether the API already records the init containers as done (this
// node ran them before a kubelet restart): they are not run again.
func podInitialized(pod *v1.Pod) bool {
	if len(pod.Spec.InitContainers) == 0 {
		return false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == v1.PodInitialized && c.Status == v1.ConditionTrue {
			return true
		}
	}
	return false
}

func (w *podWorker) meta() podMeta {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := podMeta{Namespace: w.pod.Namespace, Name: w.pod.Name, UID: w.uid}
	if w.net != nil {
		m.Netns, m.HostVeth = w.net.Netns, w.net.HostVeth
	}
	return m
}

func (w *podWorker) podCopy() *v1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pod
}

func (w *podWorker) notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// update takes a new version of the Pod from the informer.
func (w *podWorker) update(pod *v1.Pod) {
	w.mu.Lock()
	w.pod = pod
	changed := w.imageChanges(pod)
	w.mu.Unlock()
	for _, c := range changed {
		c.restartForImage()
	}
	if pod.DeletionTimestamp != nil {
		grace := 30 * time.Second
		if pod.DeletionGracePeriodSeconds != nil {
			grace = time.Duration(*pod.DeletionGracePeriodSeconds) * time.Second
		} else if pod.Spec.TerminationGracePeriodSeconds != nil {
			grace = time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
		}
		w.requestStop(grace)
	}
	w.notify()
}

// imageChanges takes the new spec of containers whose image was updated in place and returns
// them: the kubelet restarts such containers. Called with w.mu held.
func (w *podWorker) imageChanges(pod *v1.Pod) []*container {
	var changed []*container
	for _, list := range []struct {
		specs []v1.Container
		ctrs  []*container
	}{{pod.Spec.InitContainers, w.inits}, {pod.Spec.Containers, w.ctrs}} {
		for i := range list.specs {
			for _, c := range list.ctrs {
				if c.spec().Name == list.specs[i].Name && c.spec().Image != list.specs[i].Image {
					c.specp.Store(&list.specs[i])
					c.status.Image = list.specs[i].Image
					changed = append(changed, c)
				}
			}
		}
	}
	return changed
}

// gone is called when the Pod disappeared from the API without this node deleting it: stop
// quickly, clean up, write nothing.
func (w *podWorker) gone() {
	w.mu.Lock()
	w.isGone = true
	w.mu.Unlock()
	w.requestStop(2 * time.Second)
}

// requestStop stops the Pod's containers within grace (the shortest grace asked wins).
func (w *podWorker) requestStop(grace time.Duration) {
	w.mu.Lock()
	if !w.stopping || grace < w.stopGrace {
		w.stopGrace = grace
	}
	w.stopping = true
	w.mu.Unlock()
	w.cancel()
}

func (w *podWorker) grace() time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stopGrace
}

func (w *podWorker) run() {
	defer close(w.done)
	go w.statusLoop()
	if w.terminalPhase() == "" {
		w.mu.Lock()
		if w.startTime == nil {
			w.startTime = now()
		}
		w.mu.Unlock()
		if w.setup() && w.runInits() {
			w.runContainers()
		}
	}
	<-w.ctx.Done()
	w.finish()
}

func (w *podWorker) terminalPhase() v1.PodPhase {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.terminal
}

// setup builds the network and the volumes, retrying until it works or the Pod stops.
func (w *podWorker) setup() bool {
	delay := 500 * time.Millisecond
	for {
		reason := "FailedCreatePodSandBox"
		err := w.setupNetwork()
		if err == nil {
			reason = "FailedMount"
			err = w.prepareVolumes()
		}
		if err == nil {
			go w.refreshVolumes()
			return true
		}
		w.reportSetupError(reason, err)
		select {
		case <-w.ctx.Done():
			return false
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// reportSetupError logs and records each distinct setup error once.
func (w *podWorker) reportSetupError(reason string, err error) {
	w.mu.Lock()
	repeat := w.volumeEvent == err.Error()
	w.volumeEvent = err.Error()
	pod := w.pod
	w.mu.Unlock()
	if !repeat {
		log.Printf("pod %s/%s: setup: %v", pod.Namespace, pod.Name, err)
		w.k.event(pod, true, reason, "%v", err)
	}
}

// runInits runs the init containers in order, each to completion (sidecars: until started).
// It returns false if the Pod failed or must stop.
func (w *podWorker) runInits() bool {
	w.mu.Lock()
	skip := w.initialized
	w.mu.Unlock()
	policy := initRestartPolicy(w.podCopy())
	for _, c := range w.inits {
		if c.isSidecar() {
			w.startLoop(c, v1.RestartPolicyAlways)
			if !c.waitStarted(w.ctx) {
				return false
			}
			continue
		}
		if skip {
			continue
		}
		w.loops.Add(1)
		code := c.loop(w.ctx, policy)
		w.loops.Done()
		if w.ctx.Err() != nil {
			return false
		}
		if code != 0 {
			w.becomeTerminal(v1.PodFailed)
			return false
		}
	}
	w.mu.Lock()
	w.initialized = true
	w.mu.Unlock()
	w.notify()
	return true
}

// runContainers starts all containers and waits until none will run again.
func (w *podWorker) runContainers() {
	pod := w.podCopy()
	var main sync.WaitGroup
	for _, c := range w.ctrs {
		if c.isFinished() {
			continue
		}
		main.Add(1)
		policy := pod.Spec.RestartPolicy
		if c.spec().RestartPolicy != nil {
			policy = v1.RestartPolicy(*c.spec().RestartPolicy)
		}
		w.loops.Add(1)
		go func() {
			defer w.loops.Done()
			defer main.Done()
			c.loop(w.ctx, policy)
		}()
	}
	main.Wait()
	if w.ctx.Err() != nil {
		return
	}
	// All containers are done for good: stop the sidecars and settle the phase.
	for _, c := range w.inits {
		if c.isSidecar() {
			c.stopRun(w.podGrace())
		}
	}
	w.becomeTerminal(w.phase())
}

func (w *podWorker) startLoop(c *container, policy v1.RestartPolicy) {
	w.loops.Add(1)
	go func() {
		defer w.loops.Done()
		c.loop(w.ctx, policy)
	}()
}

// podGrace is the Pod's termination grace period.
func (w *podWorker) podGrace() time.Duration {
	pod := w.podCopy()
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		return time.Duration(*pod.Spec.TerminationGracePeriodSeconds) * time.Second
	}
	return 30 * time.Second
}

// becomeTerminal records that nothing will run any more and frees the network namespace;
// the Pod keeps its IP in its status.
func (w *podWorker) becomeTerminal(phase v1.PodPhase) {
	w.mu.Lock()
	w.terminal = phase
	net := w.net
	w.mu.Unlock()
	if net != nil {
		_ = netsetup.TeardownPod(net.Netns, net.HostVeth)
	}
	w.syncStatus()
}

// finish runs once the Pod must stop: wait for the containers to stop, report the final
// status, tear everything down and delete the Pod object (or just clean up if it is gone).
func (w *podWorker) finish() {
	w.loops.Wait()
	if w.k.isHalted() {
		return
	}
	w.mu.Lock()
	gone := w.isGone
	if w.terminal == "" {
		w.terminal = w.stoppedPhase()
	}
	pod := w.pod
	w.mu.Unlock()
	if !gone {
		// A node cut off from the API server (its Pod stopped before the cut) reports the
		// final status and deletes the Pod once it is back.
		_, _ = w.k.link.current(context.Background())
		w.syncStatus()
	}
	w.teardown()
	if gone {
		return
	}
	err := w.k.client.CoreV1().Pods(pod.Namespace).Delete(context.Background(), pod.Name,
		metav1.DeleteOptions{GracePeriodSeconds: ptrTo[int64](0),
			Preconditions: &metav1.Preconditions{UID: &w.uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		log.Printf("pod %s/%s: delete: %v", pod.Namespace, pod.Name, err)
	}
}

// teardown removes the network namespace, mounts, Pod directory and address.
func (w *podWorker) teardown() {
	w.mu.Lock()
	net := w.net
	w.mu.Unlock()
	if net != nil {
		_ = netsetup.TeardownPod(net.Netns, net.HostVeth)
	}
	stopLeftovers(w.dir)
	if err := os.RemoveAll(w.dir); err != nil {
		log.Printf("pod dir: %v", err)
	}
	_ = w.k.ipam.Release(string(w.uid))
}

// killAll SIGKILLs every container process of the Pod at once (node halt).
func (w *podWorker) killAll() {
	for _, c := range append(append([]*container{}, w.inits...), w.ctrs...) {
		c.kill()
	}
	w.cancel()
}

func now() *metav1.Time {
	t := metav1.NewTime(time.Now().Truncate(time.Second))
	return &t
}
