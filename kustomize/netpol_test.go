package kustomize_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/resources"
)

// The network policy component, in an overlay for a namespace of clusters, selects the
// member Pods the operator renders, lets peers in from members alone, and clients from the
// operator (its Pod as the install renders it), its snapshot Pods and labelled clients.
func TestNetworkPolicySelectsWhatTheOperatorRenders(t *testing.T) {
	overlay := t.TempDir()
	abs, err := filepath.Abs("components/network-policy")
	require.NoError(t, err)
	comp, err := filepath.Rel(overlay, abs) // kustomize takes no absolute root
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(overlay, "kustomization.yaml"),
		[]byte("namespace: team-a\ncomponents: ["+comp+"]\n"), 0o600))
	fs := filesys.MakeFsOnDisk()
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fs, overlay)
	require.NoError(t, err)
	require.Len(t, res.Resources(), 1)
	m, err := res.Resources()[0].Map()
	require.NoError(t, err)
	var np networkingv1.NetworkPolicy
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(m, &np))
	require.Equal(t, "team-a", np.Namespace)

	c := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "team-a"}}
	c.Spec.Version = "3.6.16"
	member := resources.MemberPod(c, resources.Images{EtcdRepository: "etcd"}, resources.MemberSpec{Name: "demo-0", Version: "3.6.16"})
	backup := resources.DrillPod(&v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "team-a"}}, c,
		resources.Images{EtcdRepository: "etcd"}, resources.Restore{}, "3.6.16")
	operator := operatorPod(t)
	app := map[string]string{"etcdplan.io/etcd-client": "true"}
	selects := func(s *metav1.LabelSelector, l map[string]string) bool {
		sel, err := metav1.LabelSelectorAsSelector(s)
		require.NoError(t, err)
		return sel.Matches(labels.Set(l))
	}
	require.True(t, selects(&np.Spec.PodSelector, member.Labels), "the policy selects member Pods")
	require.False(t, selects(&np.Spec.PodSelector, backup.Labels), "and no other Pod")

	// from reports whether a Pod of the namespace ns with the labels may reach the port.
	from := func(port int, ns string, l map[string]string) bool {
		for _, rule := range np.Spec.Ingress {
			if !hasPort(rule.Ports, port) {
				continue
			}
			if len(rule.From) == 0 {
				return true
			}
			for _, peer := range rule.From {
				nsOK := peer.NamespaceSelector == nil && ns == "team-a" ||
					peer.NamespaceSelector != nil && selects(peer.NamespaceSelector, map[string]string{"kubernetes.io/metadata.name": ns})
				if nsOK && (peer.PodSelector == nil || selects(peer.PodSelector, l)) {
					return true
				}
			}
		}
		return false
	}
	for _, port := range []int{vocab.PeerPort, vocab.PeerTLSPort} {
		require.True(t, from(port, "team-a", member.Labels), "peers from members, port %d", port)
		require.False(t, from(port, "team-a", operator.Labels), "no one else, port %d", port)
		require.False(t, from(port, "team-a", app), "no client, port %d", port)
	}
	require.True(t, from(vocab.ClientPort, "etcdplan-system", operator.Labels), "the cluster-wide operator")
	require.True(t, from(vocab.ClientPort, "team-a", operator.Labels), "the namespaced operator")
	require.True(t, from(vocab.ClientPort, "team-a", backup.Labels), "snapshot Pods")
	require.True(t, from(vocab.ClientPort, "team-a", app), "labelled clients")
	require.False(t, from(vocab.ClientPort, "team-a", map[string]string{"app": "other"}), "no other Pod")
	require.False(t, from(vocab.ClientPort, "elsewhere", operator.Labels), "no Pod of another namespace that is not labelled")
	require.True(t, from(vocab.MetricsPort, "elsewhere", nil), "probes and metrics")
	for _, cp := range member.Spec.Containers[0].Ports {
		require.True(t, from(int(cp.ContainerPort), "team-a", member.Labels) || from(int(cp.ContainerPort), "team-a", operator.Labels),
			"every port a member serves is covered: %s %d", cp.Name, cp.ContainerPort)
	}
}

func hasPort(ports []networkingv1.NetworkPolicyPort, port int) bool {
	for _, p := range ports {
		if p.Port != nil && p.Port.IntValue() == port {
			return true
		}
	}
	return false
}

// operatorPod is the operator's Pod template as the install renders it.
func operatorPod(t *testing.T) corev1.PodTemplateSpec {
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), "manager")
	require.NoError(t, err)
	for _, r := range res.Resources() {
		if r.GetKind() == "Deployment" {
			m, err := r.Map()
			require.NoError(t, err)
			var spec struct {
				Spec struct {
					Template corev1.PodTemplateSpec `json:"template"`
				} `json:"spec"`
			}
			require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(m, &spec))
			return spec.Spec.Template
		}
	}
	t.Fatal("no Deployment in the install")
	return corev1.PodTemplateSpec{}
}
