package planner

import (
	"testing"

	"github.com/etcdplan/etcdplan/api/plan"
)

// needsLinearizable keeps the older tests' name for the action's fact.
func needsLinearizable(a plan.Action) bool { return a.NeedsLinearizable() }

// TestLosesSaysWhatEachActionDeletes: the review words the data loss of exactly the actions
// that can delete data.
func TestLosesSaysWhatEachActionDeletes(t *testing.T) {
	for _, a := range plan.Actions {
		if got := loses(plan.Step{Action: a, Member: "c-0"}, Observed{}); (got != "") != (a.Deletes() != plan.DataNone) {
			t.Errorf("%s deletes %v, but the review says it loses %q", a, a.Deletes(), got)
		}
	}
}
