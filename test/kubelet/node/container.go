package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdplan/etcdplan/test/kubelet/shim"
)

// container runs one container of a Pod: start, wait, restart with back-off per policy, stop.
// Its fields are guarded by the Pod worker's mutex.
type container struct {
	w     *podWorker
	specp atomic.Pointer[v1.Container] // replaced when the image is updated in place
	init  bool

	status   v1.ContainerStatus
	everRan  bool // ran before (here or before a kubelet restart): the next start is a restart
	finished bool // terminated and will not run again
	restart  bool // run again whatever the policy says (image updated)
	started  bool // startup probe passed, or none
	ready    bool // readiness probe passed, or none
	proc     *process
}

// process is one run of a container.
type process struct {
	cmd       *exec.Cmd
	pid       int
	spec      shim.Spec // for exec probes and hooks
	termLog   string    // host file mounted at the container's terminationMessagePath
	logPath   string    // the run's log (logs.go)
	startedAt time.Time
	exited    chan struct{} // closed once reaped
	startedCh chan struct{} // closed once started (startup probe)
}

// errConfig marks errors that leave the container waiting with a reason.
type errConfig struct {
	reason string
	err    error
}

func (e *errConfig) Error() string { return e.err.Error() }

func configErr(reason string, err error) error { return &errConfig{reason: reason, err: err} }

func newContainer(w *podWorker, spec *v1.Container, init bool, prev v1.ContainerStatus) *container {
	c := &container{w: w, init: init}
	c.specp.Store(spec)
	c.status = v1.ContainerStatus{Name: spec.Name, Image: spec.Image, RestartCount: prev.RestartCount,
		State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
	if init && !c.isSidecar() {
		c.status.State.Waiting.Reason = "PodInitializing"
	}
	if !init && len(w.pod.Spec.InitContainers) > 0 && !podInitialized(w.pod) {
		c.status.State.Waiting.Reason = "PodInitializing"
	}
	switch {
	case prev.State.Running != nil:
		// Killed when the kubelet restarted: the next start is a restart.
		c.everRan = true
		c.status.LastTerminationState = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode: 137, Reason: "ContainerStatusUnknown", StartedAt: prev.State.Running.StartedAt,
			Message: "The container was stopped when the kubelet restarted"}}
	case prev.State.Terminated != nil:
		c.everRan = true
		c.status.State = prev.State
		c.status.LastTerminationState = prev.LastTerminationState
		c.status.ContainerID, c.status.ImageID = prev.ContainerID, prev.ImageID
		policy := w.pod.Spec.RestartPolicy
		if init && !c.isSidecar() {
			policy = initRestartPolicy(w.pod)
		}
		c.finished = !shouldRestart(policy, prev.State.Terminated.ExitCode)
	case prev.LastTerminationState.Terminated != nil:
		c.everRan = true
		c.status.LastTerminationState = prev.LastTerminationState
	}
	return c
}

func (c *container) spec() *v1.Container { return c.specp.Load() }

func (c *container) isSidecar() bool {
	return c.init && c.spec().RestartPolicy != nil && *c.spec().RestartPolicy == v1.ContainerRestartPolicyAlways
}

func (c *container) isFinished() bool {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	return c.finished
}

func initRestartPolicy(pod *v1.Pod) v1.RestartPolicy {
	if pod.Spec.RestartPolicy == v1.RestartPolicyNever {
		return v1.RestartPolicyNever
	}
	return v1.RestartPolicyOnFailure
}

func shouldRestart(policy v1.RestartPolicy, code int32) bool {
	switch policy {
	case v1.RestartPolicyAlways:
		return true
	case v1.RestartPolicyOnFailure:
		return code != 0
	}
	return false
}

