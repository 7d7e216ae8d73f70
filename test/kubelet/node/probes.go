package node

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/etcdplan/etcdplan/test/kubelet/shim"
)

type probeKind string

const (
	startupProbe   probeKind = "Startup"
	livenessProbe  probeKind = "Liveness"
	readinessProbe probeKind = "Readiness"
)

// probe runs the container's probes for one run. Without a startup probe the container is
// started at once; without a readiness probe it is ready once started. Liveness and
// readiness probes begin after startup.
func (c *container) probe(ctx context.Context, p *process) {
	s := c.spec()
	if h := s.Lifecycle; h != nil && h.PostStart != nil {
		hctx, cancel := context.WithTimeout(ctx, c.w.podGrace())
		err := c.runHook(hctx, p, h.PostStart)
		cancel()
		if err != nil && ctx.Err() == nil {
			c.w.k.event(c.w.podCopy(), true, "FailedPostStartHook", "container %s: %v", s.Name, err)
			c.restartRun(p, "failed its postStart hook")
			return
		}
	}
	if s.StartupProbe != nil {
		go c.probeLoop(ctx, p, s.StartupProbe, startupProbe)
	} else {
		c.setStarted(p)
	}
	if s.LivenessProbe != nil {
		go c.probeLoop(ctx, p, s.LivenessProbe, livenessProbe)
	}
	if s.ReadinessProbe != nil {
		go c.probeLoop(ctx, p, s.ReadinessProbe, readinessProbe)
	}
}

func (c *container) setStarted(p *process) {
	c.w.mu.Lock()
	if c.proc == p {
		c.started = true
		if c.spec().ReadinessProbe == nil {
			c.ready = true
		}
	}
	c.w.mu.Unlock()
	close(p.startedCh)
	c.w.notify()
}

func (c *container) setReady(p *process, ready bool) {
	c.w.mu.Lock()
	changed := c.proc == p && c.ready != ready
	if changed {
		c.ready = ready
	}
	c.w.mu.Unlock()
	if changed {
		c.w.notify()
	}
}

func (c *container) probeLoop(ctx context.Context, p *process, pr *v1.Probe, kind probeKind) {
	if kind != startupProbe {
		select {
		case <-ctx.Done():
			return
		case <-p.startedCh:
		}
	}
	if delay := time.Until(p.startedAt.Add(time.Duration(pr.InitialDelaySeconds) * time.Second)); delay > 0 {
		if !sleepCtx(ctx, delay) {
			return
		}
	}
	period := time.Duration(max(pr.PeriodSeconds, 1)) * time.Second
	timeout := time.Duration(max(pr.TimeoutSeconds, 1)) * time.Second
	successes, failures := 0, 0
	for {
		err := c.check(ctx, p, &pr.ProbeHandler, timeout)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			successes, failures = successes+1, 0
		} else {
			successes, failures = 0, failures+1
			c.w.k.event(c.w.podCopy(), true, "Unhealthy", "%s probe of container %s failed: %v", kind, c.spec().Name, err)
		}
		switch kind {
		case startupProbe:
			if err == nil {
				c.setStarted(p)
				return
			}
			if failures >= int(max(pr.FailureThreshold, 1)) {
				c.restartRun(p, "failed startup probe")
				return
			}
		case livenessProbe:
			if failures >= int(max(pr.FailureThreshold, 1)) {
				c.restartRun(p, "failed liveness probe")
				return
			}
		case readinessProbe:
			if successes >= int(max(pr.SuccessThreshold, 1)) {
				c.setReady(p, true)
			}
			if failures >= int(max(pr.FailureThreshold, 1)) {
				c.setReady(p, false)
			}
		}
		if !sleepCtx(ctx, period) {
			return
		}
	}
}

// check runs one probe; nil means success.
func (c *container) check(ctx context.Context, p *process, h *v1.ProbeHandler, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	switch {
	case h.Exec != nil:
		return c.execIn(ctx, p, h.Exec.Command)
	case h.HTTPGet != nil:
		return c.httpGet(ctx, h.HTTPGet)
	case h.TCPSocket != nil:
		return c.tcp(ctx, h.TCPSocket.Host, h.TCPSocket.Port)
	case h.GRPC != nil:
		return c.grpcHealth(ctx, h.GRPC)
	}
	return fmt.Errorf("probe has no handler")
}

