package stack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Stack is a running local stack.
type Stack struct {
	l      layout
	cfg    *rest.Config
	client kubernetes.Interface
}

// Every process using the stack holds a shared lock on .stack/lock for as long as it lives;
// starting the stack and taking it down take the lock exclusively. So parallel test packages
// start the stack once, and `stackctl down` waits for the tests using it.
var lock struct {
	sync.Mutex
	f    *os.File
	mode int // 0, syscall.LOCK_SH or syscall.LOCK_EX
}

// tryFlock takes the lock in mode (syscall.LOCK_SH or LOCK_EX) if it is free, converting the
// lock this process holds.
func tryFlock(l layout, mode int) (bool, error) {
	if lock.f == nil {
		if err := os.MkdirAll(l.state(), 0o755); err != nil {
			return false, err
		}
		f, err := os.OpenFile(l.state("lock"), os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			return false, err
		}
		lock.f = f
	}
	if lock.mode == mode {
		return true, nil
	}
	err := syscall.Flock(int(lock.f.Fd()), mode|syscall.LOCK_NB)
	if err == nil {
		lock.mode = mode
		return true, nil
	}
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return false, fmt.Errorf("stack: lock %s: %w", l.state("lock"), err)
}

// flock takes the lock in mode, polling so that ctx can end the wait; waiting is called once
// if the lock is not free at once.
func flock(ctx context.Context, l layout, mode int, waiting func()) error {
	for first := true; ; first = false {
		ok, err := tryFlock(l, mode)
		if ok || err != nil {
			return err
		}
		if first && waiting != nil {
			waiting()
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return fmt.Errorf("stack: waiting for the lock %s: %w", l.state("lock"), err)
		}
	}
}

func unlock() {
	if lock.f != nil {
		_ = lock.f.Close() // releases the lock
		lock.f, lock.mode = nil, 0
	}
}

// Start returns the local stack, starting it when .stack/kubeconfig does not answer. The
// repository root is found by walking up from the working directory to go.mod. Progress goes
// to stderr. The calling process then holds the stack (a shared lock) until it exits.
func Start(ctx context.Context) (*Stack, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	return StartAt(ctx, root, os.Stderr)
}

// StartAt is Start for the repository at root, with progress written to out (may be nil).
func StartAt(ctx context.Context, root string, out io.Writer) (*Stack, error) {
	l, err := newLayout(root)
	if err != nil {
		return nil, err
	}
	lock.Lock()
	defer lock.Unlock()
	if lock.mode == syscall.LOCK_SH {
		if s, err := open(ctx, l); err == nil {
			return s, nil
		}
	}
	for waited := false; ; waited = true {
		// Nobody else uses the stack: make sure all of it runs (cheap when it does).
		if ok, err := tryFlock(l, syscall.LOCK_EX); err != nil {
			return nil, err
		} else if ok {
			break
		}
		// Others use it: reuse it when it answers; wait while someone starts or stops it.
		if _, err := open(ctx, l); err == nil {
			if ok, err := tryFlock(l, syscall.LOCK_SH); err != nil {
				return nil, err
			} else if ok {
				if s, err := open(ctx, l); err == nil {
					return s, nil
				}
			}
		}
		if !waited {
			logger{out}.printf("waiting for the stack another process starts, stops or uses (lock %s)", l.state("lock"))
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return nil, fmt.Errorf("stack: waiting for the stack: %w", err)
		}
	}
	if err := up(ctx, l, out); err != nil {
		return nil, err
	}
	if err := flock(ctx, l, syscall.LOCK_SH, nil); err != nil {
		return nil, err
	}
	return open(ctx, l)
}

// Up starts the stack (or the parts of it that do not run) and waits until it is ready, then
// lets go of it: used by `stackctl up`.
func Up(ctx context.Context, root string, out io.Writer) error {
	l, err := newLayout(root)
	if err != nil {
		return err
	}
	lock.Lock()
	defer lock.Unlock()
	if err := flock(ctx, l, syscall.LOCK_EX, func() {
		logger{out}.printf("waiting for another process that starts or stops the stack")
	}); err != nil {
		return err
	}
	defer unlock()
	return up(ctx, l, out)
}

// Down stops the stack and removes everything it made except its logs. It waits for the
// processes that use the stack (tests) to finish. It returns what the local kubelet's cleanup
// left behind and Down removed: non-empty means that cleanup has a bug.
func Down(ctx context.Context, root string, out io.Writer) (Leftovers, error) {
	l, err := newLayout(root)
	if err != nil {
		return Leftovers{}, err
	}
	lock.Lock()
	defer lock.Unlock()
	if err := flock(ctx, l, syscall.LOCK_EX, func() {
		logger{out}.printf("waiting for the processes that use the stack to finish (lock %s)", l.state("lock"))
	}); err != nil {
		return Leftovers{}, err
	}
	defer unlock()
	left, err := teardown(ctx, l, logger{out})
	if err == nil {
		l.release()
	}
	return left, err
}

// Release lets go of the stack this process holds, so that `stackctl down` can take it down.
func Release() {
	lock.Lock()
	defer lock.Unlock()
	unlock()
}

// open returns the stack when its kubeconfig answers.
func open(ctx context.Context, l layout) (*Stack, error) {
	cfg, err := restConfig(l.kubeconfig())
	if err != nil {
		return nil, err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := apiReady(cctx, client); err != nil {
		return nil, err
	}
	return &Stack{l: l, cfg: cfg, client: client}, nil
}

// Kubeconfig is the path of the admin kubeconfig (.stack/kubeconfig).
func (s *Stack) Kubeconfig() string { return s.l.kubeconfig() }

// RESTConfig returns a copy of the admin client configuration.
func (s *Stack) RESTConfig() *rest.Config { return rest.CopyConfig(s.cfg) }

// Root is the repository root the stack runs from.
func (s *Stack) Root() string { return s.l.root }

// Instance is the stack's number among those that can run side by side.
func (s *Stack) Instance() Instance { return s.l.n }

// Client is an admin clientset.
func (s *Stack) Client() kubernetes.Interface { return s.client }
