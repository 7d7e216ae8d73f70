package controller

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/agent"
	"github.com/etcdplan/etcdplan/executor/internal/kubetest"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/executor/store"
	"github.com/etcdplan/etcdplan/executor/store/storefake"
	"github.com/etcdplan/etcdplan/planner"
)

// Two of three voters lost their data: the recovery restarts the survivor alone with
// --force-new-cluster, only once approved, marking its claim first; the mark goes once a
// quorum answers again.
func TestQuorumLossRecoveryWaitsForApproval(t *testing.T) {
	f := newFixture(t, 3, nil)
	ctx := context.Background()
	f.dataLost("demo-1", "demo-2")
	f.setView(firstAloneAnswers)
	c, _ := f.reconcile()
	require.Nil(t, c.Status.Plan.Blocked)
	s := c.Status.Plan.Steps[0]
	require.Equal(t, plan.ForceNewCluster, s.Action)
	require.Equal(t, "1", s.MemberID)
	require.Equal(t, v1alpha1.PlanAwaitingApproval, c.Status.Plan.Phase)
	require.Equal(t, "QuorumLost", conditions.GetReason(c, meta.StalledCondition))
	require.Contains(t, conditions.GetMessage(c, meta.StalledCondition), "restarts demo-0 (raft term 0, index 100, the most recent of the voters that kept their data) alone with --force-new-cluster")
	pod := &corev1.Pod{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, pod))
	require.NotContains(t, pod.Annotations, vocab.AnnotationForceNewCluster, "nothing happens before approval")

	id := c.Status.Plan.ID
	f.approve(id)
	f.reconcile()
	pvc := &corev1.PersistentVolumeClaim{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, pvc))
	require.Equal(t, "1", pvc.Annotations[vocab.AnnotationForceNewCluster])
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, pod))
	require.Equal(t, "1", pod.Annotations[vocab.AnnotationForceNewCluster])
	require.Contains(t, pod.Spec.Containers[0].Command, "--force-new-cluster=true")
	require.Contains(t, pod.Spec.InitContainers[0].Command, "--expect-data=true")

	// etcd runs the survivor alone: its claim's mark goes, and the plan goes on.
	f.running(pod, "10.88.0.10")
	f.setView(func(v *planner.EtcdView) {
		v.Linearizable, v.LeaderID, v.Members = true, "1", v.Members[:1]
		v.Members[0].Leader, v.Members[0].Answering = "1", true
	})
	c, _ = f.reconcile()
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, pvc))
	require.NotContains(t, pvc.Annotations, vocab.AnnotationForceNewCluster)
	require.Equal(t, v1alpha1.StepSucceeded, c.Status.Plan.Progress[0].State)
	l := c.Status.LastRecovery
	require.Equal(t, "ForceNewCluster demo-0 "+id, l.Action+" "+l.Member+" "+l.Plan)
	require.NotNil(t, l.FinishedAt, "the survivor answers through a quorum: the recovery is over")
	require.Equal(t, c.Status.ClusterID, l.ClusterID, "under the cluster's own ID")
	require.Equal(t, "DeleteMember demo-1", string(c.Status.Plan.Steps[1].Action)+" "+c.Status.Plan.Steps[1].Member)
	require.Greater(t, c.Status.Plan.Current, int32(1), "the leftovers of the lost members go")
}

// Three of five voters lost their data: the survivor of the later raft term restarts alone,
// though the other has a higher raft index; the other's claim is kept, retained (labelled,
// no owner, named in the approval message and in status), and only its Pod goes.
func TestForcedRecoveryRetainsTheOtherSurvivors(t *testing.T) {
	f := newFixture(t, 5, func(c *v1alpha1.EtcdCluster) { c.Spec.Storage.RetainPolicy = v1alpha1.RetainPolicyDelete })
	ctx := context.Background()
	f.reconcile()
	f.dataLost("demo-2", "demo-3", "demo-4")
	f.setView(func(v *planner.EtcdView) {
		v.Linearizable, v.LeaderID = false, ""
		for i := range v.Members {
			v.Members[i].Leader, v.Members[i].Answering = "", i < 2
		}
		v.Members[0].RaftTerm, v.Members[0].RaftIndex = 5, 120
		v.Members[1].RaftTerm, v.Members[1].RaftIndex = 6, 110
	})
	c, _ := f.reconcile()
	s := c.Status.Plan.Steps[0]
	require.Equal(t, plan.ForceNewCluster, s.Action)
	require.Equal(t, "demo-1", s.Member, "the later term wins over the higher index")
	msg := conditions.GetMessage(c, meta.StalledCondition)
	require.Contains(t, msg, "restarts demo-1 (raft term 6, index 110")
	require.Contains(t, msg, "the volume claims of demo-0, which held data too, are kept (retained)")

	f.approve(c.Status.Plan.ID)
	f.reconcile()
	pvc := &corev1.PersistentVolumeClaim{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, pvc))
	require.Equal(t, "true", pvc.Labels[v1alpha1.LabelRetained])
	require.Contains(t, pvc.Annotations[v1alpha1.AnnotationRetained], "held data when demo-1")
	require.Empty(t, pvc.OwnerReferences, "a retained claim outlives the cluster")

	// demo-1 runs alone: demo-0 leaves with the others; its Pod goes, its claim stays.
	pod := &corev1.Pod{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-1"}, pod))
	f.running(pod, "10.88.0.1")
	f.setView(func(v *planner.EtcdView) {
		v.Linearizable, v.LeaderID, v.Members = true, v.Members[1].ID, v.Members[1:2]
		v.Members[0].Leader, v.Members[0].Answering = v.Members[0].ID, true
	})
	for i := 0; i < 6; i++ {
		c, _ = f.reconcile()
	}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, pvc), "the retained claim is never deleted")
	require.Nil(t, pvc.DeletionTimestamp)
	require.True(t, apierrors.IsNotFound(f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, &corev1.Pod{})), "its Pod went")
	require.Contains(t, strings.Join(c.Status.Warnings, "\n"), "volume claims demo-0 (member 1) are retained")
}

