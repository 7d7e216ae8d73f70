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
	kubeFlags
	files        []string
	kustomize    string
	observed     string
	saveObserved string
	output       string
	detailed     bool
}

var outputs = []string{"table", "json", "markdown"}

const planHelp = `Print the plan for every EtcdCluster in the manifests, against its observed state: the live
cluster's (read through the Kubernetes API), or a saved one with --observed.

Usage:
  kubectl-etcd plan (-f FILE | -k DIR) [--observed OBSERVED.json] [-o table|json|markdown] [--detailed-exitcode]

Flags:
  -f, --filename FILE       manifest file or directory to plan; repeatable; - reads stdin
  -k, --kustomize DIR       kustomization directory, rendered in-process and planned
      --observed FILE       plan offline against this observed state: one cluster's, or a map
                            of "namespace/name" to observed states (see docs/cli.md)
      --save-observed FILE  also write the observed states planned against to FILE, in the
                            form --observed reads
  -o, --output FORMAT       table (default), json or markdown
      --detailed-exitcode   exit 0 without changes, 2 with changes, 1 on errors and blocked plans
` + kubeFlagsHelp + `
Exit codes: 0 success, 1 error or blocked plan, 2 changes (with --detailed-exitcode).
`

// parsePlanFlags reads the flags of `plan`. Short and long names are the ones kubectl uses;
// one or two dashes both work. It returns flag.ErrHelp when help was asked for.
func parsePlanFlags(args []string) (planFlags, error) {
	var f planFlags
	fs := newFlagSet("plan")
	addFile := func(v string) error { f.files = append(f.files, v); return nil }
	fs.Func("f", "", addFile)
	fs.Func("filename", "", addFile)
	fs.StringVar(&f.kustomize, "k", "", "")
	fs.StringVar(&f.kustomize, "kustomize", "", "")
	fs.StringVar(&f.observed, "observed", "", "")
	fs.StringVar(&f.saveObserved, "save-observed", "", "")
	fs.StringVar(&f.output, "o", "table", "")
	fs.StringVar(&f.output, "output", "table", "")
	fs.BoolVar(&f.detailed, "detailed-exitcode", false, "")
	f.kubeFlags.add(fs)
	args, err := parse(fs, args)
	switch {
	case err != nil:
		return f, err
	case len(args) > 0:
		return f, usageError(fmt.Sprintf("unexpected argument %q", args[0]))
	case len(f.files) == 0 && f.kustomize == "":
		return f, usageError("one of -f or -k is required")
	case len(f.files) > 0 && f.kustomize != "":
		return f, usageError("-f and -k cannot be used together")
	case !slices.Contains(outputs, f.output):
		return f, usageError(fmt.Sprintf("-o %q: the output format is one of table, json, markdown", f.output))
	}
	return f, nil
}

func newFlagSet(command string) *flag.FlagSet {
	fs := flag.NewFlagSet("kubectl-etcd "+command, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // errors and help are printed by the caller
	return fs
}

// parse reads flags placed before, between or after the arguments, as kubectl allows
// (`approve demo --plan ID`), and returns the arguments.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError(err.Error())
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		if i := len(args) - fs.NArg(); i > 0 && args[i-1] == "--" {
			rest := fs.Args()
			return append(positional, rest...), nil // all that follows -- is arguments
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// parseName reads the command line of a command about one cluster: flags and its name.
func parseName(fs *flag.FlagSet, args []string) (string, error) {
	args, err := parse(fs, args)
	if err != nil {
		return "", err
	}
	switch len(args) {
	case 0:
		return "", usageError("the EtcdCluster's name is required")
	case 1:
		return args[0], nil
	}
	return "", usageError(fmt.Sprintf("unexpected argument %q: one EtcdCluster at a time", args[1]))
}
