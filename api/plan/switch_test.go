package plan

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// switches are the switches over actions outside this package, by file and function. Those
// marked true do something of their own per action and must name every one: a new action
// fails here until each decides it. The others word or count only some actions.
var switches = map[string]bool{
	"executor/controller/steps.go effect":   true,  // what the executor does
	"executor/controller/status.go hint":    true,  // what to look at when the step stalls
	"planner/model.go apply":                true,  // what the planner foresees the step does
	"planner/sim_test.go apply":             true,  // what the simulated cluster does
	"planner/review.go loses":               false, // the data lost, per Deletes (TestLosesSaysWhatEachActionDeletes)
	"test/bench/bench_test.go waits":        false, // which effects wait on Pods, for benchmarks
	"test/bench/quorum_test.go quorumMarks": false, // the moments of a recovery, for benchmarks
}

// TestSwitchesOverActions finds every switch with a case of an action in the repository and
// holds it to the list above.
func TestSwitchesOverActions(t *testing.T) {
	found := casesByFunction(t, "../..")
	for key, cases := range found {
		every, known := switches[key]
		if !known {
			t.Errorf("%s switches over actions: add it to switches, saying whether it must name every action", key)
		}
		for _, a := range Actions {
			if every && !slices.Contains(cases, a) {
				t.Errorf("%s has no case for %s", key, a)
			}
		}
	}
	for key := range switches {
		if _, ok := found[key]; !ok {
			t.Errorf("%s switches over no action: it moved, update switches", key)
		}
	}
}

// casesByFunction returns the actions named by the cases of switches in each function
// ("file function") of the Go files under root, this package aside.
func casesByFunction(t *testing.T, root string) map[string][]Action {
	found := map[string][]Action{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		switch {
		case d.IsDir() && (rel == "bin" || rel == "api/plan" || rel != "." && strings.HasPrefix(d.Name(), ".")):
			return fs.SkipDir // built tools, this package, git
		case d.IsDir() || !strings.HasSuffix(rel, ".go"):
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		for _, fn := range fileFuncs(f) {
			if cases := actionCases(fn.Body); len(cases) > 0 {
				found[rel+" "+fn.Name.Name] = append(found[rel+" "+fn.Name.Name], cases...)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// fileFuncs returns the functions of a parsed file that have a body.
func fileFuncs(f *ast.File) []*ast.FuncDecl {
	var fns []*ast.FuncDecl
	for _, decl := range f.Decls {
		if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil {
			fns = append(fns, fn)
		}
	}
	return fns
}

// actionCases returns the actions named as plan.X in the case clauses under n.
func actionCases(n ast.Node) []Action {
	var cases []Action
	ast.Inspect(n, func(n ast.Node) bool {
		cc, ok := n.(*ast.CaseClause)
		if !ok {
			return true
		}
		for _, e := range cc.List {
			if sel, ok := e.(*ast.SelectorExpr); ok && isPlan(sel.X) && slices.Contains(Actions, Action(sel.Sel.Name)) {
				cases = append(cases, Action(sel.Sel.Name))
			}
		}
		return true
	})
	return cases
}

func isPlan(e ast.Expr) bool {
	x, ok := e.(*ast.Ident)
	return ok && x.Name == "plan"
}