// Every voter lost its data: the plan waits for approval, then starts the cluster anew from
// the newest backup of this cluster on new seeds that each restore it, whose claims are
// marked until the new cluster answers; the old cluster's ID is forgotten, and the old
// members go after.
func TestTotalLossRestoresTheNewestBackup(t *testing.T) {
	f, backup := totalLoss(t)
	ctx := context.Background()
	c, _ := f.reconcile()
	require.Equal(t, plan.BlockQuorumLost, c.Status.Plan.Blocked.Reason, "no backup of this cluster")
	backup("older", "c1", f.now.Add(-2*time.Hour))
	backup("nightly", "c1", f.now.Add(-time.Hour))
	backup("of-another-cluster", "c0", f.now)

	c, _ = f.reconcile()
	s := c.Status.Plan.Steps[0]
	require.Equal(t, plan.RestoreFromBackup, s.Action)
	require.Equal(t, "nightly", s.Backup)
	require.Equal(t, "demo-3", s.Member)
	require.Equal(t, v1alpha1.PlanAwaitingApproval, c.Status.Plan.Phase)
	require.Equal(t, "QuorumLost", conditions.GetReason(c, meta.StalledCondition))
	require.Contains(t, conditions.GetMessage(c, meta.StalledCondition), "starts the cluster anew from EtcdBackup nightly (revision 42, taken ")
	require.Equal(t, "c1", c.Status.ClusterID, "nothing happens before approval")

	id := c.Status.Plan.ID
	f.approve(id)
	c, _ = f.reconcile()
	pvc := &corev1.PersistentVolumeClaim{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-3"}, pvc))
	require.Equal(t, "nightly", pvc.Annotations[vocab.AnnotationRestoreSeed])
	require.Empty(t, c.Status.ClusterID, "the old cluster's ID is forgotten")
	require.Equal(t, "c1", c.Status.PreviousClusterID, "and kept as the previous one: its backups are the cluster's")
	require.Equal(t, "s3://backups/nightly.db", c.Status.RestoredFrom)
	pod := &corev1.Pod{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-3"}, pod))
	require.Equal(t, "EtcdBackup nightly", pod.Annotations[vocab.AnnotationRestore])
	require.Contains(t, strings.Join(pod.Spec.Containers[0].Command, " "), "--initial-cluster-state=new")
	c, _ = f.reconcile() // the seed starts: the same plan, the same step
	require.Equal(t, id, c.Status.Plan.ID)
	require.Equal(t, int32(0), c.Status.Plan.Current)

	for i, seed := range []string{"demo-4", "demo-5"} {
		p := &corev1.Pod{}
		require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: seed}, p), "every seed restores at once")
		require.Equal(t, "EtcdBackup nightly", p.Annotations[vocab.AnnotationRestore])
		require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: seed}, pvc))
		require.Equal(t, "nightly", pvc.Annotations[vocab.AnnotationRestoreSeed])
		f.running(p, fmt.Sprintf("10.88.0.%d", 4+i))
	}
	restore := strings.Join(pod.Spec.InitContainers[2].Command, " ")
	require.Contains(t, restore, "etcdutl snapshot restore")
	require.Contains(t, restore, "--initial-cluster=demo-3=http://demo-3.demo.ns.svc:2380,demo-4=http://demo-4.demo.ns.svc:2380,demo-5=http://demo-5.demo.ns.svc:2380")
	require.Contains(t, strings.Join(pod.Spec.Containers[0].Command, " "), "--initial-cluster=demo-3=http://demo-3.demo.ns.svc:2380,demo-4=")

	// The new cluster answers: the marks go, and the old members' leftovers go.
	f.running(pod, "10.88.0.3")
	f.etcd.SetView(restoredView(c))
	c, _ = f.reconcile()
	require.Equal(t, "c2", c.Status.ClusterID)
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-3"}, pvc))
	require.NotContains(t, pvc.Annotations, vocab.AnnotationRestoreSeed)
	require.Equal(t, "7", pvc.Annotations[vocab.AnnotationMemberID])
	require.Nil(t, c.Status.Plan, "no member joins: the plan ended with the leftovers of the lost members")
	require.Equal(t, id, c.Status.History[0].ID)
	require.Equal(t, v1alpha1.PlanSucceeded, c.Status.History[0].Phase)
	require.Equal(t, "4/4", c.Status.History[0].Steps)
	for _, old := range []string{"demo-0", "demo-1", "demo-2"} {
		require.True(t, apierrors.IsNotFound(f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: old}, &corev1.PersistentVolumeClaim{})), old)
	}
}

