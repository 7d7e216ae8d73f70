package cli

import (
	"encoding/json"
	"strings"
)

// crdDefaults are the defaults in the EtcdCluster CRD's schema, which the API server fills
// in on create (kustomize/crd/bases/etcdplan.io_etcdclusters.yaml); TestDefaultsMatchCRD
// fails when the two differ. "[]" after a field stands for each item of that list. Parents
// come before their children: the API server defaults inside an object it just defaulted.
var crdDefaults = []struct {
	path  string
	value any
}{
	{"spec.replicas", 3},
	{"spec.storage", map[string]any{}},
	{"spec.storage.size", "1Gi"},
	{"spec.storage.medium", ""},
	{"spec.storage.retainPolicy", "Retain"},
	{"spec.updateStrategy", map[string]any{}},
	{"spec.updateStrategy.approval", "Automatic"},
	{"spec.updateStrategy.progressDeadlineSeconds", 600},
	{"spec.clientService.type", "ClusterIP"},
	{"spec.imagePullSecrets[].name", ""},
	{"spec.recovery.quorumLoss", "Manual"},
	{"spec.tls.mode", "Disabled"},
	{"spec.tls.certificateValidity", "2160h"},
	{"spec.tls.issuerRef.kind", "Issuer"},
	{"spec.auth.users[].permissions[].access", "ReadWrite"},
}

// applyDefaults fills in the CRD's defaults where the object leaves a field out or null,
// so the planner sees the spec the operator will see.
func applyDefaults(obj map[string]any) {
	for _, d := range crdDefaults {
		setDefault(obj, strings.Split(d.path, "."), d.value)
	}
}

func setDefault(node any, path []string, value any) {
	m, ok := node.(map[string]any)
	if !ok {
		return // absent or not an object: nothing to default inside it
	}
	field, each := strings.CutSuffix(path[0], "[]")
	if len(path) == 1 {
		if m[field] == nil {
			m[field] = clone(value)
		}
		return
	}
	if !each {
		setDefault(m[field], path[1:], value)
		return
	}
	items, _ := m[field].([]any)
	for _, item := range items {
		setDefault(item, path[1:], value)
	}
}

// clone copies a default so objects never share one map.
func clone(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // the defaults above are plain data
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		panic(err)
	}
	return out
}
