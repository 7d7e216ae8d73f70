package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/test/framework"
	"github.com/etcdplan/etcdplan/test/stack"
)

// The operator's cluster on node-4, the real kubelet over containerd and runc, in a
// namespace enforcing `restricted`: its member Pods run from images with their security
// context enforced (read-only root, non-root, no capabilities, seccomp). Three members
// bootstrap, a member Pod deleted comes back, and every acknowledged write is read back.
// It needs the stack with node-4 (ETCDPLAN_REAL_NODE=1); `make test` runs it with the
// exclusive end-to-end tests, where the stack is this package's alone and adds node-4.
func TestExclusiveRealNodeCluster(t *testing.T) {
	if !stack.RealNodeWanted() {
		t.Skip("needs node-4: ETCDPLAN_REAL_NODE=1 (make test runs it with the exclusive end-to-end tests)")
	}
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	start := time.Now()
	onRealNode := func(c *v1alpha1.EtcdCluster) {
		c.Spec.NodeSelector = map[string]string{stack.RealNodeLabel: "true"}
		c.Spec.Tolerations = []corev1.Toleration{{Key: stack.RealNodeLabel, Operator: corev1.TolerationOpEqual,
			Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
	c := framework.CreateReady(t, ns, 3, onRealNode)
	t.Logf("bootstrap of 3 members on %s took %v", stack.RealNodeName, time.Since(start).Round(time.Millisecond))
	require.EqualValues(t, 3, c.Status.ReadyReplicas)
	pods := framework.MemberPods(t, ns, "demo")
	require.Len(t, pods, 3)
	for _, p := range pods {
		require.Equal(t, stack.RealNodeName, p.Spec.NodeName, "member Pod %s", p.Name)
	}
	w := startWriter(t, ns, "demo")
	w.waitAcked()

	victim := pods[0]
	require.NoError(t, framework.Env.Client.Delete(context.Background(), &victim))
	framework.WaitFor(t, ns, "demo", 5*time.Minute, "the deleted member back and Ready", func(c *v1alpha1.EtcdCluster) bool {
		if c.Status.ReadyReplicas != 3 || !framework.Ready(c) {
			return false
		}
		for _, p := range framework.MemberPods(t, ns, "demo") {
			if p.Name == victim.Name && p.UID != victim.UID && framework.PodReady(&p) {
				return true
			}
		}
		return false
	})
	w.stopAndVerify()
	w.stillThere()
	framework.CheckMembership(t, ns, "demo")
}
