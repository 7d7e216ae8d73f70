package controller

import (
	"testing"

	"github.com/stretchr/testify/require"

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
