package backup_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/backup"
)

func TestExpired(t *testing.T) {
	now := time.Date(2027, 1, 15, 8, 0, 0, 0, time.UTC)
	b := func(name string, phase v1alpha1.BackupPhase, hoursAgo int) v1alpha1.EtcdBackup {
		at := metav1.NewTime(now.Add(-time.Duration(hoursAgo) * time.Hour))
		x := v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: at}}
		x.Status.Phase = phase
		if phase == v1alpha1.BackupSucceeded {
			x.Status.Artifact = &v1alpha1.Artifact{TakenAt: at}
		}
		return x
	}
	ok, failed, running := v1alpha1.BackupSucceeded, v1alpha1.BackupFailed, v1alpha1.BackupRunning
	drilled := func(status metav1.ConditionStatus, reason string) func(x v1alpha1.EtcdBackup) v1alpha1.EtcdBackup {
		return func(x v1alpha1.EtcdBackup) v1alpha1.EtcdBackup {
			x.Status.Conditions = []metav1.Condition{{Type: v1alpha1.VerifiedCondition, Status: status, Reason: reason}}
			return x
		}
	}
	drillFailed, verified := drilled(metav1.ConditionFalse, "ContentsDiffer"), drilled(metav1.ConditionTrue, "Restored")
	blocked, pastDeadline := drilled(metav1.ConditionUnknown, "DrillBlocked"), drilled(metav1.ConditionUnknown, "DrillDeadlineExceeded")
	names := func(bs []v1alpha1.EtcdBackup) []string {
		var out []string
		for _, b := range bs {
			out = append(out, b.Name)
		}
		return out
	}
	keep := func(n int32) v1alpha1.Retention { return v1alpha1.Retention{KeepLast: ptr.To(n)} }
	maxAge := func(h int) v1alpha1.Retention {
		return v1alpha1.Retention{MaxAge: &metav1.Duration{Duration: time.Duration(h) * time.Hour}}
	}
	for _, tc := range []struct {
		name  string
		bs    []v1alpha1.EtcdBackup
		r     v1alpha1.Retention
		want  []string
		inUse map[string]bool
	}{
		{"no retention keeps all", []v1alpha1.EtcdBackup{b("a", ok, 3), b("b", ok, 2), b("c", ok, 1)}, v1alpha1.Retention{}, nil, nil},
		{"keepLast 2 removes the third-newest, whatever the list's order",
			[]v1alpha1.EtcdBackup{b("b", ok, 2), b("c", ok, 1), b("a", ok, 3)}, keep(2), []string{"a"}, nil},
		{"failed backups do not count for keepLast",
			[]v1alpha1.EtcdBackup{b("a", ok, 4), b("b", ok, 3), b("x", failed, 2), b("y", failed, 1)}, keep(2), nil, nil},
		{"a running backup is neither counted nor removed",
			[]v1alpha1.EtcdBackup{b("a", ok, 3), b("b", ok, 2), b("r", running, 1)}, keep(1), []string{"a"}, nil},
		{"maxAge removes the old ones", []v1alpha1.EtcdBackup{b("a", ok, 50), b("b", ok, 30), b("c", ok, 1)}, maxAge(24), []string{"b", "a"}, nil},
		{"maxAge never removes the newest good backup, however old",
			[]v1alpha1.EtcdBackup{b("a", ok, 50), b("b", ok, 30), b("x", failed, 1)}, maxAge(24), []string{"a"}, nil},
		{"either rule removes", []v1alpha1.EtcdBackup{b("a", ok, 50), b("b", ok, 2), b("c", ok, 1), b("d", ok, 0)},
			v1alpha1.Retention{KeepLast: ptr.To[int32](3), MaxAge: &metav1.Duration{Duration: 24 * time.Hour}}, []string{"a"}, nil},
		{"a backup whose drill failed counts as failed: it costs no older good one its place",
			[]v1alpha1.EtcdBackup{b("a", ok, 3), b("b", ok, 2), drillFailed(b("c", ok, 1))}, keep(2), nil, nil},
		{"the newest three failed stay",
			[]v1alpha1.EtcdBackup{b("f1", failed, 5), b("f2", failed, 4), b("f3", failed, 3), b("f4", failed, 2), b("f5", failed, 1)},
			v1alpha1.Retention{}, []string{"f2", "f1"}, nil},
		{"a drill that could not run fails nothing: such backups are good ones",
			[]v1alpha1.EtcdBackup{blocked(b("a", ok, 6)), pastDeadline(b("b", ok, 5)), blocked(b("c", ok, 4)), pastDeadline(b("d", ok, 3)),
				b("e", ok, 2), pastDeadline(b("f", ok, 1))}, keep(5), []string{"a"}, nil},
		{"the newest verified backup stays (verify every 7, keepLast 3)",
			[]v1alpha1.EtcdBackup{verified(b("v", ok, 7)), b("a", ok, 6), b("b", ok, 5), b("c", ok, 4), b("d", ok, 3), b("e", ok, 2),
				b("f", ok, 1), verified(b("old", ok, 14))}, keep(3), []string{"c", "b", "a", "old"}, nil},
		{"backups a restore names stay, failed or not",
			[]v1alpha1.EtcdBackup{b("a", ok, 50), b("b", ok, 30), b("c", ok, 1), drillFailed(b("x1", ok, 5)), drillFailed(b("x2", ok, 4)),
				drillFailed(b("x3", ok, 3)), drillFailed(b("x4", ok, 2))}, maxAge(24), []string{"b"}, map[string]bool{"a": true, "x1": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, names(backup.Expired(tc.bs, tc.r, now, tc.inUse)))
		})
	}
}
