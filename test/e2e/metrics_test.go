package e2e

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/test/framework"
)

// metricsAddr is a free local address for an operator's metrics endpoint.
func metricsAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// alertMetrics are the metric names the alerts and the Grafana dashboard read.
func alertMetrics(t *testing.T) []string {
	t.Helper()
	re := regexp.MustCompile(`\b(etcdplan|etcd)_[a-z_]*[a-z]\b`)
	var out []string
	for _, f := range []string{"kustomize/components/monitoring/prometheusrule.yaml", "examples/grafana/etcdplan-dashboard.json"} {
		raw, err := os.ReadFile(filepath.Join(framework.Env.Root, f))
		require.NoError(t, err)
		out = append(out, re.FindAllString(string(raw), -1)...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// requireAlertMetrics: an operator and a member serve every metric the alerts and the
// dashboard read, so none of them watches a name nothing exports.
func requireAlertMetrics(t *testing.T, served ...string) {
	t.Helper()
	names := map[string]bool{}
	for _, text := range served {
		for _, line := range strings.Split(text, "\n") {
			if line != "" && !strings.HasPrefix(line, "#") {
				names[strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]] = true
			}
		}
	}
	want := alertMetrics(t)
	require.Greater(t, len(want), 10)
	for _, n := range want {
		require.True(t, names[n], "the alerts or the dashboard read %s, which neither the operator nor etcd serves", n)
	}
}
