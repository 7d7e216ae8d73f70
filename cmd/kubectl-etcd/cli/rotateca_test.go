package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// A manifest whose etcdplan.io/rotate-ca differs from the live cluster's asks for a
// rotation of the cluster's own CA: the live plan shows it before the manifest is applied.
func TestManifestAsksForARotation(t *testing.T) {
	live := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns",
		Annotations: map[string]string{v1alpha1.AnnotationRotateCA: "2025"}}}
	live.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto}
	live.Status.ClusterID = "c1"
	c := live.DeepCopy()
	require.False(t, asksRotation(live, c), "as it is")
	c.Annotations[v1alpha1.AnnotationRotateCA] = "2026"
	require.True(t, asksRotation(live, c))
	c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSProvided}
	require.False(t, asksRotation(live, c), "no CA of the operator's")
	c.Spec.TLS, live.Status.ClusterID = live.Spec.TLS, ""
	require.False(t, asksRotation(live, c), "a cluster not formed yet gets its CA made for it")
}

// A manifest that moves the live cluster's TLS from Auto to Provided shows the change of
// source's plan; one the operator does not plan shows none.
func TestManifestChangesTheSource(t *testing.T) {
	live := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns"}}
	live.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto}
	live.Status.ClusterID = "c1"
	live.Status.TLS = &v1alpha1.TLSStatus{InUse: live.Spec.TLS}
	c := live.DeepCopy()
	require.Empty(t, changesSource(live, c), "as it is")
	c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSProvided, ServerSecretName: "s", PeerSecretName: "p", ClientSecretName: "o"}
	require.Equal(t, "Auto to Provided", changesSource(live, c))
	c.Spec.TLS.Peer = &v1alpha1.TLSSideSpec{Mode: v1alpha1.TLSAuto}
	require.Empty(t, changesSource(live, c), "the client side alone is not planned")
}
