// Package promrules tests kustomize/components/monitoring's alerts with Prometheus's rule
// engine (the code Prometheus and promtool run them with) on series that describe each
// situation, and checks that the Grafana dashboard's queries parse.
package promrules

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/prometheus/prometheus/promql/promqltest"
	"github.com/prometheus/prometheus/rules"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

const (
	ruleFile  = "../../../kustomize/components/monitoring/prometheusrule.yaml"
	dashboard = "../../../examples/grafana/etcdplan-dashboard.json"
)

var promql_ = parser.NewParser(parser.Options{})

// loadRules reads the PrometheusRule's groups and validates them as Prometheus does.
func loadRules(t *testing.T) map[string]rulefmt.Rule {
	t.Helper()
	raw, err := os.ReadFile(ruleFile)
	require.NoError(t, err)
	var pr struct {
		Spec json.RawMessage `json:"spec"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &pr))
	groups, err := yaml.JSONToYAML(pr.Spec)
	require.NoError(t, err)
	rgs, errs := rulefmt.Parse(groups, false, model.UTF8Validation, promql_, nil)
	require.Empty(t, errs)
	out := map[string]rulefmt.Rule{}
	for _, g := range rgs.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r
		}
	}
	return out
}

// firing evaluates an alert every 30 s from 0 to end on the series and returns the labels
// of the alerts firing at end, with their annotations expanded.
func firing(t *testing.T, r rulefmt.Rule, series string, end time.Duration) []map[string]string {
	t.Helper()
	st := promqltest.LoadedStorage(t, "load 30s\n"+series)
	eng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: time.Minute, LookbackDelta: 5 * time.Minute, Parser: promql_})
	expr, err := promql_.ParseExpr(r.Expr)
	require.NoError(t, err)
	rule := rules.NewAlertingRule(r.Alert, expr, time.Duration(r.For), 0, labels.FromMap(r.Labels), labels.FromMap(r.Annotations),
		labels.EmptyLabels(), "", true, nil)
	for ts := time.Unix(0, 0); !ts.After(time.Unix(0, 0).Add(end)); ts = ts.Add(30 * time.Second) {
		_, err := rule.Eval(context.Background(), 0, ts, rules.EngineQueryFunc(eng, st), nil, 0)
		require.NoError(t, err)
	}
	var out []map[string]string
	for _, a := range rule.ActiveAlerts() {
		if a.State != rules.StateFiring {
			continue
		}
		a.Annotations.Range(func(l labels.Label) {
			require.NotContains(t, l.Value, "error expanding template", "%s's %s", r.Alert, l.Name)
		})
		m := a.Labels.Map()
		m["summary"] = a.Annotations.Get("summary")
		out = append(out, m)
	}
	return out
}

func TestAlertsFireWhenTheyShould(t *testing.T) {
	all := loadRules(t)
	untested := maps.Clone(all)
	defer func() { require.Empty(t, slices.Collect(maps.Keys(untested)), "alerts without a case here") }()
	day := 24 * 3600
	for _, tc := range []struct {
		alert  string
		series string
		end    time.Duration
		want   []string // "namespace/cluster: summary" of the alerts firing at end
	}{
		{"EtcdClusterQuorumLost", `etcdplan_cluster_failures_tolerated{namespace="a",cluster="lost"} -1x10
etcdplan_cluster_failures_tolerated{namespace="a",cluster="fine"} 1x10`, 2 * time.Minute,
			[]string{"a/lost: EtcdCluster a/lost has lost quorum"}},
		{"EtcdClusterQuorumLost", `etcdplan_cluster_failures_tolerated{namespace="a",cluster="blip"} -1 1x10`, 2 * time.Minute, nil},
		{"EtcdClusterQuorumAtRisk", `etcdplan_cluster_failures_tolerated{namespace="a",cluster="three"} 0x20
etcdplan_cluster_replicas{namespace="a",cluster="three"} 3x20
etcdplan_cluster_failures_tolerated{namespace="a",cluster="one"} 0x20
etcdplan_cluster_replicas{namespace="a",cluster="one"} 1x20
etcdplan_cluster_failures_tolerated{namespace="a",cluster="five"} 1x20
etcdplan_cluster_replicas{namespace="a",cluster="five"} 5x20`, 6 * time.Minute,
			[]string{"a/three: EtcdCluster a/three has no voter to spare"}},
		{"EtcdMemberDown", `etcdplan_cluster_voters{namespace="a",cluster="demo"} 3x10
etcdplan_cluster_voters_healthy{namespace="a",cluster="demo"} 2x10`, 4 * time.Minute,
			[]string{"a/demo: EtcdCluster a/demo has 1 unhealthy voter(s)"}},
		{"EtcdMemberDown", `etcdplan_cluster_voters{namespace="a",cluster="demo"} 3x10
etcdplan_cluster_voters_healthy{namespace="a",cluster="demo"} 2 2 3x8`, 4 * time.Minute, nil},
		{"EtcdClusterPlanStalled", `etcdplan_cluster_condition{namespace="a",cluster="demo",type="Stalled",status="True",reason="ProgressDeadlineExceeded"} 1x10
etcdplan_cluster_condition{namespace="a",cluster="ok",type="Stalled",status="False",reason="Converged"} 1x10`, 2 * time.Minute,
			[]string{"a/demo: EtcdCluster a/demo is stalled (ProgressDeadlineExceeded)"}},
		{"EtcdClusterNoSpace", `etcdplan_cluster_alarms{namespace="a",cluster="full",alarm="NOSPACE"} 1x10
etcdplan_cluster_alarms{namespace="a",cluster="bad",alarm="CORRUPT"} 1x10`, 2 * time.Minute,
			[]string{"a/full: EtcdCluster a/full is out of space (NOSPACE)"}},
		{"EtcdClusterCorrupt", `etcdplan_cluster_alarms{namespace="a",cluster="bad",alarm="CORRUPT"} 1`, 0,
			[]string{"a/bad: EtcdCluster a/bad raised a CORRUPT alarm"}},
		{"EtcdDatabaseNearQuota", `etcd_mvcc_db_total_size_in_bytes{namespace="a",cluster="demo",member="demo-1"} 1800x30
etcd_server_quota_backend_bytes{namespace="a",cluster="demo",member="demo-1"} 2000x30
etcd_mvcc_db_total_size_in_bytes{namespace="a",cluster="demo",member="demo-2"} 1000x30
etcd_server_quota_backend_bytes{namespace="a",cluster="demo",member="demo-2"} 2000x30`, 11 * time.Minute,
			[]string{"a/demo: etcd member demo-1 of a/demo uses 90% of its quota"}},
		// At 26 h, one backup is a day old and one is an hour old; a scheduled cluster has none.
		{"EtcdClusterBackupTooOld", strings.Join([]string{
			`etcdplan_cluster_last_backup_timestamp_seconds{namespace="a",cluster="stale"} 0+0x3200`,
			`etcdplan_cluster_last_backup_timestamp_seconds{namespace="a",cluster="fresh"} ` + itoa(day+3600) + `+0x3200`,
		}, "\n"), time.Duration(day+2*3600) * time.Second,
			[]string{"a/stale: EtcdCluster a/stale has no successful backup of the last 25 hours"}},
		// "due" renews at 0 and ends at 120: it has a tenth of its life left (36 s) from 84 s
		// on, and fires 5 minutes later; "fine" renews at 6000; "user" has no renewal and ends
		// in a day (within a week: fires).
		{"EtcdCertificateExpiresSoon", `etcdplan_cluster_certificate_expiry_timestamp_seconds{namespace="a",cluster="demo",secret="due"} 120x20
etcdplan_cluster_certificate_renew_timestamp_seconds{namespace="a",cluster="demo",secret="due"} 0x20
etcdplan_cluster_certificate_expiry_timestamp_seconds{namespace="a",cluster="demo",secret="fine"} 9000x20
etcdplan_cluster_certificate_renew_timestamp_seconds{namespace="a",cluster="demo",secret="fine"} 6000x20
etcdplan_cluster_certificate_expiry_timestamp_seconds{namespace="a",cluster="demo",secret="user"} 86400x20
etcdplan_cluster_certificate_expiry_timestamp_seconds{namespace="a",cluster="demo",secret="later"} 9999999x20`, 7 * time.Minute,
			[]string{"a/demo: The certificate in Secret due of EtcdCluster a/demo expires soon",
				"a/demo: The certificate in Secret user of EtcdCluster a/demo expires soon"}},
		{"EtcdplanMetricsUnreadable", `etcdplan_cluster_metrics_errors 0x10 1x30`, 16 * time.Minute,
			[]string{"/: The etcdplan operator cannot read the EtcdClusters it reports on"}},
	} {
		delete(untested, tc.alert)
		t.Run(tc.alert, func(t *testing.T) {
			r, ok := all[tc.alert]
			require.True(t, ok, "no alert %s in %s", tc.alert, ruleFile)
			var got []string
			for _, a := range firing(t, r, tc.series, tc.end) {
				got = append(got, a["namespace"]+"/"+a["cluster"]+": "+a["summary"])
				require.NotEmpty(t, a["severity"])
			}
			slices.Sort(got)
			require.Equal(t, tc.want, got)
		})
	}
}

func itoa(n int) string { return model.SampleValue(n).String() }

// Every query of the dashboard parses, with its variables given values as Grafana would.
func TestDashboardQueriesParse(t *testing.T) {
	raw, err := os.ReadFile(dashboard)
	require.NoError(t, err)
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(raw, &d))
	require.NotEmpty(t, d.Panels)
	vars := strings.NewReplacer("$namespace", ".*", "$cluster", ".*")
	for _, p := range d.Panels {
		require.NotEmpty(t, p.Targets, p.Title)
		for _, tg := range p.Targets {
			_, err := promql_.ParseExpr(vars.Replace(tg.Expr))
			require.NoError(t, err, "%s: %s", p.Title, tg.Expr)
		}
	}
}
