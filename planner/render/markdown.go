package render

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/planner"
)

// Markdown writes the plans as a pull-request comment: a heading per cluster, then the
// steps as a table, a warning when the planner refused, or "No changes.".
func Markdown(w io.Writer, clusters ...Cluster) error {
	var b strings.Builder
	for i, c := range clusters {
		if i > 0 {
			b.WriteString("\n")
		}
		markdown(&b, c)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func markdown(b *strings.Builder, c Cluster) {
	p := c.Plan
	fmt.Fprintf(b, "### EtcdCluster `%s`\n\n", c.Name)
	for _, w := range p.Warnings {
		fmt.Fprintf(b, "> [!NOTE]\n> %s\n\n", cell(w))
	}
	switch {
	case p.Blocked != nil:
		// GitHub shows this quote as a warning box; other renderers show a plain quote.
		fmt.Fprintf(b, "> [!WARNING]\n> **Blocked: %s.** %s\n", p.Blocked.Reason, cell(p.Blocked.Message))
		return
	case c.Unknown != "":
		fmt.Fprintf(b, "> [!WARNING]\n> **Not known.** %s\n\n", cell(c.Unknown))
		if len(p.Steps) == 0 {
			return
		}
	case len(p.Steps) == 0:
		b.WriteString("No changes.\n")
		return
	}
	if c.Review != nil {
		fmt.Fprintf(b, "%s\n\n", summaryLine(p, *c.Review))
	} else {
		fmt.Fprintf(b, "Plan `%s`, %s:\n\n", p.ID, Steps(len(p.Steps)))
	}
	b.WriteString("| # | Action | Member | Target/Version | Precondition | Reason |\n")
	b.WriteString("|--:|--------|--------|----------------|--------------|--------|\n")
	for i, s := range p.Steps {
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s |\n", i+1, s.Action, cell(orDash(s.Subject())),
			cell(targetOrVersion(s)), cell(precondition(s.Precondition)), cell(s.Reason))
	}
	if c.Review != nil {
		risks(b, p, *c.Review)
	}
	if c.Approval != nil {
		approval(b, *c.Approval)
	}
}

// summaryLine says in one line what the plan changes: its size, the voters before and
// after, and the members that join, leave, restart, stop or are defragmented.
func summaryLine(p plan.Plan, r planner.Review) string {
	voters := fmt.Sprintf("%d voters", r.VotersAfter)
	if r.VotersBefore != r.VotersAfter {
		voters = fmt.Sprintf("%d -> %d voters", r.VotersBefore, r.VotersAfter)
	}
	line := fmt.Sprintf("**Plan `%s`: %s, %s.**", p.ID, Steps(len(p.Steps)), voters)
	for _, g := range plan.Groups {
		var names []string
		for _, s := range p.Steps {
			if s.Action.Group() == g && !slices.Contains(names, s.Member) {
				names = append(names, s.Member)
			}
		}
		if len(names) > 0 {
			line += fmt.Sprintf(" %s: %s.", g, cell(strings.Join(names, ", ")))
		}
	}
	return line
}

// risks lists the steps that take a member out of service or leave no voter to spare (a
// warning), and those that delete or may lose data (a caution).
func risks(b *strings.Builder, p plan.Plan, r planner.Review) {
	var warn, caution []string
	for i, s := range p.Steps {
		k := r.Steps[i]
		step := fmt.Sprintf("Step %d (%s %s)", i+1, s.Action, cell(s.Subject()))
		if k.Disrupts || k.Budget {
			warn = append(warn, step+": "+disruption(s, k))
		}
		if k.Loses != "" {
			caution = append(caution, step+" "+cell(k.Loses)+".")
		}
	}
	alert(b, "WARNING", warn)
	alert(b, "CAUTION", caution)
}

// disruption says what a step takes out of service and how close it comes to quorum.
func disruption(s plan.Step, k planner.Risk) string {
	var out string
	if k.Disrupts {
		out = map[plan.Group]string{
			plan.GroupLeaving:       "%s stops serving as it leaves",
			plan.GroupDefragmenting: "%s serves nothing while it is defragmented",
			plan.GroupStopping:      "%s stops",
		}[s.Action.Group()]
		if out == "" {
			out = "%s restarts (its clients reconnect to other members)"
		}
		out = fmt.Sprintf(out, cell(s.Subject()))
	}
	if k.Budget {
		if out != "" {
			out += ", and "
		}
		if k.Spare() < 0 {
			out += fmt.Sprintf("only %d of %d voters answer, below quorum: the cluster takes no writes meanwhile", k.Up, k.Voters)
		} else {
			out += fmt.Sprintf("%d of %d voters answer, just a quorum: one more failure stops writes", k.Up, k.Voters)
		}
	}
	return out + "."
}

// alert writes items as a GitHub alert (a quote elsewhere), one bullet each.
func alert(b *strings.Builder, kind string, items []string) {
	if len(items) == 0 {
		return
	}
	fmt.Fprintf(b, "\n> [!%s]\n", kind)
	for _, it := range items {
		fmt.Fprintf(b, "> - %s\n", it)
	}
}

// approval says whether the plan waits for approval, and how to give it in the pull
// request or on the live cluster.
func approval(b *strings.Builder, a Approval) {
	switch {
	case !a.Needed:
		b.WriteString("\n**Approval:** none needed: the operator runs the plan once the change is applied.\n")
	case a.Given:
		fmt.Fprintf(b, "\n**Approval:** given in this change (`%s`): the operator runs the plan once the change is applied, "+
			"if the cluster has not moved meanwhile.\n", a.Annotation)
	default:
		runs := "the plan runs only once approved"
		if a.At != "" {
			runs = "the plan runs up to " + a.At + ", which waits for approval"
		}
		fmt.Fprintf(b, "\n**Approval:** %s: in this change, with the annotation `%s` on the EtcdCluster, "+
			"or after it is applied, with:\n\n```sh\n%s\n```\n", runs, a.Annotation, a.Command)
	}
}

// cell escapes what would break a table row (pipes, line breaks) or be read as HTML.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", "\r\n", " ", "\n", " ").Replace(s)
}
