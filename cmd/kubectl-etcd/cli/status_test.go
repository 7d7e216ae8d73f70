package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/observe"
)

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func at(ago time.Duration) *v1alpha1.Instant { return v1alpha1.At(now.Add(-ago)) }

// scalingCluster is demo scaling from 3 to 4: the learner demo-3 has been added and its
// Pod runs; demo-1 leads.
func scalingCluster() (*v1alpha1.EtcdCluster, observe.Objects) {
	ec := &v1alpha1.EtcdCluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "demo", Generation: 4},
		Spec:       v1alpha1.EtcdClusterSpec{Replicas: 4, Version: "3.6.16"},
	}
	ec.Spec.UpdateStrategy.Approval = v1alpha1.ApprovalAutomatic
	ec.Status = v1alpha1.EtcdClusterStatus{
		ObservedGeneration: 4, ClusterID: "cdf818194e3a8c32", ClusterVersion: "3.6.0", MemberSummary: "3/4",
		Alarms:   []string{"NOSPACE on member 91bc3c398fb3c146"},
		Warnings: []string{"spec.replicas 4 is even: 4 voters tolerate no more failures than 3, and need one more answer for every write"},
		Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Progressing", Message: "applying plan 5b2c3e7dab12: step 2/3 StartMember", LastTransitionTime: metav1.NewTime(now.Add(-40 * time.Second))},
			{Type: "Reconciling", Status: metav1.ConditionTrue, Reason: "Progressing", Message: "step 2/3", LastTransitionTime: metav1.NewTime(now.Add(-40 * time.Second))},
		},
		Members: []v1alpha1.MemberStatus{
			{Name: "demo-0", ID: "8e9e05c52164694d", Role: v1alpha1.RoleVoter, Version: "3.6.16", Healthy: true, DBSize: 20480},
			{Name: "demo-1", ID: "91bc3c398fb3c146", Role: v1alpha1.RoleVoter, Leader: true, Version: "3.6.16", Healthy: true, DBSize: 3 << 20},
			{Name: "demo-2", ID: "fd422379fda50e48", Role: v1alpha1.RoleVoter, Version: "3.6.16", Healthy: true, DBSize: 20480},
			{Name: "demo-3", ID: "2f4a1c3b5d6e7f80", Role: v1alpha1.RoleLearner},
		},
		Plan: &v1alpha1.PlanStatus{
			Plan: plan.Plan{FormatVersion: plan.FormatVersion, ID: "5b2c3e7dab12", Generation: 4, Steps: []plan.Step{
				{Action: plan.AddLearner, Member: "demo-3", Precondition: plan.Precondition{Kind: plan.PreClusterHealthy}, Reason: "spec.replicas 3 -> 4: member demo-3 joins as a learner"},
				{Action: plan.StartMember, Member: "demo-3", Version: "3.6.16", Reason: "learner demo-3 needs its Pod"},
				{Action: plan.PromoteLearner, Member: "demo-3", Precondition: plan.Precondition{Kind: plan.PreLearnerCaughtUp, Member: "demo-3"}, Reason: "learner demo-3 becomes a voter"},
			}},
			Phase: v1alpha1.PlanRunning, Current: 1, Summary: "2/3 StartMember", CreatedAt: at(40 * time.Second),
			Progress: []v1alpha1.StepProgress{
				{State: v1alpha1.StepSucceeded, StartedAt: at(40 * time.Second), FinishedAt: at(39 * time.Second)},
				{State: v1alpha1.StepRunning, StartedAt: at(39 * time.Second), Message: "waiting for Pod demo-3 to run etcd"},
			},
		},
		History: []v1alpha1.PlanRecord{
			{ID: "0aa1b2c3d4e5", Phase: v1alpha1.PlanSucceeded, Steps: "3/3", Actions: "CreateSeed, AddLearner x2, ...", StartedAt: at(time.Hour), FinishedAt: at(59 * time.Minute)},
		},
	}
	var objs observe.Objects
	for i, name := range []string{"demo-0", "demo-1", "demo-2", "demo-3"} {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelMember: name}}}
		p.Spec.NodeName = []string{"node-1", "node-2", "node-3", "node-1"}[i]
		p.Status.Phase = corev1.PodRunning
		p.Status.PodIP = "10.88.1." + string(rune('1'+i))
		ready := corev1.ConditionTrue
		if name == "demo-3" {
			ready = corev1.ConditionFalse
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "etcd", RestartCount: int32(i % 2), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}
		objs.Pods = append(objs.Pods, p)
		objs.PVCs = append(objs.PVCs, corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.LabelMember: name}}})
	}
	// A volume kept from a member whose Pod is gone and which etcd no longer lists.
	objs.PVCs = append(objs.PVCs, corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "demo-7", Labels: map[string]string{v1alpha1.LabelMember: "demo-7"}}})
	return ec, objs
}

