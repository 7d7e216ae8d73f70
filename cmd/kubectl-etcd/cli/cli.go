// Package cli is kubectl-etcd: it reads EtcdCluster manifests (files or a kustomization),
// plans each cluster against its observed state and prints the plans. The command's logic
// lives here, apart from main, so tests run it in-process.
package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Exit codes follow `terraform plan -detailed-exitcode`.
const (
	ExitOK      = 0 // no changes (or changes without --detailed-exitcode)
	ExitError   = 1 // an error, or a plan the planner refused
	ExitChanges = 2 // some cluster has steps to apply (--detailed-exitcode only)
)

// CLI is one run of the command with its streams.
type CLI struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Now is the time ages in `status` are counted from.
	Now func() time.Time
}

// Run runs kubectl-etcd with args (without the program name) and returns the exit code.
func Run(args []string, stdout, stderr io.Writer) int {
	c := &CLI{Stdin: os.Stdin, Stdout: stdout, Stderr: stderr, Now: time.Now}
	return c.Run(context.Background(), args)
}

const usage = `kubectl-etcd shows and approves the plans of etcdplan EtcdClusters.

Usage:
  kubectl-etcd plan (-f FILE | -k DIR) [--observed OBSERVED.json] [-o table|json|markdown] [--detailed-exitcode]
  kubectl-etcd status NAME
  kubectl-etcd approve NAME [--plan ID]
  kubectl-etcd rotate-ca NAME [--id VALUE]
  kubectl-etcd convert -f THEIRS.yaml [--name NAME] [--etcd-version VERSION]

Commands:
  plan     print the plan for every EtcdCluster in the manifests, against the live cluster
           or a saved observed state
  status   show a cluster's members, leader, health, plan and recent history
  approve  let a cluster's pending plan run (spec.updateStrategy.approval: Manual)
  rotate-ca  rotate the cluster's own CA (spec.tls mode Auto) in three passes, as a plan
  convert  print the EtcdCluster (spec.bootstrap.join) and backups that take over a cluster of
           another etcd operator; moving from one: docs/migration.md

Run "kubectl-etcd COMMAND -h" for a command's flags.
`

// Run runs the command and returns its exit code.
func (c *CLI) Run(ctx context.Context, args []string) int {
	if len(args) == 0 {
		fmt.Fprint(c.Stderr, usage)
		return ExitError
	}
	switch args[0] {
	case "plan":
		return c.plan(ctx, args[1:])
	case "status":
		return c.status(ctx, args[1:])
	case "approve":
		return c.approve(ctx, args[1:])
	case "rotate-ca":
		return c.rotateCA(ctx, args[1:])
	case "convert":
		return c.convertCmd(args[1:])
	case "help", "-h", "-help", "--help":
		fmt.Fprint(c.Stdout, usage)
		return ExitOK
	}
	fmt.Fprintf(c.Stderr, "error: unknown command %q\n\n%s", args[0], usage)
	return ExitError
}

// fail prints an error the way kubectl does and returns ExitError.
func (c *CLI) fail(err error) int {
	msg := strings.TrimSuffix(err.Error(), "\n")
	fmt.Fprintf(c.Stderr, "error: %s\n", msg)
	return ExitError
}

// usageError is a mistake in the command line; it is followed by a pointer to the help.
type usageError string

func (e usageError) Error() string { return string(e) }
