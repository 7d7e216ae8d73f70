package observe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/agent"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/planner"
)

// A preflight check that found the data gone marks the member's data lost; one that could
// not read it (or failed otherwise) is its own fact, with the check's words: the data may
// be intact.
func TestPreflightOutcome(t *testing.T) {
	ended := func(code int32, msg string, last bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "demo-1", Labels: map[string]string{v1alpha1.LabelMember: "demo-1"}}}
		p.Status.Phase = corev1.PodFailed
		cs := corev1.ContainerStatus{Name: "preflight"}
		term := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Message: msg}}
		if last {
			cs.LastTerminationState = term
		} else {
			cs.State = term
		}
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{cs}
		return p
	}
	tests := []struct {
		name     string
		pod      corev1.Pod
		lost     bool
		preflErr string
	}{
		{"data gone", ended(agent.ExitDataLost, "data directory /var/lib/etcd/data is empty\n", false), true, ""},
		{"data gone, seen in the last termination", ended(agent.ExitDataLost, "", true), true, ""},
		{"unreadable", ended(agent.ExitDataUnreadable, "data directory /var/lib/etcd/data cannot be read: open /var/lib/etcd/data/member: permission denied\n", false),
			false, "exit code 5: data directory /var/lib/etcd/data cannot be read: open /var/lib/etcd/data/member: permission denied"},
		{"the check itself failed, with no words", ended(2, "", true), false, "exit code 2"},
		{"trust bundles not those it was made for: replaced like any ended Pod", ended(agent.ExitTrustChanged, "the mounted trust bundles ...\n", false), false, ""},
		{"passed", ended(0, "", false), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms := Members(Objects{Pods: []corev1.Pod{tt.pod}}, &v1alpha1.EtcdCluster{})
			require.Len(t, ms, 1)
			require.True(t, ms[0].Pod.Failed)
			require.Equal(t, tt.lost, ms[0].Pod.DataLost)
			require.Equal(t, tt.preflErr, ms[0].Pod.PreflightError)
		})
	}
}

// The view the CLI reads from status is as fresh as the operator's last look: a look that
// found no leader read nothing through a quorum, so plans made on it are of a stale view.
func TestViewFromStatusIsStaleWithoutALeader(t *testing.T) {
	c := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns"}}
	c.Status.ClusterID = "c1"
	c.Status.Members = []v1alpha1.MemberStatus{{Name: "demo-0", ID: "1", Role: v1alpha1.RoleVoter, Healthy: true},
		{Name: "demo-1", ID: "2", Role: v1alpha1.RoleVoter}, {Name: "demo-2", ID: "3", Role: v1alpha1.RoleVoter}}
	v := FromStatus(c)
	require.False(t, v.Linearizable, "no member knew a leader at the last look")
	require.Len(t, v.Members, 3)

	c.Status.Members[0].Leader = true
	v = FromStatus(c)
	require.True(t, v.Linearizable)
	require.Equal(t, "1", v.LeaderID)
}

// The view from status says whether auth is on as status last read it for this cluster ID:
// off for a cluster that never had it, unknown for one restored since.
func TestViewFromStatusSaysWhetherAuthIsOn(t *testing.T) {
	c := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns"}}
	c.Status.ClusterID = "c1"
	c.Status.Members = []v1alpha1.MemberStatus{{Name: "demo-0", ID: "1", Role: v1alpha1.RoleVoter, Healthy: true, Leader: true}}
	require.False(t, *FromStatus(c).Auth)
	c.Status.Auth = &v1alpha1.AuthStatus{Enabled: true, ClusterID: "c1"}
	require.True(t, *FromStatus(c).Auth)
	c.Status.ClusterID, c.Status.PreviousClusterID = "c2", "c1"
	require.Nil(t, FromStatus(c).Auth, "read in the cluster it was restored from")
}

// Member Pods that go while their etcd still runs are counted apart: they are no endpoint,
// but their etcd may still confirm a read through a quorum. One whose etcd ended, or whose
// etcd has not started, is not.
func TestStoppingCountsPodsGoingWhileEtcdRuns(t *testing.T) {
	pod := func(name string, going bool, state corev1.ContainerState) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.PodStatus{PodIP: "10.88.0.10",
			ContainerStatuses: []corev1.ContainerStatus{{Name: vocab.ContainerEtcd, State: state}}}}
		if going {
			p.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
		}
		return p
	}
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	ended := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}}
	pods := []corev1.Pod{pod("demo-0", false, running), pod("demo-1", true, running), pod("demo-2", true, ended), pod("demo-3", true, corev1.ContainerState{})}
	require.Equal(t, 1, Stopping(pods))
	require.Len(t, Endpoints(pods), 1, "demo-0 alone is an endpoint")
}

// A check Pod's reading counts for the claim it mounted alone, and only the cluster's own:
// one of a claim since replaced, or made by another hand, says nothing.
func TestCheckCountsForItsClaim(t *testing.T) {
	c := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns", UID: "cluster-uid"}}
	claim := corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "demo-1", UID: "claim-2", Labels: map[string]string{v1alpha1.LabelMember: "demo-1"}}}
	check := func(claimUID string, code int32, owned bool) corev1.Pod {
		p := resources.CheckPod(c, resources.Images{}, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "demo-1", UID: types.UID(claimUID)}},
			&corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "old-pod"}})
		if owned {
			p.OwnerReferences = []metav1.OwnerReference{{UID: c.UID, Controller: ptr.To(true)}}
		}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: vocab.ContainerPreflight,
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}}
		return *p
	}
	read := func(p corev1.Pod) *planner.DataCheck {
		ms := Members(Objects{PVCs: []corev1.PersistentVolumeClaim{claim}, Checks: []corev1.Pod{p}}, c)
		require.Len(t, ms, 1)
		return ms[0].Check
	}
	require.Equal(t, &planner.DataCheck{DataLost: true, PodGone: true}, read(check("claim-2", agent.ExitDataLost, true)))
	require.Equal(t, &planner.DataCheck{PodGone: true}, read(check("claim-2", 0, true)), "the data is there")
	require.Nil(t, read(check("claim-1", agent.ExitDataLost, true)), "a claim since replaced")
	require.Nil(t, read(check("claim-2", agent.ExitDataLost, false)), "not the cluster's")
	going := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "demo-1", UID: "old-pod", Labels: map[string]string{v1alpha1.LabelMember: "demo-1"}}}
	ms := Members(Objects{Pods: []corev1.Pod{going}, PVCs: []corev1.PersistentVolumeClaim{claim}, Checks: []corev1.Pod{check("claim-2", agent.ExitDataLost, true)}}, c)
	require.Equal(t, &planner.DataCheck{DataLost: true}, ms[0].Check, "the Pod it was made beside is still there")
}