// The status screen of a cluster in the middle of a scale-up; -update rewrites it.
func TestStatusScreen(t *testing.T) {
	ec, objs := scalingCluster()
	var out strings.Builder
	require.NoError(t, writeStatus(&out, ec, objs, now))
	golden(t, "testdata/status.golden", out.String())
	for _, want := range []string{
		"demo-1  91bc3c398fb3c146  leader",
		"demo-3  2f4a1c3b5d6e7f80  learner",
		"Running 10.88.1.4",
		"demo-7  -                 not a member",
		"none (volume kept)",
		"2  StartMember     demo-3  3.6.16",
		"Running    39s ago  waiting for Pod demo-3 to run etcd",
		"0aa1b2c3d4e5",
	} {
		require.Contains(t, out.String(), want)
	}
}

// A member that accepts connections but did not answer is shown as silent: it may be up.
func TestStatusShowsSilentMember(t *testing.T) {
	ec, objs := scalingCluster()
	ec.Status.Members[0].Healthy, ec.Status.Members[0].Silent = false, true
	var out strings.Builder
	require.NoError(t, writeStatus(&out, ec, objs, now))
	require.Regexp(t, `demo-0 .* no \(silent\)`, out.String())
}

// A plan awaiting approval says how to approve it, with its ID.
func TestStatusAwaitingApproval(t *testing.T) {
	ec, objs := scalingCluster()
	ec.Status.Plan.Phase, ec.Status.Plan.Progress = v1alpha1.PlanAwaitingApproval, nil
	var out strings.Builder
	require.NoError(t, writeStatus(&out, ec, objs, now))
	require.Contains(t, out.String(), "Review the steps, then: kubectl etcd approve demo --plan 5b2c3e7dab12")
	require.Contains(t, out.String(), "3  PromoteLearner  demo-3  -               LearnerCaughtUp(demo-3)  Pending")
}

func TestPendingPlan(t *testing.T) {
	manual := func() *v1alpha1.EtcdCluster {
		ec, _ := scalingCluster()
		ec.Spec.UpdateStrategy.Approval = v1alpha1.ApprovalManual
		ec.Status.Plan.Phase = v1alpha1.PlanAwaitingApproval
		return ec
	}
	p, err := pendingPlan(manual(), "")
	require.NoError(t, err)
	require.Equal(t, "5b2c3e7dab12", p.ID)
	_, err = pendingPlan(manual(), "5b2c3e7dab12")
	require.NoError(t, err)

	for want, change := range map[string]func(*v1alpha1.EtcdCluster){
		"applies its plans without approval (spec.updateStrategy.approval is Automatic)": func(ec *v1alpha1.EtcdCluster) {
			ec.Spec.UpdateStrategy.Approval, ec.Status.Plan.Phase = v1alpha1.ApprovalAutomatic, v1alpha1.PlanRunning
		},
		"has no plan for generation 5 yet": func(ec *v1alpha1.EtcdCluster) { ec.Generation = 5 },
		"has no plan awaiting approval: plan 5b2c3e7dab12 is Running": func(ec *v1alpha1.EtcdCluster) {
			ec.Status.Plan.Phase = v1alpha1.PlanRunning
		},
		"plan 000000000000 is not the pending plan: EtcdCluster team-a/demo awaits approval of plan 5b2c3e7dab12 (3 steps)": nil,
	} {
		ec, id := manual(), ""
		if change != nil {
			change(ec)
		} else {
			id = "000000000000"
		}
		_, err := pendingPlan(ec, id)
		require.ErrorContains(t, err, want)
	}
	// A recovery from quorum loss awaits approval whatever spec.updateStrategy says.
	ec := manual()
	ec.Spec.UpdateStrategy.Approval = v1alpha1.ApprovalAutomatic
	p, err = pendingPlan(ec, "")
	require.NoError(t, err)
	require.Equal(t, ec.Status.Plan.ID, p.ID)
}

