package e2e

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/test/framework"
)

// requireNoSecretLeak fails when a private key or a credential of a Secret in ns shows up
// where anyone who may read a cluster can see it: the operator's log, every container log
// of the namespace's Pods, its Events, each EtcdCluster's and EtcdBackup's status (the plan
// and its history included), and what `kubectl etcd status` and `kubectl etcd plan` print.
func requireNoSecretLeak(t *testing.T, ns string) {
	t.Helper()
	needles := secretNeedles(t, ns)
	require.NotEmpty(t, needles, "no Secret with a key or credential in %s: the check would prove nothing", ns)
	for where, text := range leakPlaces(t, ns) {
		for what, n := range needles {
			require.NotContains(t, text, n, "%s shows %s", where, what)
		}
	}
}

// secretNeedles are strings that only a leak of a Secret's private data can show: for every
// value but certificates, a piece of it as it is and as base64 (as a Secret's data prints).
func secretNeedles(t *testing.T, ns string) map[string]string {
	var secrets corev1.SecretList
	require.NoError(t, framework.Env.Client.List(context.Background(), &secrets, client.InNamespace(ns)))
	out := map[string]string{}
	for _, s := range secrets.Items {
		for k, v := range s.Data {
			if strings.HasSuffix(k, ".crt") || len(v) < 8 {
				continue // certificates are public; a short value would match by chance
			}
			what := "Secret " + s.Name + " key " + k
			b64 := base64.StdEncoding.EncodeToString(v)
			if lines := strings.Split(string(v), "\n"); len(lines) > 2 { // PEM: a line of its body
				out[what] = lines[1]
				out[what+" (base64)"] = b64[len(b64)/2-24 : len(b64)/2+24]
				continue
			}
			out[what], out[what+" (base64)"] = string(v), b64
		}
	}
	return out
}

// leakPlaces is what the check reads, by name.
func leakPlaces(t *testing.T, ns string) map[string]string {
	ctx := context.Background()
	out := map[string]string{}
	b, err := os.ReadFile(filepath.Join(framework.Env.Root, ".stack", "logs", "operator-"+ns+".log"))
	require.NoError(t, err)
	out["the operator's log"] = string(b)

	var pods corev1.PodList
	require.NoError(t, framework.Env.Client.List(ctx, &pods, client.InNamespace(ns)))
	for _, p := range pods.Items {
		for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
			log, err := framework.Env.Stack.ContainerLog(ctx, ns, p.Name, c.Name)
			if err == nil { // a container that never started has no log
				out["the log of "+p.Name+"/"+c.Name] = log
			}
		}
	}
	var events corev1.EventList
	require.NoError(t, framework.Env.Client.List(ctx, &events, client.InNamespace(ns)))
	out["the Events"] = asJSON(t, events.Items)

	var clusters v1alpha1.EtcdClusterList
	require.NoError(t, framework.Env.Client.List(ctx, &clusters, client.InNamespace(ns)))
	for _, c := range clusters.Items {
		out["the status of "+c.Name] = asJSON(t, c.Status)
		_, status, _ := kubectlEtcd(t, ns, "status", c.Name)
		out["kubectl etcd status "+c.Name] = status
		manifest := filepath.Join(t.TempDir(), c.Name+".yaml")
		m := v1alpha1.EtcdCluster{Spec: c.Spec}
		m.APIVersion, m.Kind = v1alpha1.GroupVersion.String(), "EtcdCluster"
		m.Name, m.Namespace = c.Name, c.Namespace
		y, err := sigsyaml.Marshal(m)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(manifest, y, 0o644))
		_, plan, errOut := kubectlEtcd(t, ns, "plan", "-f", manifest)
		out["kubectl etcd plan "+c.Name] = plan + errOut
	}
	var backups v1alpha1.EtcdBackupList
	require.NoError(t, framework.Env.Client.List(ctx, &backups, client.InNamespace(ns)))
	for _, b := range backups.Items {
		out["the status of backup "+b.Name] = asJSON(t, b.Status)
	}
	return out
}

func asJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return string(b)
}
