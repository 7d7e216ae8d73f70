package controller

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every reason an EtcdCluster can be Stalled for has a row in docs/operations.md, "Stalled
// reasons and what to do": each v1alpha1.StalledReason, and each plan.BlockReason that
// product code returns (those only reserved by the API are never shown).
func TestStalledReasonsHaveARunbook(t *testing.T) {
	reasons := typedConsts(t, "../../api/v1alpha1/reasons.go", "StalledReason")
	blocks := typedConsts(t, "../../api/plan/plan.go", "BlockReason")
	used := planIdentsIn(t, "../../planner", "../../executor")
	for name, value := range blocks {
		if used[name] {
			reasons[name] = value
		}
	}
	require.Contains(t, reasons, "ReasonProgressDeadlineExceeded")
	require.Contains(t, reasons, "BlockQuorumLost")

	doc, err := os.ReadFile("../../docs/operations.md")
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(doc), "### Stalled reasons and what to do")
	require.True(t, ok, "docs/operations.md has no section \"Stalled reasons and what to do\"")
	table, _, _ = strings.Cut(table, "\n## ")
	documented := map[string]bool{}
	for _, row := range strings.Split(table, "\n") {
		if cells := strings.Split(row, "|"); len(cells) > 2 {
			for _, m := range regexp.MustCompile("`([A-Za-z]+)`").FindAllStringSubmatch(cells[1], -1) {
				documented[m[1]] = true
			}
		}
	}
	for name, value := range reasons {
		require.True(t, documented[value], "%s (%q) has no row in docs/operations.md, \"Stalled reasons and what to do\"", name, value)
	}
}

// typedConsts are the constants of type typ declared in file: name to value.
func typedConsts(t *testing.T, file, typ string) map[string]string {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	require.NoError(t, err)
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != typ {
				continue
			}
			for i, name := range vs.Names {
				value, err := strconv.Unquote(vs.Values[i].(*ast.BasicLit).Value)
				require.NoError(t, err)
				out[name.Name] = value
			}
		}
	}
	require.NotEmpty(t, out, "no constants of type %s in %s", typ, file)
	return out
}

// planIdentsIn are the names product code (tests aside) under dirs uses as plan.Name.
func planIdentsIn(t *testing.T, dirs ...string) map[string]bool {
	used := map[string]bool{}
	for _, dir := range dirs {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				return err
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if sel, ok := n.(*ast.SelectorExpr); ok {
					if x, ok := sel.X.(*ast.Ident); ok && x.Name == "plan" {
						used[sel.Sel.Name] = true
					}
				}
				return true
			})
			return nil
		})
		require.NoError(t, err)
	}
	return used
}