// Flags go before, between or after the name, as with kubectl; -- ends them.
func TestFlagsAroundArguments(t *testing.T) {
	var id string
	var k kubeFlags
	fs := newFlagSet("approve")
	fs.StringVar(&id, "plan", "", "")
	k.add(fs)
	args, err := parse(fs, []string{"-n", "team-a", "demo", "--plan", "5b2c3e7dab12", "--", "-x"})
	require.NoError(t, err)
	require.Equal(t, []string{"demo", "-x"}, args)
	require.Equal(t, "team-a", k.namespace)
	require.Equal(t, "5b2c3e7dab12", id)

	r := run(t, "", "approve")
	require.Equal(t, ExitError, r.code)
	require.Contains(t, r.stderr, "error: the EtcdCluster's name is required\nRun \"kubectl-etcd approve -h\"")
	r = run(t, "", "status", "a", "b")
	require.Equal(t, ExitError, r.code)
	require.Contains(t, r.stderr, `unexpected argument "b"`)
	r = run(t, "", "status", "-h")
	require.Equal(t, ExitOK, r.code)
	require.Contains(t, r.stdout, "kubectl-etcd status NAME")
}

// The last recovery from quorum loss is on the status screen: what it did and how it ended.
func TestStatusShowsTheLastRecovery(t *testing.T) {
	ec, objs := scalingCluster()
	ec.Status.LastRecovery = &v1alpha1.RecoveryStatus{Plan: "9ad8d094236e", Action: string(plan.RestoreFromBackup), Member: "demo-3",
		Backup: "nightly", FromClusterID: "c1", StartedAt: at(2 * time.Minute)}
	var out strings.Builder
	require.NoError(t, writeStatus(&out, ec, objs, now))
	require.Contains(t, out.String(), "  Recovery: restored from EtcdBackup nightly on seed demo-3 (plan 9ad8d094236e), started 2m ago, not answering through a quorum yet\n")
	ec.Status.LastRecovery.FinishedAt, ec.Status.LastRecovery.ClusterID = at(2*time.Minute-3500*time.Millisecond), "c2"
	out.Reset()
	require.NoError(t, writeStatus(&out, ec, objs, now))
	require.Contains(t, out.String(), "  Recovery: restored from EtcdBackup nightly on seed demo-3 (plan 9ad8d094236e), started 2m ago, answered as cluster c2 after 3.5s\n")
}

// A TLS cluster says which sides talk TLS, where applications find a client certificate,
// and when each certificate expires and is renewed.
func TestStatusShowsCertificates(t *testing.T) {
	ec, objs := scalingCluster()
	ec.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto}
	ec.Status.TLS = &v1alpha1.TLSStatus{ClientSecretName: "demo-client-tls", ClientURL: "https://demo-client.ns.svc:2379", Certificates: []v1alpha1.CertificateStatus{
		{SecretName: "demo-server-tls", Subject: "demo server", Issuer: "ns/demo etcd CA", NotAfter: metav1.NewTime(now.Add(90 * 24 * time.Hour)),
			RenewAt: &metav1.Time{Time: now.Add(60 * 24 * time.Hour)}}}}
	var out strings.Builder
	require.NoError(t, writeStatus(&out, ec, objs, now))
	require.Contains(t, out.String(), "TLS:      clients Auto, peers Auto, at https://demo-client.ns.svc:2379, client certificate for applications in Secret demo-client-tls")
	require.Contains(t, out.String(), "Cert:     demo-server-tls (demo server, issued by ns/demo etcd CA) expires in 90d, renewed in 60d")
	require.NotContains(t, out.String(), "Switch:")

	// TLS switched on: a member whose Pod serves plain text beside TLS is named.
	objs.Pods[1].Spec.Containers = []corev1.Container{{Name: "etcd", Command: []string{"etcd",
		"--listen-client-urls=http://0.0.0.0:2379,https://0.0.0.0:2379", "--listen-peer-urls=http://0.0.0.0:2380,https://0.0.0.0:2382"}}}
	out.Reset()
	require.NoError(t, writeStatus(&out, ec, objs, now))
	require.Contains(t, out.String(), "Switch:   TLS is being switched; not yet as the spec says: demo-1 (clients http+https, peers http+https)\n")
}
