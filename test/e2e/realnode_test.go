package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/test/framework"
	"github.com/etcdplan/etcdplan/test/objstore"
	"github.com/etcdplan/etcdplan/test/stack"
)

// The operator's clusters on node-4, the real kubelet over containerd and runc, in a
// namespace enforcing `restricted`: member Pods run from images with their security context
// enforced (read-only root, non-root, no capabilities, seccomp). One cluster goes through a
// member's life on a real node, with a writer throughout: three members of etcd 3.5
// bootstrap, scale to five and back to three, a member Pod is deleted and another member's
// etcd killed (SIGKILL to its process), each comes back; a rolling upgrade to 3.6 restarts
// each member once, the leader last; a backup streams to MinIO while the writer writes.
// Every acknowledged write is read back. A second cluster restores from that backup on
// node-4 (the operator image's fetch and place and etcdutl, on a read-only root as a
// non-root user) and serves every write acknowledged at or before the backup's revision;
// the backup's restore drill runs there too.
// It needs the stack with node-4 (ETCDPLAN_REAL_NODE=1); `make test` runs it with the
// exclusive end-to-end tests, where the stack is this package's alone and adds node-4. Every
// Pod it makes runs on node-4, so it runs beside the test that cuts node-1..3 off.
func TestExclusiveRealNodeCluster(t *testing.T) {
	if !stack.RealNodeWanted() {
		t.Skip("needs node-4: ETCDPLAN_REAL_NODE=1 (make test runs it with the exclusive end-to-end tests)")
	}
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	m := minioFor(t, ns, objstore.FreeAddrOn(t, framework.Env.Stack.Instance().BridgeIP()))
	phase := phases(t)
	from, to := strings.TrimPrefix(stack.EtcdPrevVersion, "v"), strings.TrimPrefix(stack.EtcdVersion, "v")

	c := framework.CreateReady(t, ns, 3, onRealNode, func(c *v1alpha1.EtcdCluster) { c.Spec.Version = from })
	phase("bootstrap of 3 members on etcd " + from)
	require.EqualValues(t, 3, c.Status.ReadyReplicas)
	onNode4(t, ns, "demo")
	w := startWriter(t, ns, "demo")
	w.waitAcked()

	for _, n := range []int32{5, 3} {
		framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = n })
		framework.WaitFor(t, ns, "demo", 5*time.Minute, "Ready with the new size", func(c *v1alpha1.EtcdCluster) bool {
			return framework.Ready(c) && c.Status.ReadyReplicas == n
		})
		require.Len(t, framework.CheckMembership(t, ns, "demo").Members, int(n))
		onNode4(t, ns, "demo")
		phase("scale to " + map[int32]string{5: "5", 3: "3"}[n])
	}

	pods := framework.MemberPods(t, ns, "demo")
	require.NoError(t, framework.Env.Client.Delete(context.Background(), &pods[0]))
	memberBack(t, ns, pods[0])
	phase("member Pod " + pods[0].Name + " deleted and back")

	victim := framework.MemberPods(t, ns, "demo")[1]
	require.EqualValues(t, 137, killEtcd(t, ns, victim.Name), "etcd of %s ended by SIGKILL", victim.Name)
	memberBack(t, ns, victim)
	phase("etcd of " + victim.Name + " killed and the member back")

	c = rollOneAtATime(t, ns, plan.UpgradeMember, func(c *v1alpha1.EtcdCluster) { c.Spec.Version = to })
	require.Equal(t, to, c.Status.Version)
	for _, p := range onNode4(t, ns, "demo") {
		require.Equal(t, to, p.Annotations[vocab.AnnotationVersion], p.Name)
	}
	phase("rolling upgrade to " + to)

	b := framework.CreateBackup(t, ns, "nightly", framework.MinIODest(m.Endpoint), verify)
	a := framework.WaitBackup(t, ns, b.Name, v1alpha1.BackupSucceeded).Status.Artifact
	require.NotNil(t, a)
	phase("backup to MinIO")
	acked := w.stop()
	w.stopAndVerify()
	phase("every acknowledged write read back")

	// The backup's restore drill and the restore run side by side, both on node-4.
	restored := framework.NewCluster(ns, "restored", 1)
	onRealNode(restored)
	restored.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Restore: &v1alpha1.RestoreSpec{BackupName: b.Name}}
	require.NoError(t, framework.Env.Client.Create(context.Background(), restored))
	waitVerified(t, ns, b.Name, metav1.ConditionTrue)
	phase("the backup's restore drill")
	got := framework.WaitReady(t, ns, restored.Name)
	require.NotEmpty(t, got.Status.RestoredFrom)
	onNode4(t, ns, restored.Name)
	have := keys(t, ns, restored.Name, "/writer/")
	n := 0
	for k, rev := range acked {
		if rev <= a.Revision {
			require.Contains(t, have, k, "a write acknowledged at revision %d, before the backup's %d, is restored", rev, a.Revision)
			n++
		}
	}
	require.NotZero(t, n, "writes were acknowledged before the backup")
	t.Logf("the restored cluster holds the %d writes acknowledged at or before revision %d", n, a.Revision)
	writeAWhile(t, ns, restored.Name)
	phase("restore from MinIO on " + stack.RealNodeName)
}