// A restore that fails keeps its seed's Pod and says how to go on; once the bad backup and
// the seed's claim are deleted, the recovery is planned anew from the newest backup left
// of the same cluster, though the cluster's own ID was cleared.
func TestFailedRestoreIsPlannedAnewFromTheNextBackup(t *testing.T) {
	f, backup := totalLoss(t)
	ctx := context.Background()
	backup("older", "c1", f.now.Add(-2*time.Hour))
	backup("nightly", "c1", f.now.Add(-time.Hour))
	c, _ := f.reconcile()
	id := c.Status.Plan.ID
	f.approve(id)
	f.reconcile()
	seeds := []string{"demo-3", "demo-4", "demo-5"}
	pod := &corev1.Pod{}
	for _, seed := range seeds { // each fetches the same snapshot
		require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: seed}, pod))
		pod.Status = corev1.PodStatus{Phase: corev1.PodFailed, InitContainerStatuses: []corev1.ContainerStatus{{Name: "restore-fetch",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Message: "snapshot does not match its integrity hash"}}}}}
		require.NoError(t, f.kube.Status().Update(ctx, pod))
	}
	c, _ = f.reconcile()
	require.Equal(t, id, c.Status.Plan.ID)
	require.Contains(t, c.Status.Plan.Progress[0].Message, "restoring from EtcdBackup nightly failed in restore-fetch (exit code 1): "+
		"snapshot does not match its integrity hash; fix the snapshot, or delete EtcdBackup nightly and the volume claims demo-3, demo-4, demo-5")
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-3"}, pod), "kept for its logs")

	require.NoError(t, f.kube.Delete(ctx, &v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "nightly"}}))
	for _, seed := range seeds {
		require.NoError(t, f.kube.Delete(ctx, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: seed}}))
	}
	c, _ = f.reconcile()
	require.Nil(t, c.Status.Plan.Blocked)
	s := c.Status.Plan.Steps[0]
	require.Equal(t, "RestoreFromBackup demo-6 older", string(s.Action)+" "+s.Member+" "+s.Backup)
	require.Equal(t, v1alpha1.PlanAwaitingApproval, c.Status.Plan.Phase, "a new plan, approved anew")
}

// A survivor whose Pod is gone is started before the recovery waits for approval: starting
// it costs nothing, and only its preflight can tell whether it kept its data. Here it did
// not, so the recovery becomes a restore from the newest backup, approved on that evidence.
func TestSurvivorWithoutAPodStartsBeforeTheRecoveryIsApproved(t *testing.T) {
	f, backup := totalLoss(t)
	ctx := context.Background()
	backup("nightly", "c1", f.now.Add(-time.Hour))
	require.NoError(t, f.kube.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-0"}}))
	f.drain()
	c, _ := f.reconcile()
	// The Pod shows in the cache at once: the plan is done within the reconcile.
	require.Nil(t, c.Status.Plan)
	require.Equal(t, "StartMember demo-0", c.Status.History[0].Actions, "no survivor is named before it shows its data")
	require.Equal(t, v1alpha1.PlanSucceeded, c.Status.History[0].Phase)
	require.Contains(t, strings.Join(f.drain(), "\n"), "StartMember demo-0: a majority of voters lost their data: demo-0 runs, to show whether it kept its own")
	require.Contains(t, strings.Join(c.Status.Warnings, "\n"), "no recovery is planned yet: waiting for demo-0 to show whether it kept its data")
	pod := &corev1.Pod{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, pod), "started without approval")
	require.NotContains(t, pod.Annotations, vocab.AnnotationForceNewCluster)

	f.dataLost("demo-0")
	c, _ = f.reconcile()
	s := c.Status.Plan.Steps[0]
	require.Equal(t, "RestoreFromBackup demo-3 nightly", string(s.Action)+" "+s.Member+" "+s.Backup)
	require.Equal(t, v1alpha1.PlanAwaitingApproval, c.Status.Plan.Phase)
	require.Equal(t, "c1", c.Status.ClusterID, "nothing happens before approval")
}

// A survivor whose Pod was gone and that kept its data: once started, its plan is done, and
// the next one restarts it alone, which waits for approval.
func TestSurvivorStartedKeepsThePlanAndWaitsForApproval(t *testing.T) {
	f := newFixture(t, 3, nil)
	ctx := context.Background()
	f.dataLost("demo-1", "demo-2")
	require.NoError(t, f.kube.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-0"}}))
	f.etcd.SetView(nil)
	c, _ := f.reconcile()
	require.Nil(t, c.Status.Plan, "the Pod shows in the cache at once: the plan is done within the reconcile")
	id := c.Status.History[0].ID
	require.Equal(t, "StartMember demo-0", c.Status.History[0].Actions)

	pod := &corev1.Pod{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, pod))
	f.running(pod, "10.88.0.10")
	f.etcd.SetView(&planner.EtcdView{ClusterID: "c1", Members: []planner.EtcdMember{{ID: "1", Name: "demo-0",
		PeerURLs: []string{vocab.PeerURL(c.Name, c.Namespace, "demo-0", false)}, Answering: true, Version: "3.6.16", RaftIndex: 100}}})
	c, _ = f.reconcile()
	require.Equal(t, id, c.Status.History[0].ID)
	require.Equal(t, v1alpha1.PlanSucceeded, c.Status.History[0].Phase)
	require.Equal(t, plan.ForceNewCluster, c.Status.Plan.Steps[c.Status.Plan.Current].Action)
	require.Equal(t, v1alpha1.PlanAwaitingApproval, c.Status.Plan.Phase)
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, pod))
	require.NotContains(t, pod.Annotations, vocab.AnnotationForceNewCluster, "nothing more before approval")
}

// totalLoss is a cluster of three whose voters all lost their data, and a way to give it
// stored backups.
func totalLoss(t *testing.T) (*fixture, func(name, clusterID string, at time.Time)) {
	f := newFixture(t, 3, nil)
	f.dataLost("demo-0", "demo-1", "demo-2")
	f.etcd.SetView(nil)
	return f, f.backups()
}

