package argocd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/test/stack"
)

func scripts(t *testing.T) *Scripts {
	t.Helper()
	root, err := stack.RepoRoot()
	require.NoError(t, err)
	s, err := Load(root)
	require.NoError(t, err)
	return s
}

// fixture is an EtcdCluster as the operator left it in one phase of an e2e run
// (TestStatusInEveryPhase with ETCDPLAN_CAPTURE=test/argocd/testdata).
func fixture(t *testing.T, phase string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", phase+".json"))
	require.NoError(t, err)
	var obj map[string]any
	require.NoError(t, json.Unmarshal(b, &obj))
	return obj
}

// Argo CD's verdict in every phase; docs/gitops.md has the same table.
func TestHealthInEveryPhase(t *testing.T) {
	s := scripts(t)
	for phase, want := range map[string]string{
		"just-created":      "Progressing",
		"bootstrapping":     "Progressing",
		"ready":             "Healthy",
		"scaling":           "Progressing",
		"awaiting-approval": "Suspended",
		"suspended":         "Suspended",
		"blocked":           "Degraded",
		"stalled":           "Degraded",
		"deleting":          "Progressing",
	} {
		h, err := s.Health(fixture(t, phase))
		require.NoError(t, err, phase)
		require.Equal(t, want, h.Status, "%s: %s", phase, h.Message)
		require.NotEmpty(t, h.Message, phase)
	}
}

// The messages say what to do, not only what is.
func TestHealthMessages(t *testing.T) {
	s := scripts(t)
	h, err := s.Health(fixture(t, "awaiting-approval"))
	require.NoError(t, err)
	plan := fixture(t, "awaiting-approval")["status"].(map[string]any)["plan"].(map[string]any)["id"].(string)
	require.Contains(t, h.Message, "kubectl etcd approve demo --plan "+plan)
	h, err = s.Health(fixture(t, "blocked"))
	require.NoError(t, err)
	require.Contains(t, h.Message, "MinorVersionSkipped: ")
	h, err = s.Health(fixture(t, "stalled"))
	require.NoError(t, err)
	require.Contains(t, h.Message, "10s")
}

// A spec change the operator has not planned yet is Progressing, whatever the old status said.
func TestHealthWaitsForTheNewGeneration(t *testing.T) {
	s := scripts(t)
	obj := fixture(t, "ready")
	obj["metadata"].(map[string]any)["generation"] = obj["metadata"].(map[string]any)["generation"].(float64) + 1
	h, err := s.Health(obj)
	require.NoError(t, err)
	require.Equal(t, "Progressing", h.Status)
}

func TestActions(t *testing.T) {
	s := scripts(t)
	avail, err := s.Available(fixture(t, "awaiting-approval"))
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"approve": true, "suspend": true, "resume": false}, avail)
	avail, err = s.Available(fixture(t, "suspended"))
	require.NoError(t, err)
	require.Equal(t, map[string]bool{"approve": false, "suspend": false, "resume": true}, avail)

	obj := fixture(t, "awaiting-approval")
	out, err := s.Act("approve", obj)
	require.NoError(t, err)
	id := obj["status"].(map[string]any)["plan"].(map[string]any)["id"]
	require.Equal(t, id, out["metadata"].(map[string]any)["annotations"].(map[string]any)["etcdplan.io/approve"])

	_, err = s.Act("approve", fixture(t, "ready"))
	require.ErrorContains(t, err, "no plan awaits approval")

	out, err = s.Act("suspend", fixture(t, "ready"))
	require.NoError(t, err)
	require.Equal(t, true, out["spec"].(map[string]any)["suspend"])
	out, err = s.Act("resume", fixture(t, "suspended"))
	require.NoError(t, err)
	require.Equal(t, false, out["spec"].(map[string]any)["suspend"])
}

// Argo CD runs scripts without Lua's string, math, io and os libraries: a script that used
// them would fail there, so it must fail here.
func TestScriptsRunWithArgoCDsLibrariesOnly(t *testing.T) {
	for _, script := range []string{`return {status = string.upper("healthy")}`, `return {status = tostring(math.floor(1))}`, `io.write("x")`} {
		err := run(map[string]any{}, script, &Status{})
		require.Error(t, err, script)
	}
}
