package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/test/framework"
)

// A running three-member cluster of plain Pods that no operator manages is adopted into
// an EtcdCluster of three, a writer running throughout: the cluster keeps its ID and every
// acknowledged write, the last source member leaves only once approved, and then the
// member list holds the cluster's own members alone.
func TestAdoptRunningCluster(t *testing.T) {
	ns, src, id := withSource(t, 3)
	w := startWriterOn(t, ns, "demo", id, func() []string { return append(src.endpoints(t), framework.Endpoints(t, ns, "demo")...) }, nil)
	w.waitAcked()

	// The whole adoption, previewed against the running source.
	manifest := filepath.Join(t.TempDir(), "demo.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(fmt.Sprintf("apiVersion: etcdplan.io/v1alpha1\nkind: EtcdCluster\nmetadata: {name: demo, namespace: %s}\n"+
		"spec: {replicas: 3, version: 3.6.16, storage: {size: 64Mi}, bootstrap: {join: {endpoints: [%s]}}}\n", ns, strings.Join(src.endpoints(t), ", "))), 0o644))
	preview := livePlan(t, ns, manifest, 2)
	require.Nil(t, preview.Blocked)
	require.Len(t, preview.Steps, 13, "three joins and three removals, leadership moved once")
	require.Equal(t, plan.WhySourceLast, preview.Steps[12].Why)

	require.NoError(t, framework.Env.Client.Create(context.Background(), adopter(ns, src.endpoints(t))))
	c := framework.WaitFor(t, ns, "demo", 6*time.Minute, "the last source member's removal awaiting approval", func(c *v1alpha1.EtcdCluster) bool {
		p := c.Status.Plan
		return p != nil && p.Phase == v1alpha1.PlanAwaitingApproval && int(p.Current) < len(p.Steps) && p.Steps[p.Current].Why == plan.WhySourceLast
	})
	require.Equal(t, id, c.Status.ClusterID, "the cluster keeps the source's ID")
	require.Contains(t, framework.Condition(c, "Reconciling").Message, "removes the last source member")
	members := memberNames(t, src.endpoints(t))
	require.Len(t, members, 4, "three of the cluster's, and the last source member: %v", members)

	framework.PatchSpec(t, c, func() { c.Annotations = map[string]string{v1alpha1.AnnotationApprove: c.Status.Plan.ID} })
	c = framework.WaitFor(t, ns, "demo", 3*time.Minute, "the adoption done", func(c *v1alpha1.EtcdCluster) bool {
		return framework.Ready(c) && c.Status.Join != nil && c.Status.Join.Phase == v1alpha1.JoinAdopted && c.Status.Plan == nil
	})
	require.Equal(t, id, c.Status.ClusterID)
	w.stopAndVerify()
	require.Equal(t, []string{"demo-0", "demo-1", "demo-2"}, memberNames(t, framework.Endpoints(t, ns, "demo")))
	framework.RequireHistory(t, c, "AddLearner")
}

// Removing spec.bootstrap.join once the first member joined, and before a source member
// left, takes the cluster's member out of the source again: the source has its own members
// alone, under its ID, with every write.
func TestAdoptionRolledBack(t *testing.T) {
	ns, src, id := withSource(t, 3)
	w := startWriterOn(t, ns, "demo", id, func() []string { return src.endpoints(t) }, nil)
	w.waitAcked()

	c := firstJoined(t, ns, src)
	require.False(t, c.Status.Join.SourceLeft)
	framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Bootstrap = nil })
	framework.WaitFor(t, ns, "demo", 3*time.Minute, "the rollback done", func(c *v1alpha1.EtcdCluster) bool {
		return c.Status.Plan != nil && c.Status.Plan.Blocked != nil && c.Status.Plan.Blocked.Reason == plan.BlockAdoptionRolledBack
	})
	require.Equal(t, []string{"src-0", "src-1", "src-2"}, memberNames(t, src.endpoints(t)))
	require.Empty(t, framework.MemberPods(t, ns, "demo"))
	w.cancel()
	<-w.done
	cli := framework.EtcdClient(t, src.endpoints(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/writer/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.NoError(t, framework.SameCluster(resp.Header, id))
	require.GreaterOrEqual(t, int(resp.Count), w.ackedCount(), "every acknowledged write is in the source")
}

// Deleting the EtcdCluster once its first member joined, before a source member left,
// takes that member out of the source before the EtcdCluster goes.
func TestAdoptionRolledBackOnDeletion(t *testing.T) {
	ns, src, id := withSource(t, 1)
	c := firstJoined(t, ns, src)
	require.NoError(t, framework.Env.Client.Delete(context.Background(), c))
	require.Eventually(t, func() bool {
		err := framework.Env.Client.Get(context.Background(), client.ObjectKeyFromObject(c), &v1alpha1.EtcdCluster{})
		return apierrors.IsNotFound(err)
	}, 3*time.Minute, time.Second, "the EtcdCluster gone")
	require.Equal(t, []string{"src-0"}, memberNames(t, src.endpoints(t)))
	require.Equal(t, id, src.clusterID(t))
}

// withSource starts the operator and a source of n members in a namespace of the test's
// own, and returns the source's etcd cluster ID.
func withSource(t *testing.T, n int) (string, source, string) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	src := startSource(t, ns, "src", n)
	return ns, src, src.clusterID(t)
}

