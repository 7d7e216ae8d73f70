package render

import (
	"fmt"
	"io"
	"strings"
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
	case len(p.Steps) == 0:
		b.WriteString("No changes.\n")
		return
	}
	fmt.Fprintf(b, "Plan `%s`, %s:\n\n", p.ID, Steps(len(p.Steps)))
	b.WriteString("| # | Action | Member | Target/Version | Precondition | Reason |\n")
	b.WriteString("|--:|--------|--------|----------------|--------------|--------|\n")
	for i, s := range p.Steps {
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s |\n", i+1, s.Action, cell(orDash(s.Member)),
			cell(targetOrVersion(s)), cell(precondition(s.Precondition)), cell(s.Reason))
	}
}

// cell escapes what would break a table row (pipes, line breaks) or be read as HTML.
func cell(s string) string {
	return strings.NewReplacer("|", `\|`, "<", "&lt;", "\r\n", " ", "\n", " ").Replace(s)
}
