package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func TestRenderSetsTheImage(t *testing.T) {
	data, err := render("../../kustomize/default", "registry.example:5000/team/etcdplan:v0.3.0")
	require.NoError(t, err)
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	kinds := map[string]int{}
	image := ""
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err == io.EOF {
			break
		} else {
			require.NoError(t, err)
		}
		kinds[u.GetKind()]++
		if u.GetKind() == "Deployment" {
			cs, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			image = cs[0].(map[string]any)["image"].(string)
		}
	}
	require.Equal(t, "registry.example:5000/team/etcdplan:v0.3.0", image)
	require.Equal(t, 3, kinds["CustomResourceDefinition"])
	require.Equal(t, 1, kinds["Namespace"])
}

func TestImageNeedsATag(t *testing.T) {
	for _, bad := range []string{"", "etcdplan", "registry.example:5000/etcdplan", "etcdplan:"} {
		_, err := render("../../kustomize/default", bad)
		require.Error(t, err, bad)
	}
}

// The monitoring component builds on the install, in its namespace.
func TestMonitoringComponent(t *testing.T) {
	dir := t.TempDir()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	rel, err := filepath.Rel(dir, root)
	require.NoError(t, err)
	k := "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - " + rel + "/kustomize/default\n" +
		"components:\n  - " + rel + "/kustomize/components/monitoring\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644))
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err)
	found := map[string]string{}
	for _, r := range res.Resources() {
		if r.GetApiVersion() == "monitoring.coreos.com/v1" {
			found[r.GetKind()+"/"+r.GetName()] = r.GetNamespace()
		}
	}
	require.Equal(t, map[string]string{"PodMonitor/etcdplan-operator": "etcdplan-system", "PodMonitor/etcdplan-members": "etcdplan-system",
		"PrometheusRule/etcdplan": "etcdplan-system"}, found)
}
