package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
)

// planFlags are the flags of `kubectl-etcd plan`.
type planFlags struct {
	files     []string
	kustomize string
	observed  string
	output    string
	detailed  bool
}

var outputs = []string{"table", "json", "markdown"}

const planHelp = `Print the plan for every EtcdCluster in the manifests, against its observed state.

Usage:
  kubectl-etcd plan (-f FILE | -k DIR) --observed OBSERVED.json [-o table|json|markdown] [--detailed-exitcode]

Flags:
  -f, --filename FILE       manifest file or directory to plan; repeatable; - reads stdin
  -k, --kustomize DIR       kustomization directory, rendered in-process and planned
      --observed FILE       observed state to plan against: one cluster's, or a map of
                            "namespace/name" to observed states (see docs/cli.md)
  -o, --output FORMAT       table (default), json or markdown
      --detailed-exitcode   exit 0 without changes, 2 with changes, 1 on errors and blocked plans

Exit codes: 0 success, 1 error or blocked plan, 2 changes (with --detailed-exitcode).
`

// parsePlanFlags reads the flags of `plan`. Short and long names are the ones kubectl uses;
// one or two dashes both work. It returns flag.ErrHelp when help was asked for.
func parsePlanFlags(args []string) (planFlags, error) {
	var f planFlags
	fs := flag.NewFlagSet("kubectl-etcd plan", flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and help are printed by the caller
	addFile := func(v string) error { f.files = append(f.files, v); return nil }
	fs.Func("f", "", addFile)
	fs.Func("filename", "", addFile)
	fs.StringVar(&f.kustomize, "k", "", "")
	fs.StringVar(&f.kustomize, "kustomize", "", "")
	fs.StringVar(&f.observed, "observed", "", "")
	fs.StringVar(&f.output, "o", "table", "")
	fs.StringVar(&f.output, "output", "table", "")
	fs.BoolVar(&f.detailed, "detailed-exitcode", false, "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return f, err
		}
		return f, usageError(err.Error())
	}
	switch {
	case fs.NArg() > 0:
		return f, usageError(fmt.Sprintf("unexpected argument %q", fs.Arg(0)))
	case len(f.files) == 0 && f.kustomize == "":
		return f, usageError("one of -f or -k is required")
	case len(f.files) > 0 && f.kustomize != "":
		return f, usageError("-f and -k cannot be used together")
	case !slices.Contains(outputs, f.output):
		return f, usageError(fmt.Sprintf("-o %q: the output format is one of table, json, markdown", f.output))
	}
	return f, nil
}
