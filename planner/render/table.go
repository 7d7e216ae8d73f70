package render

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/etcdplan/etcdplan/api/plan"
)

// Table writes each cluster's plan as a heading line and an aligned table of its steps.
func Table(w io.Writer, clusters ...Cluster) error {
	for i, c := range clusters {
		if i > 0 {
			if _, err := fmt.Fprintln(w); err != nil {
				return err
			}
		}
		if err := table(w, c); err != nil {
			return err
		}
	}
	return nil
}

func table(w io.Writer, c Cluster) error {
	p := c.Plan
	for _, warning := range p.Warnings {
		if _, err := fmt.Fprintf(w, "Warning: EtcdCluster %s: %s\n", c.Name, OneLine(warning)); err != nil {
			return err
		}
	}
	switch {
	case p.Blocked != nil:
		_, err := fmt.Fprintf(w, "EtcdCluster %s: blocked (%s)\n  %s\n", c.Name, p.Blocked.Reason, p.Blocked.Message)
		return err
	case c.Unknown != "":
		if _, err := fmt.Fprintf(w, "EtcdCluster %s: not known: %s\n", c.Name, OneLine(c.Unknown)); err != nil || len(p.Steps) == 0 {
			return err
		}
		if _, err := fmt.Fprintln(w, "Only the steps that need no quorum's member list are planned:"); err != nil {
			return err
		}
	case len(p.Steps) == 0:
		_, err := fmt.Fprintf(w, "EtcdCluster %s: No changes. The cluster matches the spec.\n", c.Name)
		return err
	}
	if _, err := fmt.Fprintf(w, "EtcdCluster %s: plan %s, %s\n\n", c.Name, p.ID, Steps(len(p.Steps))); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tACTION\tMEMBER\tTARGET/VERSION\tPRECONDITION\tREASON")
	for i, s := range p.Steps {
		fmt.Fprintf(tw, "%d\t%s\t%s\n", i+1, strings.Join(StepCells(s), "\t"), OneLine(s.Reason))
	}
	return tw.Flush()
}

// OneLine keeps a table cell on its row: tabs would split it, line breaks would end the row.
func OneLine(s string) string {
	return strings.NewReplacer("\t", " ", "\r\n", " ", "\n", " ").Replace(s)
}

// StepCells are a step's ACTION, MEMBER, TARGET/VERSION and PRECONDITION cells, for tables
// that show steps with more columns (kubectl-etcd status adds their progress).
func StepCells(s plan.Step) []string {
	return []string{string(s.Action), orDash(s.Subject()), targetOrVersion(s), precondition(s.Precondition)}
}
