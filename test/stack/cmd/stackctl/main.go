// Command stackctl starts, stops and reports on the local Kubernetes stack (make stack-up,
// stack-down, stack-status; see docs/development.md).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/etcdplan/etcdplan/test/stack"
)

func main() {
	root := flag.String("root", "", "repository root (default: the directory of go.mod above the working directory)")
	timeout := flag.Duration("timeout", 10*time.Minute, "how long up and down may take")
	strict := flag.Bool("strict", false, "down: fail if the local kubelet's cleanup left anything behind")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: stackctl [flags] up|down|status\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 1 {
		flag.Usage()
		os.Exit(2)
	}
	if *root == "" {
		r, err := stack.RepoRoot()
		if err != nil {
			fatal(err)
		}
		*root = r
	}
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, *timeout)
	defer cancel()

	switch flag.Arg(0) {
	case "up":
		if err := stack.Up(ctx, *root, os.Stderr); err != nil {
			fatal(err)
		}
	case "down":
		left, err := stack.Down(ctx, *root, os.Stderr)
		if err != nil {
			fatal(err)
		}
		if !left.Empty() && *strict {
			fatal(fmt.Errorf("the local kubelet's cleanup left %s", left))
		}
		fmt.Fprintln(os.Stderr, "stack: down")
	case "status":
		if !stack.Status(ctx, *root, os.Stdout) {
			os.Exit(1)
		}
	default:
		flag.Usage()
		os.Exit(2)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "stackctl:", err)
	os.Exit(1)
}
