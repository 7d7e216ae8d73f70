package cli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	sigsjson "sigs.k8s.io/json"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/schedule"
)

// convertArgs are the flags each operator's example needs besides -f.
var convertArgs = map[string][]string{
	"druid": {"--etcd-version", "3.5.21"}, // etcd-druid's manifest does not say etcd's release
}

func convertInputs(t *testing.T) []string {
	files, err := filepath.Glob("testdata/convert/*.yaml")
	require.NoError(t, err)
	require.Len(t, files, 5, "one example per operator")
	return files
}

// What convert prints for each operator's example; -update rewrites the golden files.
func TestConvertGolden(t *testing.T) {
	for _, in := range convertInputs(t) {
		op := strings.TrimSuffix(filepath.Base(in), ".yaml")
		t.Run(op, func(t *testing.T) {
			r := run(t, "", append([]string{"convert", "-f", in}, convertArgs[op]...)...)
			require.Equal(t, ExitOK, r.code, r.stderr)
			require.Empty(t, r.stderr)
			golden(t, strings.TrimSuffix(in, ".yaml")+".golden", r.stdout)
		})
	}
}

// Every object convert prints is one the API server admits: unknown fields are errors, as
// are values the CRD refuses.
func TestConvertOutputIsValid(t *testing.T) {
	endpoint := schemaAt(t, specSchema(t), "bootstrap", "join", "endpoints")["items"].(map[string]any)["pattern"].(string)
	for _, in := range convertInputs(t) {
		out := strings.TrimSuffix(in, ".yaml") + ".golden"
		f, err := os.Open(out)
		require.NoError(t, err)
		docs, err := split(out, f)
		f.Close()
		require.NoError(t, err)
		var clusters int
		for _, d := range docs {
			var meta struct{ Kind string }
			require.NoError(t, json.Unmarshal(d.data, &meta))
			switch meta.Kind {
			case "EtcdCluster":
				c, err := decodeIfCluster(d)
				require.NoError(t, err)
				require.NotNil(t, c.Spec.Bootstrap.Join, "%s: no spec.bootstrap.join", d.source)
				for _, e := range c.Spec.Bootstrap.Join.Endpoints {
					require.Regexp(t, endpoint, e, "%s: the CRD refuses the endpoint", d.source)
				}
				clusters++
			case "EtcdBackup":
				strict(t, d, &v1alpha1.EtcdBackup{})
			case "EtcdBackupSchedule":
				s := &v1alpha1.EtcdBackupSchedule{}
				strict(t, d, s)
				_, err := schedule.Parse(s.Spec.Schedule)
				require.NoError(t, err, "%s: the operator cannot read the schedule", d.source)
			default:
				t.Errorf("%s: unexpected kind %s", d.source, meta.Kind)
			}
		}
		require.Equal(t, 1, clusters, out)
	}
}

func strict(t *testing.T, d document, into any) {
	t.Helper()
	errs, err := sigsjson.UnmarshalStrict(d.data, into, sigsjson.DisallowUnknownFields)
	require.NoError(t, err, d.source)
	require.NoError(t, errors.Join(errs...), d.source)
}

func TestConvertErrors(t *testing.T) {
	const coreos = "apiVersion: etcd.database.coreos.com/v1beta2\nkind: EtcdCluster\nmetadata: {name: a, namespace: ns}\n"
	tests := []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"no size", coreos + "spec: {version: 3.5.17}\n", nil, ExitError, "",
			"error: <stdin> (document 1): EtcdCluster ns/a: spec.size is required: it says how many members the running cluster has"},
		{"their default version", coreos + "spec: {size: 3}\n", nil, ExitError, "",
			"etcd 3.2.13: etcdplan adopts clusters on etcd 3.5 or newer; upgrade the cluster with its own operator first"},
		{"no version", "apiVersion: druid.gardener.cloud/v1alpha1\nkind: Etcd\nmetadata: {name: e}\nspec: {replicas: 3}\n", nil, ExitError, "",
			"the manifest does not say which etcd release the cluster runs: pass it with --etcd-version"},
		{"unknown kind skipped", coreos + "spec: {size: 3, version: 3.5.17}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", nil, ExitOK,
			"name: a-etcdplan", "warning: <stdin> (document 2): ConfigMap c (v1): not a kind convert reads; skipped"},
		{"only unknown kinds", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", nil, ExitError, "", "no object of a kind convert reads in the input"},
		{"backup of another cluster", coreos + "spec: {size: 3, version: 3.5.17}\n---\napiVersion: etcd.aenix.io/v1alpha1\nkind: EtcdBackup\nmetadata: {name: b}\nspec: {clusterRef: {name: x}}\n", nil, ExitOK,
			"", "warning: <stdin> (document 2): EtcdBackup b: spec.clusterRef.name x is not a cluster of the input: convert it with its cluster; skipped"},
		{"backup without a store", coreos + "spec: {size: 3, version: 3.5.17}\n---\napiVersion: etcd.database.coreos.com/v1beta2\nkind: EtcdBackup\nmetadata: {name: b, namespace: ns}\nspec: {etcdEndpoints: [http://a-client.ns.svc:2379], storageType: S3}\n", nil, ExitError, "",
			"error: <stdin> (document 2): EtcdBackup ns/b: spec.s3 or spec.gcs is required: it says where the backups go"},
		{"schedule without a schedule", "apiVersion: etcd.aenix.io/v1alpha1\nkind: EtcdCluster\nmetadata: {name: a}\nspec: {}\n---\napiVersion: etcd.aenix.io/v1alpha1\nkind: EtcdBackupSchedule\nmetadata: {name: s}\nspec: {clusterRef: {name: a}, destination: {pvc: {claimName: c}}}\n", nil, ExitError, "",
			"EtcdBackupSchedule s: the backup schedule is required"},
		{"--name", coreos + "spec: {size: 3, version: 3.5.17}\n", []string{"--name", "main"}, ExitOK, "  name: main\n", ""},
		{"bad --name", coreos + "spec: {size: 3, version: 3.5.17}\n", []string{"--name", "Main"}, ExitError, "", `the EtcdCluster's name "Main" must be a DNS label`},
		{"their name", coreos + "spec: {size: 3, version: 3.5.17}\n", []string{"--name", "a"}, ExitError, "", `the EtcdCluster's name "a" is theirs`},
		{"unknown field noted", coreos + "spec: {size: 3, version: 3.5.17, frobnicate: 1}\n", nil, ExitOK,
			"# - spec.frobnicate: not a field this converter knows; carry it over by hand if it matters", ""},
		{"no -f", "", nil, ExitError, "", "-f is required"},
		{"help", "", []string{"-h"}, ExitOK, "docs/migration.md", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := []string{"convert"}
			if tt.stdin != "" {
				args = append(args, "-f", "-")
			}
			r := run(t, tt.stdin, append(args, tt.args...)...)
			require.Equal(t, tt.code, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			require.Contains(t, r.stdout, tt.stdout)
			require.Contains(t, r.stderr, tt.stderr)
		})
	}
}

// schemaAt is the schema of the property at the path.
func schemaAt(t *testing.T, schema map[string]any, path ...string) map[string]any {
	t.Helper()
	for _, p := range path {
		props, ok := schema["properties"].(map[string]any)
		require.True(t, ok, "no properties above %s", p)
		schema, ok = props[p].(map[string]any)
		require.True(t, ok, "no property %s in the CRD", p)
	}
	return schema
}
