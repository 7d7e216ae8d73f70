package planner

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
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