// runHook runs a lifecycle hook.
func (c *container) runHook(ctx context.Context, p *process, h *v1.LifecycleHandler) error {
	switch {
	case h.Exec != nil:
		return c.execIn(ctx, p, h.Exec.Command)
	case h.HTTPGet != nil:
		return c.httpGet(ctx, h.HTTPGet)
	case h.TCPSocket != nil:
		return c.tcp(ctx, h.TCPSocket.Host, h.TCPSocket.Port)
	case h.Sleep != nil:
		sleepCtx(ctx, time.Duration(h.Sleep.Seconds)*time.Second)
	}
	return nil
}

func (c *container) podIP() string {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	return c.w.ip
}

// port resolves a numeric or named container port.
func (c *container) port(p intstr.IntOrString) (int, error) {
	if p.Type == intstr.Int {
		return p.IntValue(), nil
	}
	for _, cp := range c.spec().Ports {
		if cp.Name == p.StrVal {
			return int(cp.ContainerPort), nil
		}
	}
	if n, err := strconv.Atoi(p.StrVal); err == nil {
		return n, nil
	}
	return 0, fmt.Errorf("container %s has no port named %q", c.spec().Name, p.StrVal)
}

func (c *container) httpGet(ctx context.Context, g *v1.HTTPGetAction) error {
	port, err := c.port(g.Port)
	if err != nil {
		return err
	}
	host := g.Host
	if host == "" {
		host = c.podIP()
	}
	scheme := strings.ToLower(string(g.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	path := g.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	url := fmt.Sprintf("%s://%s%s", scheme, net.JoinHostPort(host, strconv.Itoa(port)), path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "kube-probe/1.36")
	for _, h := range g.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, // as the kubelet: probes do not verify
		DisableKeepAlives: true,
	}}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("HTTP probe failed with statuscode: %d", resp.StatusCode)
	}
	return nil
}

func (c *container) tcp(ctx context.Context, host string, port intstr.IntOrString) error {
	n, err := c.port(port)
	if err != nil {
		return err
	}
	if host == "" {
		host = c.podIP()
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(n)))
	if err != nil {
		return err
	}
	return conn.Close()
}

// execIn runs a command the way the container runs: same namespaces, mounts, user and
// environment. command[0] is looked up in the image's directory, then in the PATH.
func (c *container) execIn(ctx context.Context, p *process, command []string) error {
	cmd, cleanup, err := c.command(p, command)
	if err != nil {
		return err
	}
	defer cleanup()
	out, err := runContext(ctx, cmd)
	if err != nil {
		return fmt.Errorf("%v: %s", err, strings.TrimSpace(truncate(out, 512)))
	}
	return nil
}

// command prepares command to run the way the container runs; cleanup removes its spec
// once it ended.
func (c *container) command(p *process, command []string) (cmd *exec.Cmd, cleanup func(), err error) {
	if len(command) == 0 {
		return nil, nil, fmt.Errorf("empty command")
	}
	s := p.spec
	if s.Path, err = lookCommand(command[0], s.Env); err != nil {
		return nil, nil, err
	}
	s.Argv = command
	f, err := os.CreateTemp(filepath.Join(c.w.dir, "specs"), c.spec().Name+"-exec-*.json")
	if err != nil {
		return nil, nil, err
	}
	f.Close()
	cleanup = func() { _ = os.Remove(f.Name()) }
	if err := shim.Write(f.Name(), s); err != nil {
		cleanup()
		return nil, nil, err
	}
	return c.w.shimCommand(f.Name(), !c.w.podCopy().Spec.HostNetwork), cleanup, nil
}

func runContext(ctx context.Context, cmd *exec.Cmd) (string, error) {
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	err := runUntil(ctx, cmd) // the shim runs in its own group, killed whole at the deadline
	if ctx.Err() != nil {
		return out.String(), fmt.Errorf("timed out")
	}
	return out.String(), err
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// lookCommand finds a command's binary: an absolute path as is, otherwise through the
// container's PATH (the image's directory comes first in it).
func lookCommand(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		if _, err := os.Stat(name); err == nil {
			return name, nil
		}
	}
	pathVar := defaultPath
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			pathVar = v
		}
	}
	base := filepath.Base(name)
	for _, dir := range filepath.SplitList(pathVar) {
		p := filepath.Join(dir, base)
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("executable %q not found", name)
}