// loop runs the container until it terminates for good (per policy) or ctx is done, and
// returns the last exit code (-1 if it never ran).
func (c *container) loop(ctx context.Context, policy v1.RestartPolicy) int32 {
	cfg := c.w.k.cfg
	backoff := cfg.BackoffInitial
	code := int32(-1)
	for ctx.Err() == nil {
		p, err := c.start(ctx)
		if err != nil {
			c.startFailed(err)
			if !sleepCtx(ctx, backoff) {
				return code
			}
			backoff = min(2*backoff, cfg.BackoffMax)
			continue
		}
		probeCtx, stopProbes := context.WithCancel(ctx)
		go c.probe(probeCtx, p)
		select {
		case <-p.exited:
		case <-ctx.Done():
			c.stop(p, c.w.grace)
		}
		stopProbes()
		code = c.exited(p)
		if ctx.Err() != nil {
			return code
		}
		c.w.mu.Lock()
		forced := c.restart
		c.restart = false
		c.w.mu.Unlock()
		if forced {
			backoff = cfg.BackoffInitial
			continue
		}
		if !shouldRestart(policy, code) {
			c.w.mu.Lock()
			c.finished = true
			c.w.mu.Unlock()
			return code
		}
		if time.Since(p.startedAt) > 2*cfg.BackoffMax {
			backoff = cfg.BackoffInitial // it ran well for a while: not a crash loop
		}
		msg := fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", backoff, c.spec().Name, c.w.podCopy().Name)
		c.setWaiting("CrashLoopBackOff", msg)
		c.w.k.event(c.w.podCopy(), true, "BackOff", "Back-off restarting failed container %s (exit code %d)", c.spec().Name, code)
		if !sleepCtx(ctx, backoff) {
			return code
		}
		backoff = min(2*backoff, cfg.BackoffMax)
	}
	return code
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func (c *container) startFailed(err error) {
	reason := "CreateContainerError"
	var ce *errConfig
	if errors.As(err, &ce) {
		reason = ce.reason
	}
	c.w.mu.Lock()
	repeat := c.status.State.Waiting != nil && c.status.State.Waiting.Message == err.Error()
	c.w.mu.Unlock()
	c.setWaiting(reason, err.Error())
	if !repeat {
		pod := c.w.podCopy()
		log.Printf("pod %s/%s container %s: %v", pod.Namespace, pod.Name, c.spec().Name, err)
		c.w.k.event(pod, true, "Failed", "container %s: %s: %v", c.spec().Name, reason, err)
	}
}

// setWaiting puts the container in the waiting state; a terminated state moves to lastState.
func (c *container) setWaiting(reason, msg string) {
	c.w.mu.Lock()
	if t := c.status.State.Terminated; t != nil {
		c.status.LastTerminationState = v1.ContainerState{Terminated: t}
	}
	c.status.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: msg}}
	c.w.mu.Unlock()
	c.w.notify()
}

