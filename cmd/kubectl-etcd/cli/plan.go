package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/planner"
	"github.com/etcdplan/etcdplan/planner/render"
)

// plan runs `kubectl-etcd plan`: manifests in, one plan per EtcdCluster out.
func (c *CLI) plan(ctx context.Context, args []string) int {
	f, err := parsePlanFlags(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(c.Stdout, planHelp)
		return ExitOK
	case err != nil:
		fmt.Fprintf(c.Stderr, "error: %s\nRun \"kubectl-etcd plan -h\" for the flags.\n", err)
		return ExitError
	}
	clusters, err := c.clusters(f)
	if err != nil {
		return c.fail(err)
	}
	src, err := c.source(ctx, f.observed, clusters)
	if err != nil {
		return c.fail(err)
	}
	plans, err := planAll(ctx, src, clusters)
	if err != nil {
		return c.fail(err)
	}
	if err := write(c.Stdout, f.output, plans); err != nil {
		return c.fail(err)
	}
	return c.exitCode(plans, f.detailed)
}

// clusters reads the EtcdClusters of the files or the kustomization named by the flags.
func (c *CLI) clusters(f planFlags) ([]*v1alpha1.EtcdCluster, error) {
	var docs []document
	var err error
	if f.kustomize != "" {
		docs, err = kustomize(f.kustomize)
	} else {
		docs, err = readFiles(f.files, c.Stdin)
	}
	if err != nil {
		return nil, err
	}
	return etcdClusters(docs)
}

// source is where observed states come from: the --observed file, else the live clusters.
func (c *CLI) source(ctx context.Context, path string, clusters []*v1alpha1.EtcdCluster) (ObservedSource, error) {
	if path != "" {
		return OpenObservedFile(path, clusters)
	}
	if c.Live == nil {
		return nil, errors.New("--observed is required: planning against the live cluster is not available yet")
	}
	return c.Live(ctx)
}

// planAll plans each cluster against its observed state, in the order of the manifests.
func planAll(ctx context.Context, src ObservedSource, clusters []*v1alpha1.EtcdCluster) ([]render.Cluster, error) {
	out := make([]render.Cluster, 0, len(clusters))
	for _, ec := range clusters {
		o, err := src.Observed(ctx, ec)
		if err != nil {
			return nil, err
		}
		out = append(out, render.Cluster{Name: key(ec), Plan: planner.Plan(observe.Desired(ec), o)})
	}
	return out, nil
}

func write(w io.Writer, format string, plans []render.Cluster) error {
	switch format {
	case "json":
		return render.JSON(w, plans...)
	case "markdown":
		return render.Markdown(w, plans...)
	}
	return render.Table(w, plans...)
}

// exitCode is 1 when a plan is blocked (its message goes to stderr as well, since JSON
// and Markdown outputs are often piped away), 2 for changes with --detailed-exitcode.
func (c *CLI) exitCode(plans []render.Cluster, detailed bool) int {
	code := ExitOK
	for _, p := range plans {
		switch {
		case p.Plan.Blocked != nil:
			b := p.Plan.Blocked
			fmt.Fprintf(c.Stderr, "error: EtcdCluster %s: blocked (%s): %s\n", p.Name, b.Reason, b.Message)
			code = ExitError
		case len(p.Plan.Steps) > 0 && detailed && code == ExitOK:
			code = ExitChanges
		}
	}
	return code
}
