package stack

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// A process of the stack: started detached (own session, output to .stack/logs/<name>.log) so
// that it outlives the command or test that started it, and found again through its pid file.
type process struct {
	name string
	bin  string
	args []string
}

// pid returns the pid of the running process, or 0 when it does not run. A pid only counts when
// that process still runs the same binary (pids get reused) and is not a zombie.
func (p process) pid(l layout) int {
	pid, _ := p.state(l)
	return pid
}

// state is pid, with why the process does not count as running ("" when it does).
func (p process) state(l layout) (int, string) {
	b, err := os.ReadFile(l.pidFile(p.name))
	if err != nil {
		return 0, err.Error()
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0, fmt.Sprintf("its pid file holds %q", b)
	}
	if why := procState(pid, p.bin); why != "" {
		return 0, why
	}
	return pid, ""
}

// exited reports, with the reason, that p has stopped running. A process seen gone is looked at
// again a moment later: a start was once reported as an exit while the process ran on.
func (p process) exited(l layout) error {
	_, why := p.state(l)
	if why == "" {
		return nil
	}
	time.Sleep(300 * time.Millisecond)
	if _, again := p.state(l); again == "" {
		return nil
	}
	return withLog(l, p, fmt.Errorf("stack: %s exited (%s)", p.name, why))
}

// procRuns reports whether pid is a live (not zombie) process whose argv[0] is bin.
func procRuns(pid int, bin string) bool { return procState(pid, bin) == "" }

// procState says why pid is not a live (not zombie) process whose argv[0] is bin, or "".
func procState(pid int, bin string) string {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(cmdline) == 0 {
		return fmt.Sprintf("pid %d: no command line (%v)", pid, err)
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	if string(argv0) != bin {
		return fmt.Sprintf("pid %d runs %s", pid, argv0)
	}
	if s := procStat(pid); s == 'Z' {
		return fmt.Sprintf("pid %d is a zombie", pid)
	}
	return ""
}

// procStat returns the state letter of /proc/<pid>/stat (R, S, D, Z, ...), or 0.
func procStat(pid int) byte {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0
	}
	return stat[i+2]
}

// start runs the process detached unless it already runs. It returns the pid.
func (p process) start(l layout) (int, error) {
	if pid := p.pid(l); pid != 0 {
		return pid, nil
	}
	if _, err := os.Stat(p.bin); err != nil {
		return 0, fmt.Errorf("stack: %s: %w (build it with `make stack-bins`)", p.name, err)
	}
	if err := os.MkdirAll(l.state("logs"), 0o755); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(l.state("pids"), 0o755); err != nil {
		return 0, err
	}
	logf, err := os.OpenFile(l.logFile(p.name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	fmt.Fprintf(logf, "\n=== %s: %s %s\n", time.Now().Format(time.RFC3339), p.bin, strings.Join(p.args, " "))
	cmd := exec.Command(p.bin, p.args...)
	cmd.Dir = l.root
	cmd.Env = processEnv()
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("stack: start %s: %w", p.name, err)
	}
	pid := cmd.Process.Pid
	// Reap it if it exits while this process lives (otherwise init does), and say how it
	// ended in its log: a process killed, or ending before its log was flushed, leaves none.
	go func() {
		how := "exit status 0"
		if err := cmd.Wait(); err != nil {
			how = err.Error()
		}
		if f, err := os.OpenFile(l.logFile(p.name), os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
			fmt.Fprintf(f, "=== %s: pid %d ended: %s\n", time.Now().Format(time.RFC3339), pid, how)
			_ = f.Close()
		}
	}()
	if err := writeFile(l.pidFile(p.name), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		return 0, err
	}
	return pid, nil
}

// processEnv is the environment of stack processes: this one's, without settings that would
// point etcd, etcdctl or client tools elsewhere.
func processEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "ETCD_") || strings.HasPrefix(k, "ETCDCTL_") || k == "KUBECONFIG" {
			continue
		}
		env = append(env, kv)
	}
	return env
}

// stop sends SIGTERM, waits up to grace, then SIGKILLs; it returns once the process is gone.
func (p process) stop(ctx context.Context, l layout, grace time.Duration) error {
	defer os.Remove(l.pidFile(p.name))
	pid := p.pid(l)
	if pid == 0 {
		return nil
	}
	return stopPID(ctx, pid, p.bin, grace)
}

func stopPID(ctx context.Context, pid int, bin string, grace time.Duration) error {
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for procRuns(pid, bin) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(time.Minute)
			for procRuns(pid, bin) {
				if time.Now().After(deadline) {
					return fmt.Errorf("stack: pid %d (%s) survives SIGKILL", pid, filepath.Base(bin))
				}
				if err := sleep(ctx, 100*time.Millisecond); err != nil {
					return err
				}
			}
			return nil
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// poll calls f every interval until it returns nil or ctx ends; the error names what and
// carries f's last error.
func poll(ctx context.Context, interval time.Duration, what string, f func(context.Context) error) error {
	var last error
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		last = f(cctx)
		cancel()
		if last == nil {
			return nil
		}
		if err := sleep(ctx, interval); err != nil {
			return fmt.Errorf("stack: waiting for %s: %w (last: %v)", what, errors.Join(err), last)
		}
	}
}
