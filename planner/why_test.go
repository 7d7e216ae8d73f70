package planner

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/plan"
)

// Every reason code is given by some rule: a code no step can carry is dropped. That every
// step carries a known code is checked as plans run in the simulator (world.apply) and by
// FuzzPlan.
func TestEveryReasonCodeIsGiven(t *testing.T) {
	used := map[plan.Why]bool{}
	files, err := os.ReadDir(".")
	require.NoError(t, err)
	for _, e := range files {
		if !strings.HasSuffix(e.Name(), ".go") || strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), e.Name(), nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && strings.HasPrefix(sel.Sel.Name, "Why") {
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "plan" {
					used[plan.Why(strings.TrimPrefix(sel.Sel.Name, "Why"))] = true
				}
			}
			return true
		})
	}
	for _, w := range plan.Whys {
		require.True(t, used[w], "no rule gives reason code %s", w)
	}
}

// A plan's ID hashes its reasons' codes, not their words, and its blocker's reason, not its
// message: rewording either keeps the ID, and the approval given to it.
func TestPlanIDHashesReasonCodes(t *testing.T) {
	c := cluster(5, "3.6.16")
	p := Plan(c, running(c, 3, "3.6.16").observe())
	require.NotEmpty(t, p.Steps)
	reworded := clonePlan(p)
	reworded.Steps[0].Reason = "reworded"
	reworded.Warnings = append(reworded.Warnings, "a new warning")
	require.Equal(t, p.ID, PlanID(reworded))

	recoded := clonePlan(p)
	recoded.Steps[0].Why = plan.WhyReplacement
	require.NotEqual(t, p.ID, PlanID(recoded))

	blocked := plan.Plan{Generation: 1, Blocked: &plan.Blocker{Reason: plan.BlockQuorumLost, Message: "one way"}}
	id := PlanID(blocked)
	blocked.Blocked = &plan.Blocker{Reason: plan.BlockQuorumLost, Message: "another way"}
	require.Equal(t, id, PlanID(blocked))
	blocked.Blocked.Reason = plan.BlockCorrupt
	require.NotEqual(t, id, PlanID(blocked))
}

// A plan recorded in status by a version whose steps had no reason code (formatVersion 1)
// is read, and followed while the fresh plan words its steps the same: its steps finish one
// by one. A step the fresh plan words otherwise supersedes it, as any differing step does.
func TestPlanOfFormatVersion1IsFollowed(t *testing.T) {
	c := cluster(5, "3.6.16")
	fresh := Plan(c, running(c, 3, "3.6.16").observe())
	v1 := recordedV1(t, fresh)
	require.Equal(t, 1, v1.FormatVersion)
	for _, s := range v1.Steps {
		require.Empty(t, s.Why)
	}

	k, ok := DoneUpTo(v1.Steps, 0, fresh)
	require.True(t, ok)
	require.Equal(t, 0, k)
	k, ok = DoneUpTo(v1.Steps, 0, plan.Plan{Steps: fresh.Steps[2:]})
	require.True(t, ok)
	require.Equal(t, 2, k, "two steps took effect")

	v1.Steps[1].Reason = "an older wording"
	_, ok = DoneUpTo(v1.Steps, 0, fresh)
	require.False(t, ok, "a step worded otherwise is superseded")
}

// recordedV1 returns p as formatVersion 1 recorded it: no reason codes.
func recordedV1(t *testing.T, p plan.Plan) plan.Plan {
	b, err := json.Marshal(p)
	require.NoError(t, err)
	var doc map[string]any
	require.NoError(t, json.Unmarshal(b, &doc))
	doc["formatVersion"] = 1
	for _, s := range doc["steps"].([]any) {
		delete(s.(map[string]any), "why")
	}
	b, err = json.Marshal(doc)
	require.NoError(t, err)
	var out plan.Plan
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

func clonePlan(p plan.Plan) plan.Plan {
	p.Steps, p.Warnings = slices.Clone(p.Steps), slices.Clone(p.Warnings)
	return p
}
