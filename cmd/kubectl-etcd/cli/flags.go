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

// parsePlanFlags reads the flags of `plan`. Short and long names are the ones kubectl uses.
// It returns flag.ErrHelp when help was asked for.
func parsePlanFlags(args []string, stderr io.Writer) (planFlags, error) {
	var f planFlags
	fs := flag.NewFlagSet("kubectl-etcd plan", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addFile := func(v string) error { f.files = append(f.files, v); return nil }
	fs.Func("f", "manifest file or directory to plan; repeatable; - reads stdin", addFile)
	fs.Func("filename", "same as -f", addFile)
	fs.StringVar(&f.kustomize, "k", "", "kustomization directory to render and plan")
	fs.StringVar(&f.kustomize, "kustomize", "", "same as -k")
	fs.StringVar(&f.observed, "observed", "", "observed state to plan against (JSON; see docs/cli.md)")
	fs.StringVar(&f.output, "o", "table", "output format: table, json or markdown")
	fs.StringVar(&f.output, "output", "table", "same as -o")
	fs.BoolVar(&f.detailed, "detailed-exitcode", false, "exit 0 with no changes, 1 on error, 2 with changes")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: kubectl-etcd plan (-f FILE | -k DIR) --observed OBSERVED.json [-o table|json|markdown] [--detailed-exitcode]\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return f, err
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

// isHelp reports whether parsing stopped because help was asked for.
func isHelp(err error) bool { return errors.Is(err, flag.ErrHelp) }