// backups gives the reconciler a store in memory, and returns what makes a successful
// backup of the cluster there.
func (f *fixture) backups() func(name, clusterID string, at time.Time) {
	t, ctx := f.t, context.Background()
	mem := storefake.New()
	f.r.Open = func(_ context.Context, d v1alpha1.BackupDestination, _ store.Credentials) (store.Store, error) {
		return mem.Open(d), nil
	}
	return func(name, clusterID string, at time.Time) {
		b := &v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
		b.Spec.ClusterRef.Name = "demo"
		b.Spec.Destination.S3 = &v1alpha1.S3Destination{Bucket: "backups"}
		require.NoError(t, f.kube.Create(ctx, b))
		b.Status.Phase = v1alpha1.BackupSucceeded
		b.Status.Artifact = &v1alpha1.Artifact{URI: "s3://backups/" + name + ".db", SHA256: strings.Repeat("ab", 32), EtcdVersion: "3.6.16",
			Revision: 42, ClusterID: clusterID, TakenAt: metav1.NewTime(at)}
		require.NoError(t, f.kube.Status().Update(ctx, b))
		require.NoError(t, mem.Put(ctx, name+".db", bytes.NewReader([]byte("snapshot"))))
	}
}

// dataLost ends the members' Pods as their preflight check does on an empty volume.
func (f *fixture) dataLost(names ...string) {
	ctx := context.Background()
	for _, name := range names {
		p := &corev1.Pod{}
		require.NoError(f.t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, p))
		p.Status = corev1.PodStatus{Phase: corev1.PodFailed, InitContainerStatuses: []corev1.ContainerStatus{{Name: "preflight",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: agent.ExitDataLost}}}}}
		require.NoError(f.t, f.kube.Status().Update(ctx, p))
	}
}

