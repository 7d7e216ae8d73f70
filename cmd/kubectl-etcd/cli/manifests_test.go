package cli

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o644) }

func decodeAll(t *testing.T, content string) error {
	t.Helper()
	path := t.TempDir() + "/m.yaml"
	require.NoError(t, writeFile(path, content))
	docs, err := readFiles([]string{path}, nil)
	if err != nil {
		return err
	}
	_, err = etcdClusters(docs)
	return err
}

const head = "apiVersion: etcdplan.io/v1alpha1\nkind: EtcdCluster\nmetadata:\n  name: demo\n"

func TestManifestErrors(t *testing.T) {
	for content, want := range map[string]string{
		head + "spec:\n  version: 3.6.16\n  version: 3.6.15\n":                                                          `key "version" already set`,
		head + "spec:\n  version: 3.6.16\n  storage: {sise: 1Gi}\n":                                                     `unknown field "spec.storage.sise"`,
		head + "  labelz: {}\nspec:\n  version: 3.6.16\n":                                                               `unknown field "metadata.labelz"`,
		head + "spec:\n  replicas: 0\n  version: 3.6.16\n  storage: {medium: Memory}":                                   "replicas 0 parks a cluster",
		head + "spec:\n  replicas: 3\n":                                                                                 "spec.version is required",
		head + "spec:\n  version: 3.4.30\n":                                                                             "version must be 3.5.0 or newer",
		head + "spec:\n  version: 3.6.16\n  maintenance: {defrag: {schedule: '0 3 * * 8'}}\n":                           `spec.maintenance.defrag.schedule "0 3 * * 8"`,
		head + "spec:\n  version: 3.6.16\n  maintenance: {defrag: {}}\n":                                                "needs a schedule, a thresholdPercent or both",
		head + "spec:\n  version: 3.6.16\n  auth: {enabled: true}\n":                                                    "spec.auth.enabled needs client TLS",
		"apiVersion: etcdplan.io/v1alpha1\nkind: EtcdCluster\nmetadata: {name: demo-client}\nspec: {version: 3.6.16}\n": "cannot end in -client",
		"apiVersion: etcdplan.io/v1beta1\nkind: EtcdCluster\nmetadata: {name: x}\n":                                     "apiVersion etcdplan.io/v1beta1 is not supported",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n":                                                        "no EtcdCluster",
		head + "spec: {version: 3.6.16}\n---\n" + head + "spec: {version: 3.6.16}\n":                                    "EtcdCluster demo is also defined in",
		"- a\n- b\n": "not a Kubernetes object",
	} {
		err := decodeAll(t, content)
		require.Error(t, err, content)
		require.Contains(t, err.Error(), want, content)
	}
}

// Empty documents and comments between separators are skipped; a directory stands for
// its manifest files.
func TestReadFilesSkipsEmptyDocumentsAndReadsDirectories(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, writeFile(dir+"/a.yaml", "# nothing\n---\n---\n"+head+"spec: {version: 3.6.16}\n"))
	require.NoError(t, writeFile(dir+"/notes.txt", "not a manifest"))
	docs, err := readFiles([]string{dir}, nil)
	require.NoError(t, err)
	cs, err := etcdClusters(docs)
	require.NoError(t, err)
	require.Len(t, cs, 1)
	require.Equal(t, dir+"/a.yaml (document 2)", docs[0].source) // the reader drops the empty one
}
