package controller

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/planner"
)

// Another cluster answering at a member's Pod IP is not this cluster: nothing is planned on
// what it says.
func TestAnotherClusterAtAPodIPIsIgnored(t *testing.T) {
	f := newFixture(t, 3, nil)
	f.setView(func(v *planner.EtcdView) { v.ClusterID = "other" })
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 2 })
	c, _ := f.reconcile()
	require.Equal(t, "c1", c.Status.ClusterID)
	require.Contains(t, c.Status.Plan.Progress[0].Message, "linearizable", "the step waits for this cluster to answer")
	require.Empty(t, f.etcd.Calls())
}

// A look that etcd holds while a member Pod it asks starts to go is given up at once, and
// started again on the Pods as they are then: a stopping etcd holds calls until their
// clocks end, seconds in all.
func TestALookGivesUpAMemberPodThatGoes(t *testing.T) {
	f := newFixture(t, 3, nil)
	ctx := context.Background()
	looks, givenUp := 0, false
	f.etcd.Looking = func(vctx context.Context) {
		if looks++; looks > 1 {
			return
		}
		require.NoError(t, f.kube.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-2"}}))
		select {
		case <-vctx.Done():
			givenUp = true
		case <-time.After(5 * time.Second): // what etcd would hold it for
		}
	}
	f.reconcile()
	require.True(t, givenUp, "the look was given up once demo-2's Pod went")
	require.GreaterOrEqual(t, looks, 2, "and started again")
}