// onRealNode places a cluster's members on node-4.
func onRealNode(c *v1alpha1.EtcdCluster) {
	c.Spec.NodeSelector = map[string]string{stack.RealNodeLabel: "true"}
	c.Spec.Tolerations = []corev1.Toleration{{Key: stack.RealNodeLabel, Operator: corev1.TolerationOpEqual,
		Value: "true", Effect: corev1.TaintEffectNoSchedule}}
}

// onNode4 checks that each of the cluster's member Pods runs on node-4, and returns them.
func onNode4(t *testing.T, ns, cluster string) []corev1.Pod {
	t.Helper()
	pods := framework.MemberPods(t, ns, cluster)
	for _, p := range pods {
		require.Equal(t, stack.RealNodeName, p.Spec.NodeName, "member Pod %s", p.Name)
	}
	return pods
}

// phases logs how long each phase of a test took, ended by calling the function it returns.
func phases(t *testing.T) func(what string) {
	start, last := time.Now(), time.Now()
	return func(what string) {
		t.Logf("%s took %v (%v in all)", what, time.Since(last).Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		last = time.Now()
	}
}

// memberBack waits until the member of the Pod old runs in a new Pod, Ready, and the
// cluster "demo" is Ready with every member.
func memberBack(t *testing.T, ns string, old corev1.Pod) {
	t.Helper()
	n := framework.Get(t, ns, "demo").Spec.Replicas
	framework.WaitFor(t, ns, "demo", 5*time.Minute, "member "+old.Name+" back and Ready", func(c *v1alpha1.EtcdCluster) bool {
		if c.Status.ReadyReplicas != n || !framework.Ready(c) {
			return false
		}
		for _, p := range framework.MemberPods(t, ns, "demo") {
			if p.Name == old.Name && p.UID != old.UID && framework.PodReady(&p) {
				return true
			}
		}
		return false
	})
	framework.CheckMembership(t, ns, "demo")
}

// killEtcd kills the etcd process of a member Pod and returns the exit code its container
// ended with, as the kubelet reported it: watched, since the operator replaces the Pod.
func killEtcd(t *testing.T, ns, pod string) int32 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cs, err := kubernetes.NewForConfig(framework.Env.Stack.RESTConfig())
	require.NoError(t, err)
	p, err := cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	require.NoError(t, err)
	wt, err := cs.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", pod).String(),
		ResourceVersion: p.ResourceVersion})
	require.NoError(t, err)
	defer wt.Stop()
	require.NoError(t, framework.Env.Stack.KillContainer(ctx, ns, pod, vocab.ContainerEtcd))
	for ev := range wt.ResultChan() {
		q, ok := ev.Object.(*corev1.Pod)
		if !ok || q.UID != p.UID || ev.Type == watch.Deleted {
			continue
		}
		for _, s := range q.Status.ContainerStatuses {
			if s.Name == vocab.ContainerEtcd && s.State.Terminated != nil {
				return s.State.Terminated.ExitCode
			}
		}
	}
	t.Fatalf("the etcd container of %s was not seen ending", pod)
	return 0
}