// A restore with an old learner still running: the learner's Pod is stopped and gone
// before the seed starts (both held for approval), and once the restore is under way only
// the seed's answer is taken: an answer for the previous cluster ID, or from another
// member, is ignored, so the previous ID is never written back and no second seed is made.
func TestRestoreIsTheOnlyClusterBehindTheService(t *testing.T) {
	f, backup := totalLoss(t)
	ctx := context.Background()
	backup("nightly", "c1", f.now.Add(-time.Hour))
	c := f.cluster()
	learner := kubetest.MemberPod(c, "demo-3")
	require.NoError(t, f.kube.Create(ctx, learner))
	require.NoError(t, f.kube.Create(ctx, kubetest.MemberPVC(c, "demo-3", "4")))
	old := &planner.EtcdView{ClusterID: "c1", LeaderID: "", Members: []planner.EtcdMember{
		{ID: "1", Name: "demo-0", PeerURLs: []string{vocab.PeerURL(c.Name, c.Namespace, "demo-0", false)}},
		{ID: "2", Name: "demo-1", PeerURLs: []string{vocab.PeerURL(c.Name, c.Namespace, "demo-1", false)}},
		{ID: "3", Name: "demo-2", PeerURLs: []string{vocab.PeerURL(c.Name, c.Namespace, "demo-2", false)}},
		{ID: "4", Name: "demo-3", PeerURLs: []string{vocab.PeerURL(c.Name, c.Namespace, "demo-3", false)}, Learner: true, Answering: true, Version: "3.6.16", RaftIndex: 90}}}
	f.etcd.SetView(old)
	// Status holds the membership a quorum last showed, the learner included: the view
	// above, read without a quorum, is never recorded.
	c.Status.Members = []v1alpha1.MemberStatus{{Name: "demo-0", ID: "1", Role: v1alpha1.RoleVoter}, {Name: "demo-1", ID: "2", Role: v1alpha1.RoleVoter},
		{Name: "demo-2", ID: "3", Role: v1alpha1.RoleVoter}, {Name: "demo-3", ID: "4", Role: v1alpha1.RoleLearner}}
	require.NoError(t, f.kube.Status().Update(ctx, c))

	c, _ = f.reconcile()
	require.Nil(t, c.Status.Plan.Blocked)
	steps := c.Status.Plan.Steps
	require.Equal(t, "StopMember demo-3", string(steps[0].Action)+" "+steps[0].Member)
	require.Equal(t, "RestoreFromBackup demo-4", string(steps[1].Action)+" "+steps[1].Member)
	require.Equal(t, v1alpha1.PlanAwaitingApproval, c.Status.Plan.Phase, "stopping the old cluster is part of the recovery")
	require.Contains(t, conditions.GetMessage(c, meta.StalledCondition), "stops the Pod of demo-3, starts the cluster anew from EtcdBackup nightly")
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-3"}, &corev1.Pod{}), "nothing happens before approval")
	require.Error(t, f.r.seedAlone(ctx, c, []string{"demo-4", "demo-5", "demo-6"}), "no seed starts while another member Pod runs")

	id := c.Status.Plan.ID
	f.approve(id)
	f.reconcile() // the learner's Pod goes
	require.NoError(t, f.r.seedAlone(ctx, c, []string{"demo-4", "demo-5", "demo-6"}))
	c, _ = f.reconcile() // then the seed starts
	require.Equal(t, id, c.Status.Plan.ID)
	require.Empty(t, c.Status.ClusterID)
	require.Equal(t, "c1", c.Status.PreviousClusterID)
	seed := &corev1.Pod{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-4"}, seed))
	seed.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.88.0.4",
		ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	require.NoError(t, f.kube.Status().Update(ctx, seed))

	// While the seed restores, its Pod IP answers for the old cluster, then another member
	// of a new cluster answers: neither is taken as the cluster.
	newView := func(id, name string) *planner.EtcdView {
		return &planner.EtcdView{ClusterID: "c2", Linearizable: true, LeaderID: id, Members: []planner.EtcdMember{{ID: id, Name: name,
			PeerURLs: []string{vocab.PeerURL(c.Name, c.Namespace, name, c.Spec.TLS.PeerTLS())}, Answering: true, Leader: id, Version: "3.6.16", RaftIndex: 5}}}
	}
	for _, v := range []*planner.EtcdView{old, newView("9", "demo-0")} {
		f.etcd.SetView(v)
		c, _ = f.reconcile()
		require.Empty(t, c.Status.ClusterID)
		require.Equal(t, "c1", c.Status.PreviousClusterID)
		require.Equal(t, id, c.Status.Plan.ID, "the same restore goes on")
		require.Equal(t, plan.RestoreFromBackup, c.Status.Plan.Steps[c.Status.Plan.Current].Action)
		require.Error(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-7"}, &corev1.Pod{}), "no seed but the restore's")
	}

	// The seed answers under a new cluster ID: that is the cluster.
	f.etcd.SetView(newView("7", "demo-4"))
	c, _ = f.reconcile()
	require.Equal(t, "c2", c.Status.ClusterID)
	require.Equal(t, v1alpha1.StepSucceeded, c.Status.Plan.Progress[1].State)
}

// A restore whose plan a fresh one would supersede while its seed starts is held at that
// step, which is not applied again, until the look shows how it went: once the seed answers
// through a quorum under a new cluster ID, the step succeeded, history says so, and
// status.lastRecovery and an Event hold the outcome; the fresh plan goes on from there.
func TestRestoreSupersededAfterItsEffectIsOnRecord(t *testing.T) {
	f, backup := totalLoss(t)
	ctx := context.Background()
	backup("nightly", "c1", f.now.Add(-time.Hour))
	applied := 0
	f.r.AfterEffect = func(string, int) { applied++ }
	c, _ := f.reconcile()
	id := c.Status.Plan.ID
	f.approve(id)
	c, _ = f.reconcile()
	require.Equal(t, 1, applied)
	require.Empty(t, c.Status.ClusterID, "the restore took effect")
	l := c.Status.LastRecovery
	require.NotNil(t, l)
	require.Equal(t, v1alpha1.RecoveryStatus{Plan: id, Action: "RestoreFromBackup", Member: "demo-3", Backup: "nightly", FromClusterID: "c1",
		StartedAt: v1alpha1.At(f.now)}, *l)
	require.Contains(t, strings.Join(f.drain(), "\n"), "Warning RecoveryStarted recovery from quorum loss (plan "+id+"): a new cluster restored from EtcdBackup nightly on seed demo-3")

	// The spec changes while the seed starts: the plan waits for the restore's outcome.
	f.now = f.now.Add(time.Second)
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 5 })
	for range 2 {
		c, _ = f.reconcile()
		require.Equal(t, id, c.Status.Plan.ID, "held at its recovery step")
		require.Zero(t, c.Status.Plan.Current)
		require.Empty(t, c.Status.History)
		require.Contains(t, c.Status.Plan.Progress[0].Message, "waits for this step's outcome")
		require.Contains(t, conditions.GetMessage(c, meta.ReconcilingCondition), "RestoreFromBackup demo-3 (waiting for its outcome)")
	}
	require.Equal(t, 1, applied, "a held step is not applied again")

	pod := &corev1.Pod{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-3"}, pod))
	f.running(pod, "10.88.0.3")
	f.etcd.SetView(&planner.EtcdView{ClusterID: "c2", Linearizable: true, LeaderID: "7", Members: []planner.EtcdMember{{ID: "7", Name: "demo-3",
		PeerURLs: []string{vocab.PeerURL(c.Name, c.Namespace, "demo-3", false)}, Answering: true, Leader: "7", Version: "3.6.16", RaftIndex: 5}}})
	f.now = f.now.Add(2 * time.Second)
	c, _ = f.reconcile()
	l = c.Status.LastRecovery
	require.Equal(t, "c2", l.ClusterID)
	require.NotNil(t, l.FinishedAt)
	h := c.Status.History[0]
	require.Equal(t, id, h.ID)
	require.Equal(t, v1alpha1.PlanSuperseded, h.Phase)
	require.Equal(t, "1/4", h.Steps, "the restore is on record as done")
	require.Contains(t, h.Message, "after step 1/4 RestoreFromBackup demo-3 took effect: cluster c2 answers through a quorum")
	require.NotEqual(t, id, c.Status.Plan.ID, "the fresh plan goes on")
	require.Equal(t, "c2", c.Status.ClusterID)
	events := strings.Join(f.drain(), "\n")
	require.Contains(t, events, "Normal Recovered recovery from quorum loss (plan "+id+"): a new cluster restored from EtcdBackup nightly on seed demo-3: "+
		"it answers through a quorum as cluster c2, 3s after it started")
	require.Contains(t, events, "Normal StepSucceeded step 1/4 RestoreFromBackup demo-3 succeeded")
}

// A recovery step is held for its outcome no longer than its deadline: past it, the plan is
// superseded saying the step was applied and what became of it is for the cluster to show;
// status.lastRecovery keeps the recovery, and the next plan goes on with the same seed.
func TestHeldRecoveryIsSupersededPastItsDeadline(t *testing.T) {
	f, backup := totalLoss(t)
	backup("nightly", "c1", f.now.Add(-time.Hour))
	c, _ := f.reconcile()
	id := c.Status.Plan.ID
	f.approve(id)
	f.reconcile()
	f.update(func(c *v1alpha1.EtcdCluster) { c.Spec.Replicas = 5 })
	c, _ = f.reconcile()
	require.Equal(t, id, c.Status.Plan.ID, "held")
	f.now = c.Status.Plan.Progress[0].Deadline.Add(time.Second)
	c, _ = f.reconcile()
	h := c.Status.History[0]
	require.Equal(t, id, h.ID)
	require.Equal(t, v1alpha1.PlanSuperseded, h.Phase)
	require.Contains(t, h.Message, "after step 1/4 RestoreFromBackup demo-3 was applied; whether it took effect, the cluster shows")
	require.Equal(t, id, c.Status.LastRecovery.Plan)
	require.Nil(t, c.Status.LastRecovery.FinishedAt)
	s := c.Status.Plan.Steps[c.Status.Plan.Current]
	require.Equal(t, "RestoreFromBackup demo-3 nightly", string(s.Action)+" "+s.Member+" "+s.Backup, "the same restore goes on")
}

// The restored seed answered on its own (before it elected itself), so its new cluster ID
// was taken; then its Pod went. The restore goes on with the same seed: the old members
// (still in status, their claims still recording IDs) are not voters of the restored
// cluster that lost their data, and the new ID, of a cluster that never formed a quorum, is
// never taken for the previous one.
func TestRestoreGoesOnAfterTheSeedAnswered(t *testing.T) {
	f, backup := totalLoss(t)
	ctx := context.Background()
	backup("nightly", "c1", f.now.Add(-time.Hour))
	c, _ := f.reconcile()
	f.approve(c.Status.Plan.ID)
	f.reconcile()
	pod := &corev1.Pod{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-3"}, pod))
	f.running(pod, "10.88.0.3")
	f.etcd.SetView(&planner.EtcdView{ClusterID: "c2", Members: []planner.EtcdMember{{ID: "7", Name: "demo-3",
		PeerURLs: []string{vocab.PeerURL(c.Name, c.Namespace, "demo-3", false)}, Answering: true, Version: "3.6.16", RaftTerm: 2, RaftIndex: 5}}})
	c, _ = f.reconcile()
	require.Equal(t, "c2", c.Status.ClusterID, "the seed's first answer")
	require.Equal(t, plan.RestoreFromBackup, c.Status.Plan.Steps[c.Status.Plan.Current].Action, "%v", c.Status.Plan.Steps)

	// Its Pod goes before it formed a quorum: the same restore starts it again.
	require.NoError(t, f.kube.Delete(ctx, pod))
	f.etcd.SetView(nil)
	for range 3 {
		c, _ = f.reconcile()
		require.NotNil(t, c.Status.Plan)
		for _, s := range c.Status.Plan.Steps[c.Status.Plan.Current:] {
			require.NotEqual(t, plan.ForceNewCluster, s.Action, "%v", c.Status.Plan.Steps)
		}
	}
	require.Equal(t, "c1", c.Status.PreviousClusterID, "the old cluster stays the previous one")
	require.Empty(t, c.Status.ClusterID, "the restored cluster never formed: the seed's next answer counts")
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-3"}, pod), "the seed's Pod again")
	require.Equal(t, "nightly", pod.Annotations[vocab.AnnotationRestoreSeed])
}

// A seed answers alone, before its peers: the restore goes on under the cluster ID its
// answer set, and a peer whose Pod went gets one again from the restore, now expecting its
// data: a member of the restored cluster never restores again.
func TestRestoreGoesOnWhileASeedAnswersAlone(t *testing.T) {
	f, backup := totalLoss(t)
	ctx := context.Background()
	backup("nightly", "c1", f.now.Add(-time.Hour))
	c, _ := f.reconcile()
	id := c.Status.Plan.ID
	f.approve(id)
	f.reconcile()
	pod := &corev1.Pod{}
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-3"}, pod))
	require.Contains(t, strings.Join(pod.Spec.InitContainers[0].Command, " "), "--expect-data=false")
	f.running(pod, "10.88.0.3")
	alone := restoredView(c)
	alone.Linearizable, alone.LeaderID = false, ""
	for i := range alone.Members {
		alone.Members[i].Leader, alone.Members[i].Answering = "", i == 0
	}
	f.etcd.SetView(alone)
	require.NoError(t, f.kube.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-5"}}))
	for range 2 {
		c, _ = f.reconcile()
	}
	require.Equal(t, "c2", c.Status.ClusterID, "the seed's answer is the cluster's, kept while its peers start")
	require.Equal(t, id, c.Status.Plan.ID, "the same restore goes on")
	require.Equal(t, plan.RestoreFromBackup, c.Status.Plan.Steps[c.Status.Plan.Current].Action)
	require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-5"}, pod), "the peer's Pod again")
	require.Contains(t, strings.Join(pod.Spec.InitContainers[0].Command, " "), "--expect-data=true", "never restored twice")
	require.Len(t, pod.Spec.InitContainers, 1, "no restore: only the preflight check")
}

// restoredView is the view, read through its quorum, of cluster c2 restored on demo-3 to
// demo-5 (member IDs 7 to 9), demo-3 leading.
func restoredView(c *v1alpha1.EtcdCluster) *planner.EtcdView {
	v := &planner.EtcdView{ClusterID: "c2", Linearizable: true, LeaderID: "7"}
	for i, n := range []string{"demo-3", "demo-4", "demo-5"} {
		v.Members = append(v.Members, planner.EtcdMember{ID: strconv.Itoa(7 + i), Name: n, PeerURLs: []string{vocab.PeerURL(c.Name, c.Namespace, n, false)},
			Answering: true, Leader: "7", Version: "3.6.16", RaftIndex: 5})
	}
	return v
}

// firstAloneAnswers makes a view of the first member alone answering, without a quorum:
// the others lost their data, or do not run.
func firstAloneAnswers(v *planner.EtcdView) {
	v.Linearizable, v.LeaderID = false, ""
	for i := range v.Members {
		v.Members[i].Leader, v.Members[i].Answering = "", i == 0
	}
}

// running sets a member Pod's status to running etcd at ip.
func (f *fixture) running(pod *corev1.Pod, ip string) {
	f.t.Helper()
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip,
		ContainerStatuses: []corev1.ContainerStatus{{Name: "etcd", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	require.NoError(f.t, f.kube.Status().Update(context.Background(), pod))
}

// holdGoing deletes member Pods that a finalizer holds: they stay, terminating, until it
// is removed.
func (f *fixture) holdGoing(names ...string) {
	f.t.Helper()
	ctx := context.Background()
	for _, name := range names {
		p := &corev1.Pod{}
		require.NoError(f.t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, p))
		p.Finalizers = []string{"test/hold"}
		require.NoError(f.t, f.kube.Update(ctx, p))
		require.NoError(f.t, f.kube.Delete(ctx, p))
	}
}

// checking makes the check Pods of members, as CheckData does: their checks are under way.
func (f *fixture) checking(names ...string) {
	f.t.Helper()
	ctx := context.Background()
	c := f.cluster()
	for _, name := range names {
		claim, going := &corev1.PersistentVolumeClaim{}, &corev1.Pod{}
		require.NoError(f.t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, claim))
		require.NoError(f.t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: name}, going))
		p := resources.CheckPod(c, resources.Images{}, claim, going)
		require.NoError(f.t, controllerutil.SetControllerReference(c, p, f.kube.Scheme()))
		require.NoError(f.t, f.kube.Create(ctx, p))
	}
}

// deletes records the grace period of every Pod deletion the reconciler asks (-1: none).
func (f *fixture) deletes() *[]string {
	var got []string
	f.r.Client = interceptor.NewClient(f.kube.(client.WithWatch), interceptor.Funcs{
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			if _, ok := obj.(*corev1.Pod); ok {
				do := &client.DeleteOptions{}
				do.ApplyOptions(opts)
				got = append(got, fmt.Sprintf("%s %d", obj.GetName(), ptr.Deref(do.GracePeriodSeconds, -1)))
				if err := c.Delete(ctx, obj, opts...); err != nil || do.GracePeriodSeconds == nil {
					return err
				}
				// As the API server does, a Pod held by a finalizer records the shorter grace.
				p := &corev1.Pod{}
				if c.Get(ctx, client.ObjectKeyFromObject(obj), p) == nil && p.DeletionTimestamp != nil {
					p.DeletionGracePeriodSeconds = do.GracePeriodSeconds
					_ = c.Update(ctx, p)
				}
				return nil
			}
			return c.Delete(ctx, obj, opts...)
		}})
	return &got
}

