package observe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/planner"
)

func TestRecoveryTakesTheNewestBackupNoDrillFoundWrong(t *testing.T) {
	at := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	b := func(name, clusterID string, hoursAgo int, verified metav1.ConditionStatus, reason string) v1alpha1.EtcdBackup {
		x := v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name}}
		x.Spec.Verify = verified != ""
		x.Status.Phase = v1alpha1.BackupSucceeded
		x.Status.Artifact = &v1alpha1.Artifact{ClusterID: clusterID, Revision: int64(100 - hoursAgo), TakenAt: metav1.NewTime(at.Add(-time.Duration(hoursAgo) * time.Hour))}
		if verified != "" {
			x.Status.Conditions = []metav1.Condition{{Type: v1alpha1.VerifiedCondition, Status: verified, Reason: reason}}
		}
		return x
	}
	name := func(bs ...v1alpha1.EtcdBackup) string {
		if got := newestBackup(bs, "c1", "c0"); got != nil {
			return got.Name
		}
		return ""
	}
	verified := b("old", "c0", 5, metav1.ConditionTrue, "Restored")
	require.Equal(t, "new", name(b("old", "c1", 5, "", ""), b("new", "c1", 1, "", "")), "none drilled: the newest")
	require.Equal(t, "new", name(verified, b("new", "c1", 1, "", "")), "the newest, though another is verified")
	require.Equal(t, "old", name(b("old", "c1", 5, "", ""), b("new", "c1", 1, metav1.ConditionFalse, "ContentsDiffer")), "a drill that found it wrong")
	require.Equal(t, "new", name(verified, b("new", "c1", 1, metav1.ConditionUnknown, "DrillBlocked")), "a drill that could not run fails nothing")
	require.Equal(t, "new", name(verified, b("new", "c1", 1, metav1.ConditionUnknown, "DrillDeadlineExceeded")))
	require.Equal(t, "", name(b("other", "c9", 1, metav1.ConditionTrue, "Restored")), "another cluster's backup never counts")

	got := newestBackup([]v1alpha1.EtcdBackup{b("v", "c1", 2, metav1.ConditionTrue, "Restored")}, "c1")
	require.Equal(t, "EtcdBackup v (revision 98, taken 2027-01-15T06:00:00Z, verified by a restore drill)", got.String())
	got = newestBackup([]v1alpha1.EtcdBackup{verified, b("new", "c1", 1, metav1.ConditionUnknown, "DrillDeadlineExceeded")}, "c1", "c0")
	require.Equal(t, "EtcdBackup new (revision 99, taken 2027-01-15T07:00:00Z, its restore drill not done; the newest verified backup, "+
		"EtcdBackup old of revision 95 taken 2027-01-15T03:00:00Z, is the alternative: delete the EtcdBackups newer than it to restore it instead)", got.String())
	got = newestBackup([]v1alpha1.EtcdBackup{b("new", "c1", 1, "", "")}, "c1")
	require.Equal(t, "EtcdBackup new (revision 99, taken 2027-01-15T07:00:00Z, not drilled)", got.String())
	require.Equal(t, got, restoring([]v1alpha1.EtcdBackup{b("new", "c1", 1, "", "")}, "new"), "a restore under way reads as it was planned")
}

// A member's snapshot (spec.member) is weighed apart from the newest backup: the planner
// sees it with its phase, and its destination is where the next one goes.
func TestMemberSnapshotsAreSeenApart(t *testing.T) {
	at := metav1.NewTime(time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC))
	nightly := v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "nightly"}}
	nightly.Spec.Destination.S3 = &v1alpha1.S3Destination{Bucket: "backups", Prefix: "etcd"}
	nightly.Status.Phase = v1alpha1.BackupSucceeded
	nightly.Status.Artifact = &v1alpha1.Artifact{ClusterID: "c1", Revision: 42, TakenAt: at}
	snap := v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "demo-0-survivor-1"}}
	snap.Spec.Member = "1"
	snap.Status.Phase = v1alpha1.BackupSucceeded
	snap.Status.Artifact = &v1alpha1.Artifact{ClusterID: "c1", Member: "demo-0", Revision: 57, TakenAt: metav1.NewTime(at.Add(time.Hour))}
	failed := v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: "demo-4-survivor-5"}}
	failed.Spec.Member, failed.Status.Phase = "5", v1alpha1.BackupFailed
	failed.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Message: "store unavailable"}}
	other := snap
	other.Name, other.Status.Artifact = "of-another-cluster", &v1alpha1.Artifact{ClusterID: "c9", Revision: 99}

	o := Objects{Backups: []v1alpha1.EtcdBackup{nightly, snap, failed, other}}
	require.Equal(t, "nightly", newestBackup(o.Backups, "c1").Name, "a newer snapshot of a member is not the newest backup")
	got := snapshots(o.Backups, "c1")
	require.Len(t, got, 2)
	require.Equal(t, "demo-0-survivor-1", got[0].Name)
	require.Equal(t, int64(57), got[0].Revision)
	require.Equal(t, "demo-0", got[0].Member)
	require.Equal(t, "Failed", got[1].Phase)
	require.Equal(t, "store unavailable", got[1].Message)
	require.Equal(t, "s3://backups/etcd", snapshotTo(o.SnapshotDestination("c1")))

	sched := v1alpha1.EtcdBackupSchedule{ObjectMeta: metav1.ObjectMeta{Name: "hourly"}}
	sched.Spec.Destination.GCS = &v1alpha1.GCSDestination{Bucket: "gbackups"}
	require.Equal(t, "gs://gbackups/", snapshotTo(Objects{Schedules: []v1alpha1.EtcdBackupSchedule{sched}}.SnapshotDestination("c1")), "else the schedule's")
	require.Equal(t, "", snapshotTo(Objects{}.SnapshotDestination("c1")), "none known")
}

// The CLI plans a rotation from status: its stage, and the certificates the operator
// renews (the CA's own is not one), members mounting the server's and peers'.
func TestRotationFromStatus(t *testing.T) {
	c := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "ns"}}
	require.Nil(t, Objects{}.Observed(c).CA)
	renew := &metav1.Time{}
	c.Status.TLS = &v1alpha1.TLSStatus{Trust: "h.h", CARotation: &v1alpha1.CARotationStatus{Stage: "Issuing", Pass: 2},
		Certificates: []v1alpha1.CertificateStatus{{SecretName: "demo-ca"}, {SecretName: "demo-server-tls", RenewAt: renew},
			{SecretName: "demo-operator-tls", RenewAt: renew}, {SecretName: "demo-0-peer-tls", RenewAt: renew}}}
	o := Objects{}.Observed(c)
	require.Equal(t, "h.h", o.Trust)
	require.Equal(t, &planner.CARotation{Stage: planner.CAIssuing, Secret: "demo-ca", Leaves: []planner.Renewal{
		{Secret: "demo-server-tls", Mounted: true}, {Secret: "demo-operator-tls"}, {Secret: "demo-0-peer-tls", Mounted: true}}}, o.CA)
}
