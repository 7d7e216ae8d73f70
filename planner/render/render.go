// Package render prints plans for humans (a table, Markdown for a pull-request comment) and
// for machines (JSON). It is pure like the planner: it writes to an io.Writer and nothing
// else, so the CLI, the operator and tests all render a plan the same way.
package render

import (
	"fmt"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/planner"
)

// Cluster is one cluster's plan with the name it is shown under ("namespace/name" or "name").
type Cluster struct {
	Name string
	Plan plan.Plan
	// Review, when set, puts a summary line and the steps' risks in the Markdown.
	Review *planner.Review
	// Approval, when set, says in the Markdown whether and how the plan is approved.
	Approval *Approval
	// Unknown, when set, says what the plan cannot know (planner.Observed.Stale, or
	// planner.Awaiting): the plan is then never shown as "No changes".
	Unknown string
}

// Approval is how a plan comes to run once its manifests are applied.
type Approval struct {
	// Needed: the plan waits for approval (spec.updateStrategy.approval Manual, a recovery
	// from quorum loss that spec.recovery does not let run alone, or a TLS switch before
	// members refuse plain-text clients).
	Needed bool
	// Annotation approves the plan when the manifest carries it ("key: value"); Given says
	// the manifest does.
	Annotation string
	Given      bool
	// Command approves the plan on the live cluster.
	Command string
	// At, when set, is the step the plan waits at for approval, running the steps before
	// it (the first step of a TLS switch that refuses plain-text clients); else it waits
	// before its first.
	At string
}

// Summary is the one-line state of a plan for `kubectl get`: "2/5 PromoteLearner" while
// the step at index current (counted from 0) runs, "5/5 Done" once all have run,
// "No changes" for an empty plan and "Blocked: <reason>" for a refused one.
func Summary(p plan.Plan, current int) string {
	n := len(p.Steps)
	switch {
	case p.Blocked != nil:
		return "Blocked: " + string(p.Blocked.Reason)
	case n == 0:
		return "No changes"
	case current >= n:
		return fmt.Sprintf("%d/%d Done", n, n)
	}
	current = max(current, 0)
	return fmt.Sprintf("%d/%d %s", current+1, n, p.Steps[current].Action)
}

// targetOrVersion is the column that says where a step goes: the new leader of a
// TransferLeadership, else the etcd version the member runs afterwards.
func targetOrVersion(s plan.Step) string {
	switch {
	case s.Target != "":
		return "-> " + s.Target
	case s.Version != "":
		return s.Version
	}
	return "-"
}

// precondition renders what a step waits for, with the member it concerns.
func precondition(p plan.Precondition) string {
	switch {
	case p.Kind == "" || p.Kind == plan.PreNone:
		return "-"
	case p.Member != "":
		return fmt.Sprintf("%s(%s)", p.Kind, p.Member)
	}
	return string(p.Kind)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// Steps says how many steps a plan has, in words: "1 step", "3 steps".
func Steps(n int) string {
	if n == 1 {
		return "1 step"
	}
	return fmt.Sprintf("%d steps", n)
}
