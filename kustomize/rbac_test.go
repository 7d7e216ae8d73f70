package kustomize_test

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// need is one resource the operator acts on, the verbs it uses, and the code that uses them.
type need struct {
	group, resource string
	verbs           []string
	why             string
}

// needs is everything the operator may do, and why; the installs grant exactly this. A rule
// added to an install without a line here fails the test, as does a line no install grants.
var needs = []need{
	{"etcdplan.io", "etcdclusters", []string{"get", "list", "watch", "update", "patch"},
		"executor/controller: the reconciler watches clusters and patches their annotations and finalizer"},
	{"etcdplan.io", "etcdbackupschedules", []string{"get", "list", "watch", "update", "patch"},
		"executor/backupctl/schedule.go: the schedule reconciler"},
	{"etcdplan.io", "etcdbackups", []string{"get", "list", "watch", "update", "patch", "create", "delete"},
		"executor/backupctl: schedules create backups and retention deletes them; executor/controller/restore.go creates the survivor's snapshot"},
	{"etcdplan.io", "etcdclusters/status", []string{"get", "update", "patch"}, "executor/status: the plan and conditions"},
	{"etcdplan.io", "etcdbackups/status", []string{"get", "update", "patch"}, "executor/backupctl: a backup's phase and drill"},
	{"etcdplan.io", "etcdbackupschedules/status", []string{"get", "update", "patch"}, "executor/backupctl/schedule.go: last and next run"},
	{"", "pods", []string{"get", "list", "watch", "create", "delete", "patch"},
		"executor/observe (the member Pods), executor/controller/steps.go (start, stop, annotate), snapshot and drill Pods"},
	{"", "persistentvolumeclaims", []string{"get", "list", "watch", "create", "delete", "patch"},
		"executor/resources/member.go claims; steps_volume.go grows and releases them; backup claims"},
	{"", "nodes", []string{"get"}, "executor/controller/steps.go: a Pod stuck terminating on a node that stopped reporting"},
	{"", "secrets", []string{"get", "create", "update"},
		"executor/backupctl/source.go reads a destination's credentials by name, drill.go root's password; executor/certs issues and renews the TLS Secrets and makes root's password Secret (root.go); never listed or watched"},
	{"cert-manager.io", "certificates", []string{"get", "create"}, "executor/certs/certmanager.go: the Certificates of spec.tls mode CertManager"},
	{"cert-manager.io", "issuers", []string{"get", "create"}, "executor/certs/certmanager.go: the cluster's intermediate CA Issuer"},
	{"storage.k8s.io", "storageclasses", []string{"get", "list", "watch"},
		"executor/observe/list.go: whether a claim binds at once and whether its class expands"},
	{"", "services", []string{"get", "list", "watch", "create", "update", "patch"}, "executor/resources/services.go: the peer and client Services"},
	{"policy", "poddisruptionbudgets", []string{"get", "list", "watch", "create", "update", "patch"}, "executor/resources/services.go: the cluster's PodDisruptionBudget"},
	{"", "events", []string{"create", "patch"}, "executor/controller/cluster.go: Events of steps and recoveries"},
	{"events.k8s.io", "events", []string{"create", "patch"}, "the same Events, through the events API"},
	{"coordination.k8s.io", "leases", []string{"get", "list", "watch", "create", "update", "patch"},
		"cmd/manager: leader election among the operator's replicas (--leader-elect), in its own namespace"},
}

// grants is what an install grants, as "group/resource verb" lines.
func grants(rules []rbacv1.PolicyRule) []string {
	var out []string
	for _, r := range rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					out = append(out, fmt.Sprintf("%s/%s %s", g, res, v))
				}
			}
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

func wanted() []string {
	var out []string
	for _, n := range needs {
		for _, v := range n.verbs {
			out = append(out, fmt.Sprintf("%s/%s %s", n.group, n.resource, v))
		}
	}
	sort.Strings(out)
	return out
}

// rulesOf renders a kustomization and returns the rules of its Roles and ClusterRoles.
func rulesOf(t *testing.T, dir string) []rbacv1.PolicyRule {
	t.Helper()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	require.NoError(t, err)
	data, err := res.AsYaml()
	require.NoError(t, err)
	var rules []rbacv1.PolicyRule
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err == io.EOF {
			break
		}
		require.NoError(t, err)
		if u.GetKind() != "Role" && u.GetKind() != "ClusterRole" {
			continue
		}
		var r rbacv1.ClusterRole // a Role's fields are the same
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &r))
		rules = append(rules, r.Rules...)
	}
	return rules
}

// Both installs, cluster-wide and for one namespace, grant the operator exactly what the
// list of needs says, and never a list or watch of Secrets.
func TestInstallsGrantExactlyWhatTheOperatorNeeds(t *testing.T) {
	for _, dir := range []string{"default", "namespaced"} {
		t.Run(dir, func(t *testing.T) {
			got := grants(rulesOf(t, dir))
			require.Equal(t, wanted(), got, "the rules %s grants, against the list of needs in this test: "+
				"a rule the operator needs goes into the list with the code that uses it", dir)
			for _, g := range got {
				require.NotContains(t, []string{"/secrets list", "/secrets watch", "/secrets *", "* *"}, g)
			}
		})
	}
}
