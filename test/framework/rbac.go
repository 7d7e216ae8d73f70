package framework

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"
)

// operatorKubeconfig installs the namespaced install's RBAC (kustomize/namespaced/rbac.yaml)
// in ns the way a user's overlay does (namespace ns, name prefix "ns-"), and returns a
// kubeconfig that acts as its ServiceAccount. The test's operator runs with it, so every
// end-to-end test proves that those rules are enough.
func operatorKubeconfig(t *testing.T, ns string) string {
	t.Helper()
	dir := t.TempDir()
	rbac, err := os.ReadFile(filepath.Join(Env.Root, "kustomize", "namespaced", "rbac.yaml"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "rbac.yaml"), rbac, 0o644))
	overlay := "namespace: " + ns + "\nnamePrefix: " + ns + "-\nresources: [rbac.yaml]\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(overlay), 0o644))
	ctx := context.Background()
	require.NoError(t, Kubectl(ctx, "apply", "-k", dir))
	t.Cleanup(func() {
		if !t.Failed() { // the namespace takes the rest; a failed test's stays to look at
			_ = Kubectl(context.Background(), "delete", "--ignore-not-found", "clusterrole,clusterrolebinding", ns+"-etcdplan-cluster-reader")
		}
	})

	cfg, err := clientcmd.LoadFromFile(Env.Stack.Kubeconfig())
	require.NoError(t, err)
	for _, u := range cfg.AuthInfos {
		u.Impersonate = "system:serviceaccount:" + ns + ":" + ns + "-etcdplan"
	}
	path := filepath.Join(dir, "operator.kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*cfg, path))
	return path
}
