package cli

import (
	"flag"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func exampleCluster(t *testing.T) *v1alpha1.EtcdCluster {
	t.Helper()
	docs, err := readFiles([]string{basic}, nil)
	require.NoError(t, err)
	cs, err := etcdClusters(docs)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	return cs[0]
}

func observedExamples(t *testing.T) []string {
	files, err := filepath.Glob(examples + "observed/*.json")
	require.NoError(t, err)
	require.NotEmpty(t, files)
	return files
}

// The example observed states describe Pods made from examples/basic: their config hash is
// the spec's, so only the difference each file is about shows up in its plan.
func TestExampleObservedStatesMatchTheSpec(t *testing.T) {
	c := exampleCluster(t)
	for _, file := range observedExamples(t) {
		src, err := OpenObservedFile(file, []*v1alpha1.EtcdCluster{c})
		require.NoError(t, err, file)
		o, _, err := src.Observed(t.Context(), c)
		require.NoError(t, err)
		for _, m := range o.Members {
			if m.Pod != nil {
				require.Equal(t, c.Spec.ConfigHash(), m.Pod.ConfigHash,
					"%s: %s: configHash is not that of %s; set it to the value expected here", file, m.Name, basic)
			}
		}
	}
}

// The plans of the examples, as `make demo` prints them; -update rewrites the golden file.
func TestExamplePlans(t *testing.T) {
	var out strings.Builder
	for _, manifests := range [][]string{{"-f", basic}, {"-k", examples + "scale-out"}} {
		for _, file := range observedExamples(t) {
			args := append([]string{"plan"}, manifests...)
			r := run(t, "", append(args, "--observed", file, "--detailed-exitcode")...)
			out.WriteString("$ kubectl-etcd " + strings.Join(args, " ") + " --observed " + filepath.Base(file) + "\n")
			out.WriteString(r.stdout + r.stderr)
			out.WriteString("exit " + strconv.Itoa(r.code) + "\n\n")
		}
	}
	golden(t, "testdata/examples.golden", out.String())
}

// golden compares got with the file at path; -update rewrites the file.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "go test ./cmd/kubectl-etcd/cli -update creates it")
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s differs (-want +got; -update rewrites it):\n%s", path, diff)
	}
}
