package node

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"
)

// execer runs `kubectl exec` commands in a Pod's containers, as exec probes run: same
// namespaces, mounts, user and environment.
type execer struct{ pw *podWorker }

func (e execer) ExecInContainer(ctx context.Context, _, _, name string, argv []string, in io.Reader, out, errOut io.WriteCloser,
	tty bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	c := e.pw.container(name)
	if c == nil {
		return fmt.Errorf("container %q is not in the pod", name)
	}
	e.pw.mu.Lock()
	p := c.proc
	e.pw.mu.Unlock()
	if p == nil || isDone(p.exited) {
		return fmt.Errorf("container %q is not running", name)
	}
	cmd, cleanup, err := c.command(p, argv)
	if err != nil {
		return err
	}
	defer cleanup()
	if tty {
		return runTTY(ctx, cmd, in, out, resize)
	}
	if in != nil {
		cmd.Stdin = in
	}
	if out != nil {
		cmd.Stdout = out
	}
	if errOut != nil {
		cmd.Stderr = errOut
	}
	cmd.WaitDelay = time.Second // a client that keeps stdin open does not hold the exit back
	return exitError(runUntil(ctx, cmd))
}

// runUntil runs cmd until it ends or ctx does, then kills its process group.
func runUntil(ctx context.Context, cmd *exec.Cmd) error {
	if err := cmd.Start(); err != nil {
		return err
	}
	return waitUntil(ctx, cmd)
}

// waitUntil waits for a started cmd until it ends or ctx does, then kills its process group.
func waitUntil(ctx context.Context, cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		return <-done
	}
}

// exitError is how the streaming server reports an exit code: a utilexec.ExitError.
func exitError(err error) error {
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() >= 0 {
		return utilexec.CodeExitError{Err: err, Code: ee.ExitCode()}
	}
	if errors.Is(err, exec.ErrWaitDelay) {
		return nil
	}
	return err
}

func isDone(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// runTTY runs cmd on a new terminal (its own session, the terminal its controlling one), as
// `kubectl exec -t` asks: in goes to the terminal, the terminal's output to out, and resize
// events set its size.
func runTTY(ctx context.Context, cmd *exec.Cmd, in io.Reader, out io.Writer, resize <-chan remotecommand.TerminalSize) error {
	term, tty, err := openPTY()
	if err != nil {
		return err
	}
	defer term.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr.Setpgid, cmd.SysProcAttr.Setsid, cmd.SysProcAttr.Setctty, cmd.SysProcAttr.Ctty = false, true, true, 0
	err = cmd.Start()
	tty.Close()
	if err != nil {
		return err
	}
	go func() {
		for sz := range resize {
			_ = unix.IoctlSetWinsize(int(term.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: sz.Height, Col: sz.Width})
		}
	}()
	if in != nil {
		go func() { _, _ = io.Copy(term, in) }()
	}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		if out != nil {
			_, _ = io.Copy(out, term) // ends with EIO once every process of the terminal ended
		}
	}()
	err = waitUntil(ctx, cmd)
	select {
	case <-copied:
	case <-time.After(time.Second):
	}
	return exitError(err)
}

// openPTY opens a new pseudo-terminal: its controlling side and the terminal.
func openPTY() (term, tty *os.File, err error) {
	term, err = os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	fd := int(term.Fd())
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0)
	}
	if err == nil {
		tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	}
	if err != nil {
		term.Close()
		return nil, nil, fmt.Errorf("pseudo-terminal: %w", err)
	}
	return term, tty, nil
}
