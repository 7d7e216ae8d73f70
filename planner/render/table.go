package render

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
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
	switch {
	case p.Blocked != nil:
		_, err := fmt.Fprintf(w, "EtcdCluster %s: blocked (%s)\n  %s\n", c.Name, p.Blocked.Reason, p.Blocked.Message)
		return err
	case len(p.Steps) == 0:
		_, err := fmt.Fprintf(w, "EtcdCluster %s: No changes. The cluster matches the spec.\n", c.Name)
		return err
	}
	if _, err := fmt.Fprintf(w, "EtcdCluster %s: plan %s, %s\n\n", c.Name, p.ID, steps(len(p.Steps))); err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tACTION\tMEMBER\tTARGET/VERSION\tPRECONDITION\tREASON")
	for i, s := range p.Steps {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", i+1, s.Action, orDash(s.Member),
			targetOrVersion(s), precondition(s.Precondition), oneLine(s.Reason))
	}
	return tw.Flush()
}

// oneLine keeps a cell on its row: tabs would split it, line breaks would end the row.
func oneLine(s string) string {
	return strings.NewReplacer("\t", " ", "\r\n", " ", "\n", " ").Replace(s)
}
