package e2e

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/test/framework"
)

func TestBootstrap(t *testing.T) {
	for _, n := range []int32{1, 3, 5} {
		t.Run(map[int32]string{1: "one", 3: "three", 5: "five"}[n], func(t *testing.T) {
			t.Parallel()
			ns := framework.Namespace(t)
			framework.StartOperator(t, ns)
			start := time.Now()
			c := framework.CreateReady(t, ns, n)
			t.Logf("bootstrap of %d members took %v", n, time.Since(start).Round(time.Millisecond))
			require.EqualValues(t, n, c.Status.ReadyReplicas)
			require.NotEmpty(t, c.Status.ClusterID)
			w := startWriter(t, ns, "demo")
			time.Sleep(time.Second)
			w.stopAndVerify()
			framework.CheckMembership(t, ns, "demo")
		})
	}
}

func TestScale(t *testing.T) {
	t.Parallel()
	ns := framework.Namespace(t)
	framework.StartOperator(t, ns)
	framework.CreateReady(t, ns, 3)
	w := startWriter(t, ns, "demo")
	for _, n := range []int32{5, 3, 1, 3} {
		start := time.Now()
		framework.Update(t, ns, "demo", func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = n })
		framework.WaitReady(t, ns, "demo")
		t.Logf("scale to %d took %v", n, time.Since(start).Round(time.Millisecond))
		framework.CheckMembership(t, ns, "demo")
	}
	w.stopAndVerify()
}
