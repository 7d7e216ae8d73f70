package clustermetrics

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

func TestCollectorExportsWhatAlertsWatch(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, v1alpha1.AddToScheme(scheme))
	meta := func(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: "team-a", Name: name} }
	// Three voters, two healthy (the operator counts them from etcd's members in status).
	prod := &v1alpha1.EtcdCluster{ObjectMeta: meta("prod"), Spec: v1alpha1.EtcdClusterSpec{Replicas: 3}, Status: v1alpha1.EtcdClusterStatus{
		Replicas: 3, ReadyReplicas: 2,
		Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "MembersUnhealthy"},
			{Type: "Stalled", Status: metav1.ConditionTrue, Reason: "ProgressDeadlineExceeded"}},
		Alarms: []string{"NOSPACE on member 1", "NOSPACE on member 2"},
		TLS: &v1alpha1.TLSStatus{Certificates: []v1alpha1.CertificateStatus{
			{SecretName: "prod-server-tls", NotAfter: metav1.NewTime(time.Unix(9000, 0)), RenewAt: &metav1.Time{Time: time.Unix(6000, 0)}},
			{SecretName: "users-peer", NotAfter: metav1.NewTime(time.Unix(8000, 0))}}},
	}}
	fresh := &v1alpha1.EtcdCluster{ObjectMeta: meta("fresh"), Spec: v1alpha1.EtcdClusterSpec{Replicas: 1}}
	taken := func(name string, phase v1alpha1.BackupPhase, at int64) *v1alpha1.EtcdBackup {
		b := &v1alpha1.EtcdBackup{ObjectMeta: meta(name), Status: v1alpha1.EtcdBackupStatus{Phase: phase,
			Artifact: &v1alpha1.Artifact{TakenAt: metav1.NewTime(time.Unix(at, 0))}}}
		b.Spec.ClusterRef.Name = "prod"
		return b
	}
	schedule := &v1alpha1.EtcdBackupSchedule{ObjectMeta: meta("fresh-daily")}
	schedule.Spec.ClusterRef.Name = "fresh"
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(prod, fresh, schedule,
		taken("old", v1alpha1.BackupSucceeded, 1000), taken("new", v1alpha1.BackupSucceeded, 2000), taken("broken", v1alpha1.BackupFailed, 3000)).Build()

	want := `
# HELP etcdplan_cluster_alarms Members with an etcd alarm raised, by alarm (NOSPACE, CORRUPT).
# TYPE etcdplan_cluster_alarms gauge
etcdplan_cluster_alarms{alarm="CORRUPT",cluster="fresh",namespace="team-a"} 0
etcdplan_cluster_alarms{alarm="CORRUPT",cluster="prod",namespace="team-a"} 0
etcdplan_cluster_alarms{alarm="NOSPACE",cluster="fresh",namespace="team-a"} 0
etcdplan_cluster_alarms{alarm="NOSPACE",cluster="prod",namespace="team-a"} 2
# HELP etcdplan_cluster_certificate_expiry_timestamp_seconds When a certificate the cluster's TLS uses expires (Unix seconds), by the Secret that holds it.
# TYPE etcdplan_cluster_certificate_expiry_timestamp_seconds gauge
etcdplan_cluster_certificate_expiry_timestamp_seconds{cluster="prod",namespace="team-a",secret="prod-server-tls"} 9000
etcdplan_cluster_certificate_expiry_timestamp_seconds{cluster="prod",namespace="team-a",secret="users-peer"} 8000
# HELP etcdplan_cluster_certificate_renew_timestamp_seconds When the operator renews a certificate it issued (Unix seconds): at two thirds of its life.
# TYPE etcdplan_cluster_certificate_renew_timestamp_seconds gauge
etcdplan_cluster_certificate_renew_timestamp_seconds{cluster="prod",namespace="team-a",secret="prod-server-tls"} 6000
# HELP etcdplan_cluster_condition The cluster's status conditions: 1 for the status and reason each condition has.
# TYPE etcdplan_cluster_condition gauge
etcdplan_cluster_condition{cluster="prod",namespace="team-a",reason="MembersUnhealthy",status="False",type="Ready"} 1
etcdplan_cluster_condition{cluster="prod",namespace="team-a",reason="ProgressDeadlineExceeded",status="True",type="Stalled"} 1
# HELP etcdplan_cluster_failures_tolerated Healthy voters beyond quorum: how many more may fail before the cluster takes no writes (below 0: it takes none now).
# TYPE etcdplan_cluster_failures_tolerated gauge
etcdplan_cluster_failures_tolerated{cluster="prod",namespace="team-a"} 0
# HELP etcdplan_cluster_last_backup_timestamp_seconds When the newest successful backup of the cluster was taken (Unix seconds); 0 for a cluster with a backup schedule and no successful backup yet.
# TYPE etcdplan_cluster_last_backup_timestamp_seconds gauge
etcdplan_cluster_last_backup_timestamp_seconds{cluster="fresh",namespace="team-a"} 0
etcdplan_cluster_last_backup_timestamp_seconds{cluster="prod",namespace="team-a"} 2000
# HELP etcdplan_cluster_metrics_errors 1 when the cluster metrics could not be read at this scrape.
# TYPE etcdplan_cluster_metrics_errors gauge
etcdplan_cluster_metrics_errors 0
# HELP etcdplan_cluster_replicas Voting members the spec asks for (spec.replicas).
# TYPE etcdplan_cluster_replicas gauge
etcdplan_cluster_replicas{cluster="fresh",namespace="team-a"} 1
etcdplan_cluster_replicas{cluster="prod",namespace="team-a"} 3
# HELP etcdplan_cluster_voters Voting members in etcd's membership, as the operator last recorded them.
# TYPE etcdplan_cluster_voters gauge
etcdplan_cluster_voters{cluster="fresh",namespace="team-a"} 0
etcdplan_cluster_voters{cluster="prod",namespace="team-a"} 3
# HELP etcdplan_cluster_voters_healthy Voting members that answered with a leader when the operator last looked.
# TYPE etcdplan_cluster_voters_healthy gauge
etcdplan_cluster_voters_healthy{cluster="fresh",namespace="team-a"} 0
etcdplan_cluster_voters_healthy{cluster="prod",namespace="team-a"} 2
`
	require.NoError(t, testutil.CollectAndCompare(Collector{Reader: c}, strings.NewReader(want)))

	// A deleted cluster's series go with it.
	require.NoError(t, c.Delete(t.Context(), prod))
	n, err := testutil.GatherAndCount(registry(t, c), "etcdplan_cluster_voters")
	require.NoError(t, err)
	require.Equal(t, 1, n)
}

func registry(t *testing.T, r client.Reader) *prometheus.Registry {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(Collector{Reader: r}))
	return reg
}
