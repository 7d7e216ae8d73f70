package backup

import (
	"slices"
	"time"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// FailedKept is how many of a schedule's failed backups stay to be looked at.
const FailedKept = 3

// Expired is which of a schedule's backups its retention removes. Successful
// backups go when keepLast or maxAge says so, except the newest, which always stays; a
// failed backup counts for neither rule (so it never costs an older good one its place),
// and only the newest FailedKept failed ones stay. A backup whose restore drill found its
// data wrong counts as failed; one whose drill could not run is as good as one not drilled.
// Never removed: backups not yet ended, the newest verified one (what a recovery would
// turn to), and those inUse (named by a restore).
func Expired(bs []v1alpha1.EtcdBackup, r v1alpha1.Retention, now time.Time, inUse map[string]bool) []v1alpha1.EtcdBackup {
	var good, failed []v1alpha1.EtcdBackup
	for _, b := range bs {
		switch {
		case b.Status.Phase == v1alpha1.BackupSucceeded && b.Status.Artifact != nil && !b.DrillFailed():
			good = append(good, b)
		case b.Status.Phase == v1alpha1.BackupFailed || b.DrillFailed():
			failed = append(failed, b)
		}
	}
	newestFirst := func(at func(v1alpha1.EtcdBackup) time.Time) func(a, b v1alpha1.EtcdBackup) int {
		return func(a, b v1alpha1.EtcdBackup) int { return at(b).Compare(at(a)) }
	}
	slices.SortStableFunc(good, newestFirst(func(b v1alpha1.EtcdBackup) time.Time { return b.Status.Artifact.TakenAt.Time }))
	slices.SortStableFunc(failed, newestFirst(func(b v1alpha1.EtcdBackup) time.Time { return b.CreationTimestamp.Time }))
	var out []v1alpha1.EtcdBackup
	for i, b := range good {
		tooMany := r.KeepLast != nil && i >= int(*r.KeepLast)
		tooOld := r.MaxAge != nil && now.Sub(b.Status.Artifact.TakenAt.Time) > r.MaxAge.Duration
		if i > 0 && (tooMany || tooOld) {
			out = append(out, b)
		}
	}
	if len(failed) > FailedKept {
		out = append(out, failed[FailedKept:]...)
	}
	verified := NewestVerified(bs)
	return slices.DeleteFunc(out, func(b v1alpha1.EtcdBackup) bool {
		return inUse[b.Name] || (verified != nil && b.Name == verified.Name)
	})
}

// NewestVerified is the backup with the newest snapshot whose restore drill passed; nil
// when none did.
func NewestVerified(bs []v1alpha1.EtcdBackup) *v1alpha1.EtcdBackup {
	var best *v1alpha1.EtcdBackup
	for i := range bs {
		b := &bs[i]
		if b.Status.Artifact == nil || !b.Verified() {
			continue
		}
		if best == nil || b.Status.Artifact.TakenAt.After(best.Status.Artifact.TakenAt.Time) {
			best = b
		}
	}
	return best
}
