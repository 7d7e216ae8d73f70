package controller

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/planner"
)

// status.members is the membership a quorum last showed: one member's own view (a stale one
// that misses demo-2 and lists a member that left) refreshes health, never membership.
func TestStatusMembersOnlyFromLinearizableViews(t *testing.T) {
	c := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "default"}}
	c.Spec.Replicas = 3
	c.Status.Members = []v1alpha1.MemberStatus{
		{Name: "demo-0", ID: "1", Role: v1alpha1.RoleVoter, Healthy: true, Leader: true},
		{Name: "demo-1", ID: "2", Role: v1alpha1.RoleVoter, Healthy: true},
		{Name: "demo-2", ID: "3", Role: v1alpha1.RoleVoter, Healthy: true},
	}
	member := func(id, name string) planner.EtcdMember {
		return planner.EtcdMember{ID: id, Name: name, PeerURLs: []string{"http://" + name + ".demo.default.svc:2380"}, Answering: true, Leader: "1", Version: "3.6.16"}
	}
	stale := &planner.EtcdView{ClusterID: "c1", LeaderID: "1", Members: []planner.EtcdMember{member("1", "demo-0"), member("9", "demo-5")}}
	o := &observation{Observed: planner.Observed{Etcd: stale}}
	recordObserved(c, o)
	require.Equal(t, []string{"demo-0", "demo-1", "demo-2"}, names(c.Status.Members))
	require.True(t, c.Status.Members[0].Healthy)
	require.Equal(t, "3.6.16", c.Status.Members[0].Version)
	require.False(t, c.Status.Members[1].Healthy, "a member the view does not show is not known to answer")
	require.Equal(t, "1/3", c.Status.MemberSummary)

	o.Etcd = &planner.EtcdView{ClusterID: "c1", LeaderID: "1", Linearizable: true, Members: []planner.EtcdMember{member("1", "demo-0"), member("9", "demo-5")}}
	recordObserved(c, o)
	require.Equal(t, []string{"demo-0", "demo-5"}, names(c.Status.Members))
}

func names(ms []v1alpha1.MemberStatus) []string {
	out := []string{}
	for _, m := range ms {
		out = append(out, m.Name)
	}
	return out
}