// start launches one run of the container through the shim.
func (c *container) start(ctx context.Context) (*process, error) {
	w := c.w
	cs := c.spec() // one version of the spec for the whole start
	pod := w.podCopy()
	env, err := w.containerEnv(ctx, cs)
	if err != nil {
		return nil, configErr("CreateContainerConfigError", err)
	}
	lookup := envLookup(env)
	command, args := expandAll(cs.Command, lookup), expandAll(cs.Args, lookup)
	res, err := w.k.images.Resolve(cs.Image, command, args)
	if err != nil {
		return nil, configErr("ErrImagePull", err)
	}
	spec, err := w.shimSpec(cs, res, env)
	if err != nil {
		return nil, configErr("CreateContainerConfigError", err)
	}

	w.mu.Lock()
	count := c.status.RestartCount
	if c.everRan {
		count++
	}
	w.mu.Unlock()
	logDir := filepath.Join(w.dir, "logs", cs.Name)
	specPath := filepath.Join(w.dir, "specs", cs.Name+".json")
	for _, d := range []string{logDir, filepath.Dir(specPath)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	termLog, err := terminationLog(w.dir, cs, count, spec.UID)
	if err != nil {
		return nil, err
	}
	spec.Mounts = append(spec.Mounts, shim.Mount{Source: termLog, Target: terminationPath(cs)})
	if err := shim.Write(specPath, spec); err != nil {
		return nil, err
	}
	logPath := filepath.Join(logDir, fmt.Sprintf("%d.log", count))
	cmd := w.shimCommand(specPath, !pod.Spec.HostNetwork)
	sink, err := startOutput(cmd, logPath)
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		closeWriters(cmd)
		sink.close(time.Second)
		return nil, configErr("RunContainerError", err)
	}
	closeWriters(cmd)
	p := &process{cmd: cmd, pid: cmd.Process.Pid, spec: spec, termLog: termLog, logPath: logPath, startedAt: time.Now(),
		exited: make(chan struct{}), startedCh: make(chan struct{})}
	if err := recordPid(w.dir, cs.Name, p.pid); err != nil {
		log.Printf("record pid: %v", err)
	}
	go func() {
		_ = cmd.Wait()
		sink.close(time.Second) // the output is in the file before the run is seen to end
		close(p.exited)
	}()

	w.mu.Lock()
	c.everRan = true
	c.status.RestartCount = count
	if t := c.status.State.Terminated; t != nil {
		c.status.LastTerminationState = v1.ContainerState{Terminated: t}
	}
	c.status.State = v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(p.startedAt.Truncate(time.Second))}}
	c.status.ContainerID = fmt.Sprintf("localkubelet://%s-%s-%d", w.uid, cs.Name, count)
	c.status.ImageID = "localkubelet://" + res.Path
	c.started, c.ready = false, false
	c.proc = p
	w.mu.Unlock()
	w.notify()
	w.k.event(pod, false, "Started", "Started container %s (%s)", cs.Name, res.Path)
	return p, nil
}

// shimCommand runs the shim in the Pod's network namespace (ip netns exec also gives it a
// mount namespace of its own and the Pod's resolv.conf and hosts), or for host-network Pods
// in a new mount namespace only. The container gets its own process group, so it can be
// signalled as a whole, and dies with the kubelet.
func (w *podWorker) shimCommand(specPath string, podNetwork bool) *exec.Cmd {
	self := w.k.cfg.Executable
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var cmd *exec.Cmd
	if podNetwork {
		w.mu.Lock()
		netns := w.net.Netns
		w.mu.Unlock()
		cmd = exec.Command("ip", "netns", "exec", netns, self, "container-exec", specPath)
		attr.Cloneflags = syscall.CLONE_NEWUTS
	} else {
		cmd = exec.Command(self, "container-exec", specPath)
		attr.Unshareflags = syscall.CLONE_NEWNS
	}
	cmd.SysProcAttr = attr
	cmd.Env = []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}
	return cmd
}

// exited records how a run ended.
func (c *container) exited(p *process) int32 {
	ws, _ := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	code, sig := int32(ws.ExitStatus()), int32(0)
	if ws.Signaled() {
		sig = int32(ws.Signal())
		code = 128 + sig
	}
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	msg := terminationMessage(p.termLog)
	if msg == "" && code != 0 && c.spec().TerminationMessagePolicy == v1.TerminationMessageFallbackToLogsOnError {
		msg = c.logTail(p)
	}
	forgetPid(c.w.dir, c.spec().Name)
	c.w.mu.Lock()
	c.status.State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
		ExitCode: code, Signal: sig, Reason: reason, Message: msg,
		StartedAt:   metav1.NewTime(p.startedAt.Truncate(time.Second)),
		FinishedAt:  *now(),
		ContainerID: c.status.ContainerID,
	}}
	c.started, c.ready = false, false
	c.proc = nil
	c.w.mu.Unlock()
	c.w.notify()
	return code
}

// terminationPath is where the container writes its termination message.
func terminationPath(c *v1.Container) string {
	if c.TerminationMessagePath != "" {
		return c.TerminationMessagePath
	}
	return v1.TerminationMessagePathDefault
}

