package observe

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

func TestRecoveryPrefersTheNewestVerifiedBackup(t *testing.T) {
	at := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	b := func(name, clusterID string, hoursAgo int, verified metav1.ConditionStatus) v1alpha1.EtcdBackup {
		x := v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name}}
		x.Status.Phase = v1alpha1.BackupSucceeded
		x.Status.Artifact = &v1alpha1.Artifact{ClusterID: clusterID, Revision: int64(100 - hoursAgo), TakenAt: metav1.NewTime(at.Add(-time.Duration(hoursAgo) * time.Hour))}
		if verified != "" {
			x.Status.Conditions = []metav1.Condition{{Type: v1alpha1.VerifiedCondition, Status: verified}}
		}
		return x
	}
	name := func(bs ...v1alpha1.EtcdBackup) string {
		if got := newestBackup(bs, "c1", "c0"); got != nil {
			return got.Name
		}
		return ""
	}
	require.Equal(t, "new", name(b("old", "c1", 5, ""), b("new", "c1", 1, "")), "none drilled: the newest")
	require.Equal(t, "old", name(b("old", "c0", 5, metav1.ConditionTrue), b("new", "c1", 1, "")), "the newest verified, though older")
	require.Equal(t, "old", name(b("old", "c1", 5, ""), b("new", "c1", 1, metav1.ConditionFalse)), "a failed drill never counts")
	require.Equal(t, "new", name(b("old", "c1", 5, ""), b("new", "c1", 1, metav1.ConditionUnknown)), "a drill still running fails nothing")
	require.Equal(t, "", name(b("other", "c9", 1, metav1.ConditionTrue)), "another cluster's backup never counts")
	got := newestBackup([]v1alpha1.EtcdBackup{b("v", "c1", 2, metav1.ConditionTrue)}, "c1")
	require.Equal(t, "EtcdBackup v (revision 98, taken 2027-01-15T06:00:00Z, verified by a restore drill)", got.String())
}