// While no quorum answers and no other voter runs, a member Pod goes with a grace period of
// one second: the survivor restarted alone, and an old Pod some other hand deleted, which
// a step waits for. With a quorum, Pods keep their grace period.
func TestPodsGoAtOnceWithoutAQuorum(t *testing.T) {
	t.Run("the survivor restarted alone", func(t *testing.T) {
		f := newFixture(t, 3, func(c *v1alpha1.EtcdCluster) {
			c.Spec.Recovery = &v1alpha1.RecoverySpec{QuorumLoss: v1alpha1.QuorumLossAutomatic, AutoApproveDataLoss: true}
		})
		f.dataLost("demo-1", "demo-2")
		f.setView(firstAloneAnswers)
		got := f.deletes()
		c, _ := f.reconcile()
		require.Equal(t, plan.ForceNewCluster, c.Status.Plan.Steps[0].Action)
		require.Equal(t, []string{"demo-0 1"}, *got)
	})
	t.Run("an old Pod going", func(t *testing.T) {
		f := newFixture(t, 3, nil)
		ctx := context.Background()
		f.dataLost("demo-1", "demo-2") // their Pods ended: they run no etcd, and need no step before demo-0's
		p := &corev1.Pod{}
		require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, p))
		p.Finalizers = []string{"test/hold"}
		require.NoError(t, f.kube.Update(ctx, p))
		require.NoError(t, f.kube.Delete(ctx, p)) // stays, terminating, while the finalizer holds it
		f.checking("demo-0")
		f.setView(firstAloneAnswers)
		got := f.deletes()
		c, _ := f.reconcile()
		require.Equal(t, plan.StartMember, c.Status.Plan.Steps[0].Action)
		require.Equal(t, "demo-0", c.Status.Plan.Steps[0].Member)
		require.Contains(t, c.Status.Plan.Progress[0].Message, "waiting for the old Pod of demo-0 to go")
		require.Equal(t, []string{"demo-0 1"}, *got)
	})
	t.Run("every voter's Pod going, at the first look", func(t *testing.T) {
		f := newFixture(t, 3, nil)
		f.holdGoing("demo-0", "demo-1", "demo-2")
		f.setView(firstAloneAnswers)
		got := f.deletes()
		f.reconcile()
		require.Equal(t, []string{"demo-0 1", "demo-1 1", "demo-2 1"}, *got, "each cut once, not only the Pod of the member the step starts")
		stopped := slices.DeleteFunc(f.drain(), func(e string) bool { return !strings.HasPrefix(e, "Normal "+v1alpha1.ReasonStoppedAtOnce+" ") })
		require.Len(t, stopped, 3)
		require.Contains(t, stopped[0], "Pod demo-0, going, stops within 1s: no quorum answers")
	})
	t.Run("an old Pod that goes while the step waits", func(t *testing.T) {
		f := newFixture(t, 3, nil)
		ctx := context.Background()
		f.dataLost("demo-1", "demo-2") // their Pods ended: they run no etcd, and need no step before demo-0's
		p := &corev1.Pod{}
		require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, p))
		p.Finalizers, p.Labels["test/old"] = []string{"test/hold"}, "yes"
		require.NoError(t, f.kube.Update(ctx, p))
		require.NoError(t, f.kube.Delete(ctx, p))
		f.checking("demo-0")
		f.setView(firstAloneAnswers)
		go func() { // the kubelet ends it a moment later
			time.Sleep(100 * time.Millisecond)
			// A patch, not an update: the step may shorten the Pod's grace period meanwhile,
			// and an update read before that would conflict and leave the Pod held.
			old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-0"}}
			_ = f.kube.Patch(ctx, old, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
		}()
		c, _ := f.reconcile()
		require.Equal(t, plan.StartMember, c.Status.Plan.Steps[0].Action)
		require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, p))
		require.NotContains(t, p.Labels, "test/old", "the new Pod is made in the same reconcile, not after another look")
		require.Nil(t, p.DeletionTimestamp)
	})
	t.Run("another Pod that starts to go ends the wait", func(t *testing.T) {
		f := newFixture(t, 3, nil)
		ctx := context.Background()
		f.dataLost("demo-2")
		p := &corev1.Pod{}
		require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-0"}, p))
		p.Finalizers = []string{"test/hold"}
		require.NoError(t, f.kube.Update(ctx, p))
		require.NoError(t, f.kube.Delete(ctx, p)) // held: the step waits for it
		f.checking("demo-0")
		f.setView(firstAloneAnswers)
		polls := 0
		f.r.APIReader = interceptor.NewClient(f.kube.(client.WithWatch), interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*corev1.Pod); ok && key.Name == "demo-0" {
					if polls++; polls == 1 { // demo-1's Pod is deleted while the step waits
						require.NoError(t, c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-1"}}))
					}
				}
				return c.Get(ctx, key, obj, opts...)
			}})
		c, _ := f.reconcile()
		require.Equal(t, "StartMember demo-0", string(c.Status.Plan.Steps[0].Action)+" "+c.Status.Plan.Steps[0].Member)
		require.Contains(t, c.Status.Plan.Progress[0].Message, "waiting for the old Pod of demo-0 to go")
		require.Equal(t, 1, polls, "the wait ends as soon as demo-1's Pod went (not after soonWait): the next look plans anew")
	})
	t.Run("another Pod going that is gone ends the wait", func(t *testing.T) {
		f := newFixture(t, 3, nil)
		f.dataLost("demo-2")
		f.holdGoing("demo-0", "demo-1") // both held: the step for demo-0 waits
		f.checking("demo-0", "demo-1")
		f.setView(firstAloneAnswers)
		polls := 0
		f.r.APIReader = interceptor.NewClient(f.kube.(client.WithWatch), interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*corev1.Pod); ok && key.Name == "demo-0" {
					if polls++; polls == 1 { // demo-1's Pod goes while the step waits
						old := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "demo-1"}}
						require.NoError(t, c.Patch(ctx, old, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))))
					}
				}
				return c.Get(ctx, key, obj, opts...)
			}})
		c, _ := f.reconcile()
		require.Equal(t, "StartMember demo-0", string(c.Status.Plan.Steps[0].Action)+" "+c.Status.Plan.Steps[0].Member)
		require.Contains(t, c.Status.Plan.Progress[0].Message, "waiting for the old Pod of demo-0 to go")
		require.Equal(t, 1, polls, "the wait ends as soon as demo-1's Pod is gone (not after soonWait): the next look starts demo-1 first")
		c, _ = f.reconcile()
		require.Equal(t, "StartMember demo-1", string(c.Status.Plan.Steps[0].Action)+" "+c.Status.Plan.Steps[0].Member)
	})
	t.Run("a quorum answers", func(t *testing.T) {
		f := newFixture(t, 3, nil)
		ctx := context.Background()
		p := &corev1.Pod{}
		require.NoError(t, f.kube.Get(ctx, client.ObjectKey{Namespace: "ns", Name: "demo-1"}, p))
		p.Finalizers = []string{"test/hold"}
		require.NoError(t, f.kube.Update(ctx, p))
		require.NoError(t, f.kube.Delete(ctx, p))
		f.setView(func(v *planner.EtcdView) { v.Members[1].Answering, v.Members[1].Leader = false, "" })
		got := f.deletes()
		c, _ := f.reconcile()
		require.Equal(t, plan.StartMember, c.Status.Plan.Steps[0].Action)
		require.Empty(t, *got, "the Pod stops gracefully: the leadership may move to a voter that stays")
	})
}
