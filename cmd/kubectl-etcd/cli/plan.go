package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/planner"
	"github.com/etcdplan/etcdplan/planner/render"
)

// plan runs `kubectl-etcd plan`: manifests in, one plan per EtcdCluster out.
func (c *CLI) plan(ctx context.Context, args []string) int {
	f, err := parsePlanFlags(args)
	if err != nil {
		return c.flagError(err, "plan", planHelp)
	}
	clusters, err := c.clusters(f)
	if err != nil {
		return c.fail(err)
	}
	src, err := source(f, clusters)
	if err != nil {
		return c.fail(err)
	}
	plans, observed, err := planAll(ctx, src, clusters)
	if err != nil {
		return c.fail(err)
	}
	if f.saveObserved != "" {
		if err := saveObserved(f.saveObserved, observed); err != nil {
			return c.fail(err)
		}
	}
	if err := write(c.Stdout, f.output, plans); err != nil {
		return c.fail(err)
	}
	return c.exitCode(plans, f.detailed)
}

// flagError answers a command line that asked for help or could not be read.
func (c *CLI) flagError(err error, command, help string) int {
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(c.Stdout, help)
		return ExitOK
	}
	fmt.Fprintf(c.Stderr, "error: %s\nRun \"kubectl-etcd %s -h\" for the flags.\n", err, command)
	return ExitError
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

// source is where observed states come from: the --observed file, else the live cluster.
func source(f planFlags, clusters []*v1alpha1.EtcdCluster) (ObservedSource, error) {
	if f.observed != "" {
		return OpenObservedFile(f.observed, clusters)
	}
	k, err := f.connect()
	if err != nil {
		return nil, fmt.Errorf("%w\n(to plan without a cluster, pass --observed FILE)", err)
	}
	return liveSource{k}, nil
}

// planAll plans each cluster against its observed state, in the order of the manifests.
// It returns the observed states too, by cluster key, for --save-observed.
func planAll(ctx context.Context, src ObservedSource, clusters []*v1alpha1.EtcdCluster) ([]render.Cluster, map[string]planner.Observed, error) {
	out := make([]render.Cluster, 0, len(clusters))
	observed := map[string]planner.Observed{}
	for _, ec := range clusters {
		o, generation, err := src.Observed(ctx, ec)
		if err != nil {
			return nil, nil, err
		}
		d := observe.Desired(ec)
		d.Generation = generation
		p := planner.Plan(d, o)
		review := planner.ReviewPlan(d, o, p)
		out = append(out, render.Cluster{Name: key(ec), Plan: p, Review: &review, Approval: approval(ec, p), Unknown: cmp.Or(o.Stale(), planner.Awaiting(d, o))})
		observed[key(ec)] = o
	}
	return out, observed, nil
}

// approval says whether the plan waits for approval once the manifest is applied, and how
// to give it: the operator's rule (executor/controller) read from the manifest's spec.
func approval(ec *v1alpha1.EtcdCluster, p plan.Plan) *render.Approval {
	recovery := slices.ContainsFunc(p.Steps, func(s plan.Step) bool { return s.Action.Recovers() })
	plainOff := slices.IndexFunc(p.Steps, func(s plan.Step) bool { return s.Why == plan.WhyClientPlainTextOff || s.Why == plan.WhyTLSOff })
	at := ""
	switch {
	case plainOff < 0 || ec.Spec.UpdateStrategy.Approval == v1alpha1.ApprovalManual:
	case p.Steps[plainOff].Why == plan.WhyTLSOff:
		at = fmt.Sprintf("step %d, the first of switching TLS off", plainOff+1)
	default:
		at = fmt.Sprintf("step %d, the first after which members refuse plain-text clients", plainOff+1)
	}
	ns := ""
	if ec.Namespace != "" {
		ns = " -n " + ec.Namespace
	}
	return &render.Approval{
		Needed:     ec.Spec.UpdateStrategy.Approval == v1alpha1.ApprovalManual || recovery && !ec.Spec.RecoveryApproved() || plainOff >= 0,
		At:         at,
		Annotation: fmt.Sprintf("%s: %q", v1alpha1.AnnotationApprove, p.ID),
		Given:      ec.Annotations[v1alpha1.AnnotationApprove] == p.ID,
		Command:    fmt.Sprintf("kubectl etcd approve %s%s --plan %s", ec.Name, ns, p.ID),
	}
}

// saveObserved writes observed states in the form --observed reads: a map by cluster key.
func saveObserved(path string, observed map[string]planner.Observed) error {
	data, err := json.MarshalIndent(observed, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
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

// exitCode is 1 when a plan is blocked or cannot know the membership (its message goes to
// stderr as well, since JSON and Markdown outputs are often piped away), 2 for changes with
// --detailed-exitcode.
func (c *CLI) exitCode(plans []render.Cluster, detailed bool) int {
	code := ExitOK
	for _, p := range plans {
		switch {
		case p.Plan.Blocked != nil:
			b := p.Plan.Blocked
			fmt.Fprintf(c.Stderr, "error: EtcdCluster %s: blocked (%s): %s\n", p.Name, b.Reason, b.Message)
			code = ExitError
		case p.Unknown != "":
			fmt.Fprintf(c.Stderr, "error: EtcdCluster %s: not known: %s\n", p.Name, p.Unknown)
			code = ExitError
		case len(p.Plan.Steps) > 0 && detailed && code == ExitOK:
			code = ExitChanges
		}
	}
	return code
}