// firstJoined creates the EtcdCluster that adopts src and waits for its first member to be a
// voter.
func firstJoined(t *testing.T, ns string, src source) *v1alpha1.EtcdCluster {
	require.NoError(t, framework.Env.Client.Create(context.Background(), adopter(ns, src.endpoints(t))))
	return framework.WaitFor(t, ns, "demo", 4*time.Minute, "demo-0 a voter", func(c *v1alpha1.EtcdCluster) bool {
		return slices.ContainsFunc(c.Status.Members, func(m v1alpha1.MemberStatus) bool { return m.Name == "demo-0" && m.Role == v1alpha1.RoleVoter })
	})
}

// adopter is an EtcdCluster of three that adopts the cluster at eps.
func adopter(ns string, eps []string) *v1alpha1.EtcdCluster {
	c := framework.NewCluster(ns, "demo", 3)
	c.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Join: &v1alpha1.JoinSpec{Endpoints: eps}}
	return c
}

// source is a cluster of plain Pods, named <name>-<i> under a headless Service <name>.
type source struct{ ns, name string }

// startSource starts a cluster of n members as plain Pods that no operator manages, and
// waits for each to be ready.
func startSource(t *testing.T, ns, name string, n int) source {
	t.Helper()
	ctx := context.Background()
	svc := &corev1.Service{ObjectMeta: framework.MetaName(ns, name), Spec: corev1.ServiceSpec{
		ClusterIP: corev1.ClusterIPNone, Selector: map[string]string{"app": name}, PublishNotReadyAddresses: true,
		Ports: []corev1.ServicePort{{Name: "client", Port: 2379}, {Name: "peer", Port: 2380}}}}
	require.NoError(t, framework.Env.Client.Create(ctx, svc))
	host := func(i int) string { return fmt.Sprintf("%s-%d.%s.%s.svc.cluster.local", name, i, name, ns) }
	var initial []string
	for i := range n {
		initial = append(initial, fmt.Sprintf("%s-%d=http://%s:2380", name, i, host(i)))
	}
	for i := range n {
		member := fmt.Sprintf("%s-%d", name, i)
		require.NoError(t, framework.Env.Client.Create(ctx, sourcePod(ns, name, member, host(i), strings.Join(initial, ","))))
	}
	s := source{ns, name}
	require.Eventually(t, func() bool { return len(s.endpoints(t)) == n }, 3*time.Minute, time.Second, "the source's Pods ready")
	return s
}

func sourcePod(ns, app, member, host, initial string) *corev1.Pod {
	uid := int64(65532)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: member, Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			Hostname: member, Subdomain: app, TerminationGracePeriodSeconds: ptr.To(int64(5)),
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: &uid, RunAsGroup: &uid, FSGroup: &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{
				Name: "etcd", Image: "quay.io/coreos/etcd:v3.6.16",
				Command: []string{"etcd", "--data-dir=/var/lib/etcd/data", "--name=" + member,
					"--listen-client-urls=http://0.0.0.0:2379", "--advertise-client-urls=http://" + host + ":2379",
					"--listen-peer-urls=http://0.0.0.0:2380", "--initial-advertise-peer-urls=http://" + host + ":2380",
					"--initial-cluster=" + initial, "--initial-cluster-state=new", "--initial-cluster-token=" + app},
				Ports:        []corev1.ContainerPort{{Name: "client", ContainerPort: 2379}, {Name: "peer", ContainerPort: 2380}},
				VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/var/lib/etcd"}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health", Port: intstr.FromInt32(2379)}},
					PeriodSeconds: 2},
				SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
					Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
	}
}

// endpoints are the client URLs of the source's ready Pods, by Pod IP.
func (s source) endpoints(t *testing.T) []string {
	var pods corev1.PodList
	require.NoError(t, framework.Env.Client.List(context.Background(), &pods, client.InNamespace(s.ns), client.MatchingLabels{"app": s.name}))
	var out []string
	for _, p := range pods.Items {
		if framework.PodReady(&p) && p.Status.PodIP != "" {
			out = append(out, "http://"+p.Status.PodIP+":2379")
		}
	}
	slices.Sort(out)
	return out
}

func (s source) clusterID(t *testing.T) string {
	resp, err := framework.EtcdClient(t, s.endpoints(t)).MemberList(context.Background())
	require.NoError(t, err)
	return framework.MemberID(resp.Header.ClusterId)
}

// memberNames lists etcd's members through eps, by name.
func memberNames(t *testing.T, eps []string) []string {
	resp, err := framework.EtcdClient(t, eps).MemberList(context.Background())
	require.NoError(t, err)
	var out []string
	for _, m := range resp.Members {
		out = append(out, m.Name)
	}
	slices.Sort(out)
	return out
}
