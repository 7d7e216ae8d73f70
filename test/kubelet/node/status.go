package node

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// phase computes the Pod phase from its containers the way the kubelet does (getPhase).
// Called with w.mu held.
func (w *podWorker) phaseLocked() v1.PodPhase {
	if w.terminal != "" {
		return w.terminal
	}
	if !w.initialized && len(w.inits) > 0 {
		return v1.PodPending
	}
	var waiting, running, succeeded, failed int
	for _, c := range w.ctrs {
		st := c.status
		switch {
		case st.State.Running != nil:
			running++
		case st.State.Terminated != nil:
			if st.State.Terminated.ExitCode == 0 {
				succeeded++
			} else {
				failed++
			}
		case st.LastTerminationState.Terminated != nil:
			// Waiting to restart counts as stopped, as in the kubelet.
			if st.LastTerminationState.Terminated.ExitCode == 0 {
				succeeded++
			} else {
				failed++
			}
		default:
			waiting++
		}
	}
	policy := w.pod.Spec.RestartPolicy
	switch {
	case waiting > 0:
		return v1.PodPending
	case running > 0:
		return v1.PodRunning
	case succeeded+failed > 0:
		if policy == v1.RestartPolicyAlways {
			return v1.PodRunning
		}
		if failed == 0 {
			return v1.PodSucceeded
		}
		if policy == v1.RestartPolicyOnFailure {
			return v1.PodRunning
		}
		return v1.PodFailed
	}
	return v1.PodPending
}

func (w *podWorker) phase() v1.PodPhase {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.phaseLocked()
}

// stoppedPhase is the phase of a Pod whose containers were stopped for its deletion:
// Succeeded if every container ended with 0, Failed otherwise (the kubelet does the same
// before deleting a Pod). Called with w.mu held.
func (w *podWorker) stoppedPhase() v1.PodPhase {
	for _, c := range w.ctrs {
		t := c.status.State.Terminated
		if t == nil || t.ExitCode != 0 {
			return v1.PodFailed
		}
	}
	return v1.PodSucceeded
}

// buildStatus merges the worker's view into the Pod's current status.
func (w *podWorker) buildStatus(old v1.PodStatus) v1.PodStatus {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := *old.DeepCopy()
	st.Phase = w.phaseLocked()
	st.ObservedGeneration = w.pod.Generation
	st.HostIP = w.k.cfg.NodeIP
	st.HostIPs = []v1.HostIP{{IP: w.k.cfg.NodeIP}}
	if w.ip != "" {
		st.PodIP = w.ip
		st.PodIPs = []v1.PodIP{{IP: w.ip}}
	}
	if st.StartTime == nil {
		st.StartTime = w.startTime
	}
	st.InitContainerStatuses = nil
	for _, c := range w.inits {
		cs := c.status
		cs.Ready = c.ready || (cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0 && !c.isSidecar())
		cs.Started = ptrTo(c.started)
		st.InitContainerStatuses = append(st.InitContainerStatuses, cs)
	}
	st.ContainerStatuses = nil
	var unready []string
	for _, c := range w.ctrs {
		cs := c.status
		cs.Ready = c.ready && cs.State.Running != nil
		cs.Started = ptrTo(c.started && cs.State.Running != nil)
		if !cs.Ready {
			unready = append(unready, c.spec().Name)
		}
		st.ContainerStatuses = append(st.ContainerStatuses, cs)
	}
	for _, c := range w.inits {
		if c.isSidecar() && !(c.ready && c.status.State.Running != nil) {
			unready = append(unready, c.spec().Name)
		}
	}
	w.setConditions(&st, old.Conditions, unready)
	return st
}