// terminationLog makes the empty host file of one run's termination message, writable by
// the container's user.
func terminationLog(dir string, c *v1.Container, run int32, uid int64) (string, error) {
	path := filepath.Join(dir, "termination", fmt.Sprintf("%s-%d", c.Name, run))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		return "", err
	}
	return path, os.Chown(path, int(uid), -1)
}

// terminationMessage is what the run wrote to its termination message file: at most 4 KiB,
// as the kubelet reads it.
func terminationMessage(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	data, _ := io.ReadAll(io.LimitReader(f, 4096))
	return string(data)
}

// logTail returns the end of the run's output (at most 2 KiB), for the termination message.
func (c *container) logTail(p *process) string {
	data, err := plainLog(p.logPath)
	if err != nil {
		return ""
	}
	if len(data) > 2048 {
		data = data[len(data)-2048:]
	}
	return string(data)
}

// signal sends sig to the container's process group.
func (p *process) signal(sig syscall.Signal) {
	if err := syscall.Kill(-p.pid, sig); err != nil {
		_ = syscall.Kill(p.pid, sig)
	}
}

// stop runs the preStop hook, sends SIGTERM, and SIGKILL once the grace period is over. The
// grace is read again while waiting, so a shorter one asked later (force delete) applies.
func (c *container) stop(p *process, grace func() time.Duration) {
	start := time.Now()
	if h := c.spec().Lifecycle; h != nil && h.PreStop != nil {
		ctx, cancel := context.WithTimeout(context.Background(), grace())
		if err := c.runHook(ctx, p, h.PreStop); err != nil {
			c.w.k.event(c.w.podCopy(), true, "FailedPreStopHook", "container %s: %v", c.spec().Name, err)
		}
		cancel()
	}
	p.signal(syscall.SIGTERM)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-p.exited:
			return
		case <-tick.C:
			if time.Since(start) >= grace() {
				p.signal(syscall.SIGKILL)
				<-p.exited
				return
			}
		}
	}
}

// stopRun stops the current run (sidecars after the main containers end) and keeps it from
// restarting.
func (c *container) stopRun(grace time.Duration) {
	c.w.mu.Lock()
	c.finished = true
	p := c.proc
	c.w.mu.Unlock()
	if p != nil {
		c.stop(p, func() time.Duration { return grace })
	}
}

// restartRun stops the current run with the Pod's grace period; the loop then applies the
// restart policy (failed liveness or startup probes).
func (c *container) restartRun(p *process, reason string) {
	c.w.k.event(c.w.podCopy(), false, "Killing", "Container %s %s, will be restarted", c.spec().Name, reason)
	go c.stop(p, c.w.podGrace)
}

// restartForImage restarts a running container whose image changed.
func (c *container) restartForImage() {
	c.w.mu.Lock()
	p := c.proc
	if p != nil {
		c.restart = true
	}
	c.w.mu.Unlock()
	if p != nil {
		c.restartRun(p, "definition changed")
	}
}

// kill SIGKILLs the current run (fault injection, node halt).
func (c *container) kill() bool { return c.signal(syscall.SIGKILL) }

// signal signals the container's processes; false when it does not run.
func (c *container) signal(sig syscall.Signal) bool {
	c.w.mu.Lock()
	p := c.proc
	c.w.mu.Unlock()
	if p == nil {
		return false
	}
	p.signal(sig)
	return true
}

// waitStarted waits until the container has started (sidecars gate the next init container).
func (c *container) waitStarted(ctx context.Context) bool {
	for {
		c.w.mu.Lock()
		p, started := c.proc, c.started
		c.w.mu.Unlock()
		if started {
			return true
		}
		var ch <-chan struct{}
		if p != nil {
			ch = p.startedCh
		}
		select {
		case <-ctx.Done():
			return false
		case <-ch:
		case <-time.After(200 * time.Millisecond):
		}
	}
}
