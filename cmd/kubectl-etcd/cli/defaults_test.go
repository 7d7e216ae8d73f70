package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

const crdFile = "../../../kustomize/crd/bases/etcdplan.io_etcdclusters.yaml"

// specSchema is the openAPIV3Schema of the EtcdCluster CRD's spec, as plain data.
func specSchema(t *testing.T) map[string]any {
	t.Helper()
	return clusterSchema(t)["properties"].(map[string]any)["spec"].(map[string]any)
}

// clusterSchema is the CRD's schema of an EtcdCluster.
func clusterSchema(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(crdFile)
	require.NoError(t, err)
	var crd struct {
		Spec struct {
			Versions []struct {
				Name   string
				Schema struct {
					OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
				}
			}
		}
	}
	require.NoError(t, yaml.Unmarshal(data, &crd))
	for _, v := range crd.Spec.Versions {
		if v.Name == v1alpha1.GroupVersion.Version {
			return v.Schema.OpenAPIV3Schema
		}
	}
	t.Fatalf("%s has no version %s", crdFile, v1alpha1.GroupVersion.Version)
	return nil
}

// schemaDefaults lists every default in the schema by path, in the notation of crdDefaults.
func schemaDefaults(node map[string]any, path string, out map[string]any) {
	if d, ok := node["default"]; ok {
		out[path] = d
	}
	if props, ok := node["properties"].(map[string]any); ok {
		for name, p := range props {
			schemaDefaults(p.(map[string]any), path+"."+name, out)
		}
	}
	if items, ok := node["items"].(map[string]any); ok {
		schemaDefaults(items, path+"[]", out)
	}
	if extra, ok := node["additionalProperties"].(map[string]any); ok {
		schemaDefaults(extra, path+"{}", out)
	}
}

// normalise makes numbers comparable: YAML and Go literals both become JSON numbers.
func normalise(t *testing.T, v any) any {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	var out any
	require.NoError(t, json.Unmarshal(b, &out))
	return out
}

func TestDefaultsMatchCRD(t *testing.T) {
	want := map[string]any{}
	schemaDefaults(specSchema(t), "spec", want)
	got := map[string]any{}
	for _, d := range crdDefaults {
		got[d.path] = d.value
	}
	if diff := cmp.Diff(normalise(t, want), normalise(t, got)); diff != "" {
		t.Errorf("crdDefaults differ from %s (-crd +crdDefaults); `make generate` may have changed the CRD:\n%s", crdFile, diff)
	}
	// A parent's default must come before its children's, as the API server applies them.
	for i, d := range crdDefaults {
		for _, later := range crdDefaults[i+1:] {
			require.False(t, strings.HasPrefix(d.path, later.path+"."), "%s comes before its parent %s", d.path, later.path)
		}
	}
}

func TestApplyDefaults(t *testing.T) {
	decode := func(spec string) v1alpha1.EtcdClusterSpec {
		var obj map[string]any
		require.NoError(t, yaml.Unmarshal([]byte("apiVersion: etcdplan.io/v1alpha1\nkind: EtcdCluster\nmetadata: {name: x}\nspec: "+spec), &obj))
		applyDefaults(obj)
		c, err := decodeStrict(obj)
		require.NoError(t, err)
		return c.Spec
	}
	s := decode("{version: 3.6.16}")
	require.EqualValues(t, 3, s.Replicas)
	require.Equal(t, "1Gi", s.Storage.Size.String())
	require.Equal(t, v1alpha1.RetainPolicyRetain, s.Storage.RetainPolicy)
	require.Equal(t, v1alpha1.ApprovalAutomatic, s.UpdateStrategy.Approval)
	require.EqualValues(t, 600, s.UpdateStrategy.ProgressDeadlineSeconds)
	require.Nil(t, s.TLS, "an absent optional object stays absent")

	s = decode("{version: 3.6.16, replicas: 0, storage: {size: 5Gi, retainPolicy: null}, tls: {}, imagePullSecrets: [{}], clientService: {}}")
	require.EqualValues(t, 0, s.Replicas, "an explicit 0 is kept")
	require.Equal(t, "5Gi", s.Storage.Size.String())
	require.Equal(t, v1alpha1.RetainPolicyRetain, s.Storage.RetainPolicy, "null is defaulted")
	require.Equal(t, v1alpha1.TLSDisabled, s.TLS.Mode)
	require.Equal(t, "ClusterIP", string(s.ClientService.Type))
	require.Len(t, s.ImagePullSecrets, 1)
}

// The checks of validate are the CRD's: same version pattern, same replica bounds.
func TestValidationMatchesCRD(t *testing.T) {
	props := specSchema(t)["properties"].(map[string]any)
	rules, _ := json.Marshal(props["version"])
	// The pattern is a CEL string literal (backslashes doubled) inside JSON (doubled again).
	pattern := strings.ReplaceAll(versionFormat.String(), `\`, `\\\\`)
	require.Contains(t, string(rules), pattern, "the CRD's version rule changed")
	tooOld := strings.ReplaceAll(strings.TrimSuffix(versionTooOld.String(), "."), `\`, `\\\\`)
	require.Contains(t, string(rules), tooOld, "the CRD's minimum version rule changed")
	var rootRules []string
	for _, r := range clusterSchema(t)["x-kubernetes-validations"].([]any) {
		rootRules = append(rootRules, r.(map[string]any)["rule"].(string))
	}
	require.Contains(t, rootRules, fmt.Sprintf("self.metadata.name.size() <= %d && self.metadata.name.matches('%s')", maxNameLength, nameFormat),
		"the CRD's name rule changed")
	replicas := props["replicas"].(map[string]any)
	require.EqualValues(t, minReplicas, replicas["minimum"])
	require.EqualValues(t, maxReplicas, replicas["maximum"])
	required, _ := specSchema(t)["required"].([]any)
	require.Contains(t, required, "version")
}