// setConditions sets the conditions the kubelet owns and keeps the others. Called with
// w.mu held.
func (w *podWorker) setConditions(st *v1.PodStatus, old []v1.PodCondition, unready []string) {
	t := now()
	terminal := st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed
	cond := func(typ v1.PodConditionType, ok bool, reason, msg string) v1.PodCondition {
		c := v1.PodCondition{Type: typ, Status: v1.ConditionFalse, LastTransitionTime: *t,
			ObservedGeneration: w.pod.Generation}
		if ok {
			c.Status = v1.ConditionTrue
		} else {
			c.Reason, c.Message = reason, msg
		}
		for _, o := range old {
			if o.Type == typ && o.Status == c.Status {
				c.LastTransitionTime = o.LastTransitionTime
			}
		}
		return c
	}
	var notInit []string
	initDone := w.initialized || len(w.inits) == 0
	if !initDone {
		for _, c := range w.inits {
			if tt := c.status.State.Terminated; !c.isSidecar() && (tt == nil || tt.ExitCode != 0) {
				notInit = append(notInit, c.spec().Name)
			}
		}
	}
	notReadyMsg := fmt.Sprintf("containers with unready status: [%s]", strings.Join(unready, " "))
	notReadyReason := "ContainersNotReady"
	if terminal {
		notReadyReason = "PodCompleted"
		notReadyMsg = ""
	}
	ready := len(unready) == 0 && !terminal
	mine := []v1.PodCondition{
		cond(v1.PodReadyToStartContainers, w.netReady && w.terminal == "", "", ""),
		cond(v1.PodInitialized, initDone, "ContainersNotInitialized",
			fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(notInit, " "))),
		cond(v1.ContainersReady, ready, notReadyReason, notReadyMsg),
		cond(v1.PodReady, ready, notReadyReason, notReadyMsg),
	}
	if initDone && terminal {
		mine[1].Reason, mine[1].Message = "PodCompleted", ""
	}
	conds := mine
	scheduled := false
	for _, o := range old {
		switch o.Type {
		case v1.PodReadyToStartContainers, v1.PodInitialized, v1.ContainersReady, v1.PodReady:
			continue
		case v1.PodScheduled:
			scheduled = true
		}
		conds = append(conds, o)
	}
	if !scheduled {
		conds = append(conds, cond(v1.PodScheduled, true, "", ""))
	}
	sort.SliceStable(conds, func(i, j int) bool { return condOrder(conds[i].Type) < condOrder(conds[j].Type) })
	st.Conditions = conds
}

func condOrder(t v1.PodConditionType) int {
	for i, x := range []v1.PodConditionType{v1.PodReadyToStartContainers, v1.PodInitialized,
		v1.PodReady, v1.ContainersReady, v1.PodScheduled} {
		if t == x {
			return i
		}
	}
	return 100
}

// statusLoop writes the status when something changed, and every few seconds in case
// someone else (the node lifecycle controller) changed it.
func (w *podWorker) statusLoop() {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-w.done:
			return
		case <-w.wake:
			// Let a burst of changes settle into one write.
			time.Sleep(50 * time.Millisecond)
		case <-tick.C:
		}
		w.syncStatus()
	}
}

// syncStatus writes the Pod's status if it differs from the API's.
func (w *podWorker) syncStatus() {
	w.statusMu.Lock()
	defer w.statusMu.Unlock()
	w.mu.Lock()
	gone, pod := w.isGone, w.pod
	w.mu.Unlock()
	if gone || w.k.isHalted() || w.k.link.IsCut() {
		return // a cut-off node writes once it is back (statusLoop's tick)
	}
	if w.k.pods != nil {
		if cur, err := w.k.pods.Pods(pod.Namespace).Get(pod.Name); err == nil && cur.UID == w.uid {
			pod = cur
		}
	}
	pods := w.k.client.CoreV1().Pods(pod.Namespace)
	for attempt := 0; attempt < 3; attempt++ {
		if isTerminal(pod.Status.Phase) && !isTerminal(w.phase()) {
			return // never move a Pod back from a terminal phase
		}
		st := w.buildStatus(pod.Status)
		if sameJSON(st, pod.Status) {
			return
		}
		updated := pod.DeepCopy()
		updated.Status = st
		_, err := pods.UpdateStatus(context.Background(), updated, metav1.UpdateOptions{})
		if err == nil || apierrors.IsNotFound(err) {
			return
		}
		if !apierrors.IsConflict(err) {
			log.Printf("pod %s/%s: status: %v", pod.Namespace, pod.Name, err)
			return
		}
		fresh, err := pods.Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err != nil || fresh.UID != w.uid {
			return
		}
		pod = fresh
	}
}

func isTerminal(p v1.PodPhase) bool { return p == v1.PodSucceeded || p == v1.PodFailed }

// sameJSON compares statuses as the API stores them (times to the second).
func sameJSON(a, b v1.PodStatus) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && string(x) == string(y)
}
