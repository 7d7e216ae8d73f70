package backupctl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/backup"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/executor/schedule"
	"github.com/etcdplan/etcdplan/executor/status"
)

// ScheduleReconciler creates an EtcdBackup each time a schedule comes, one at a time, and
// removes the backups its retention no longer keeps, stored object first.
type ScheduleReconciler struct {
	client.Client
	// APIReader reads Secrets around the cache.
	APIReader client.Reader
	// Open prepares a destination's store; store.Open outside tests.
	Open OpenFunc
	// Now is the clock.
	Now func() time.Time
	// Images are what a Pod that prunes a claim runs.
	Images resources.Images
}

// SetupWithManager registers the reconciler; a backup of a schedule ending wakes it.
func (r *ScheduleReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).For(&v1alpha1.EtcdBackupSchedule{}).Owns(&v1alpha1.EtcdBackup{}).Complete(r)
}

// Reconcile takes the backup a schedule's time asks for, applies retention and comes back
// at the next time.
func (r *ScheduleReconciler) Reconcile(ctx context.Context, req reconcile.Request) (result reconcile.Result, retErr error) {
	s := &v1alpha1.EtcdBackupSchedule{}
	if err := r.Get(ctx, req.NamespacedName, s); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	writer := status.NewWriter(r.Client, s)
	s.Status.ObservedGeneration = s.Generation // a schedule's spec is judged at every reconcile
	defer func() {
		if err := writer.Write(ctx, s); err != nil && retErr == nil {
			retErr = err
		}
	}()
	sched, err := schedule.Parse(s.Spec.Schedule)
	if err != nil {
		status.Stall(s, string(v1alpha1.ReasonInvalidSchedule), fmt.Sprintf("spec.schedule %q is not a cron expression: %v", s.Spec.Schedule, err))
		return reconcile.Result{}, nil
	}
	conditions.Delete(s, meta.StalledCondition)
	var list v1alpha1.EtcdBackupList
	if err := r.List(ctx, &list, client.InNamespace(s.Namespace), client.MatchingLabels{v1alpha1.LabelSchedule: s.Name}); err != nil {
		return reconcile.Result{}, err
	}
	owned := ownedBy(list.Items, s)
	at := status.Now(r.Now)
	recordSuccess(s, owned)
	waitingFor, due, err := r.take(ctx, s, sched, owned, at)
	if err != nil {
		return reconcile.Result{}, err
	}
	pruning, pruneErr := r.prune(ctx, s, owned, at)
	if pruneErr != nil {
		conditions.MarkFalse(s, meta.ReadyCondition, v1alpha1.ReasonRetentionFailed, "%v", pruneErr)
		return reconcile.Result{RequeueAfter: backupRetry}, nil
	}
	next := sched.Next(at)
	markScheduled(s, owned, waitingFor, due, next)
	switch {
	case pruning: // a Pod deletes a snapshot from a claim: look again soon
		return reconcile.Result{RequeueAfter: drillPoll}, nil
	case s.Spec.Suspend:
		return reconcile.Result{}, nil
	}
	return reconcile.Result{RequeueAfter: next.Sub(at) + 10*time.Millisecond}, nil
}

// markScheduled sets the schedule's conditions: Reconciling while a backup is late behind
// one that runs, Ready unless the last backup or drill failed.
func markScheduled(s *v1alpha1.EtcdBackupSchedule, owned []v1alpha1.EtcdBackup, waitingFor string, due, next time.Time) {
	if waitingFor != "" {
		conditions.MarkReconciling(s, v1alpha1.ReasonBackupRunning, "waiting for %s to end before the backup due at %s", waitingFor, due.UTC().Format(time.RFC3339))
	} else {
		conditions.Delete(s, meta.ReconcilingCondition)
	}
	last, failedDrill := lastEnded(owned), lastDrillFailed(owned)
	switch {
	case s.Spec.Suspend:
		conditions.MarkTrue(s, meta.ReadyCondition, v1alpha1.ReasonSuspended, "suspended: no new backups")
	case last != nil && last.Status.Phase == v1alpha1.BackupFailed:
		conditions.MarkFalse(s, meta.ReadyCondition, v1alpha1.ReasonLastBackupFailed, "the last backup, %s, failed: %s; next at %s",
			last.Name, conditions.GetMessage(last, meta.ReadyCondition), next.UTC().Format(time.RFC3339))
	case failedDrill != nil:
		conditions.MarkFalse(s, meta.ReadyCondition, v1alpha1.ReasonLastDrillFailed, "the last restore drill, of %s, failed: %s; next backup at %s",
			failedDrill.Name, conditions.GetMessage(failedDrill, v1alpha1.VerifiedCondition), next.UTC().Format(time.RFC3339))
	case waitingFor != "":
		// A backup is late: not Ready while Reconciling, as kstatus and Flux expect.
		conditions.MarkFalse(s, meta.ReadyCondition, v1alpha1.ReasonBackupRunning, "%s", conditions.GetMessage(s, meta.ReconcilingCondition))
	default:
		conditions.MarkTrue(s, meta.ReadyCondition, v1alpha1.ReasonScheduled, "next backup at %s", next.UTC().Format(time.RFC3339))
	}
}

// take creates the backup for the schedule's last time, unless it was taken or the schedule
// is suspended. While one of its backups runs, none is created (a time that came is taken
// once it ended): it returns that backup's name and the time waiting.
func (r *ScheduleReconciler) take(ctx context.Context, s *v1alpha1.EtcdBackupSchedule, sched cron.Schedule, owned []v1alpha1.EtcdBackup, at time.Time) (string, time.Time, error) {
	if s.Spec.Suspend {
		return "", time.Time{}, nil
	}
	since := s.CreationTimestamp.Time
	if s.Status.LastScheduleTime != nil {
		since = s.Status.LastScheduleTime.Time
	}
	due := schedule.Last(sched, since, at)
	if due.IsZero() {
		return "", due, nil
	}
	for _, b := range owned {
		if !ended(b) {
			return b.Name, due, nil
		}
	}
	b := &v1alpha1.EtcdBackup{ObjectMeta: metav1.ObjectMeta{Namespace: s.Namespace, Name: backupName(s.Name, due),
		Labels: map[string]string{v1alpha1.LabelSchedule: s.Name, v1alpha1.LabelCluster: s.Spec.ClusterRef.Name}}}
	b.Spec.ClusterRef, b.Spec.Destination = s.Spec.ClusterRef, *s.Spec.Destination.DeepCopy()
	b.Spec.Verify = drillNext(s)
	if err := controllerutil.SetControllerReference(s, b, r.Scheme()); err != nil {
		return "", due, err
	}
	err := r.Create(ctx, b)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", due, err
	}
	if err == nil {
		s.Status.BackupsTaken++
	}
	s.Status.LastScheduleTime = &metav1.Time{Time: due}
	return "", due, nil
}

// drillNext: the schedule's next backup is one of those spec.verify drills.
func drillNext(s *v1alpha1.EtcdBackupSchedule) bool {
	v := s.Spec.Verify
	if v == nil {
		return false
	}
	return s.Status.BackupsTaken%int64(max(v.Every, 1)) == 0
}

func ended(b v1alpha1.EtcdBackup) bool {
	return b.Status.Phase == v1alpha1.BackupSucceeded || b.Status.Phase == v1alpha1.BackupFailed
}

// backupName is the schedule's name and the time the backup is for: the same time always
// names the same backup, so a retried create cannot take two.
func backupName(schedule string, due time.Time) string {
	suffix := due.UTC().Format("-20060102-150405")
	if len(schedule)+len(suffix) > 253 {
		schedule = schedule[:253-len(suffix)]
	}
	return schedule + suffix
}

// prune removes the backups retention no longer keeps: the stored object, then the
// EtcdBackup. A backup whose object could not be deleted stays, and is tried again;
// pruning says a Pod still deletes one from a claim.
func (r *ScheduleReconciler) prune(ctx context.Context, s *v1alpha1.EtcdBackupSchedule, owned []v1alpha1.EtcdBackup, at time.Time) (pruning bool, _ error) {
	inUse, err := r.inUse(ctx, s.Namespace, owned)
	if err != nil {
		return false, err
	}
	var failed []string
	for _, b := range backup.Expired(owned, s.Spec.Retention, at, inUse) {
		err := r.deleteStored(ctx, &b)
		switch {
		case errors.Is(err, errPruning):
			pruning = true
			continue
		case err != nil:
			failed = append(failed, fmt.Sprintf("%s: %v", b.Name, err))
			continue
		}
		if err := r.Delete(ctx, &b); client.IgnoreNotFound(err) != nil {
			return pruning, err
		}
	}
	if len(failed) > 0 {
		return pruning, fmt.Errorf("could not delete the stored snapshot of %s", strings.Join(failed, "; "))
	}
	return pruning, nil
}

// inUse are the backups of owned that a restore names, which retention keeps: named by
// an EtcdCluster's spec.bootstrap.restore (by name, or by its stored object), marked on the
// seed of a recovery under way (claim or Pod), or the object a cluster that has not
// answered since is restored from (status.restoredFrom).
func (r *ScheduleReconciler) inUse(ctx context.Context, namespace string, owned []v1alpha1.EtcdBackup) (map[string]bool, error) {
	var clusters v1alpha1.EtcdClusterList
	var pods corev1.PodList
	var pvcs corev1.PersistentVolumeClaimList
	if err := r.List(ctx, &clusters, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	for _, l := range []client.ObjectList{&pods, &pvcs} {
		if err := r.List(ctx, l, client.InNamespace(namespace), client.MatchingLabels{vocab.LabelManagedBy: vocab.ManagerName}); err != nil {
			return nil, err
		}
	}
	names, uris := map[string]bool{}, map[string]bool{}
	for _, c := range clusters.Items {
		if b := c.Spec.Bootstrap; b != nil && b.Restore != nil {
			names[b.Restore.BackupName] = true
			if src := b.Restore.Source; src != nil {
				uris[src.URI(src.Key)] = true
			}
		}
		if c.Status.ClusterID == "" && c.Status.RestoredFrom != "" {
			uris[c.Status.RestoredFrom] = true
		}
	}
	for _, p := range pods.Items {
		names[p.Annotations[vocab.AnnotationRestoreSeed]] = true
	}
	for _, c := range pvcs.Items {
		names[c.Annotations[vocab.AnnotationRestoreSeed]] = true
	}
	out := map[string]bool{}
	for _, b := range owned {
		if names[b.Name] || (b.Status.Artifact != nil && uris[b.Status.Artifact.URI]) {
			out[b.Name] = true
		}
	}
	return out, nil
}

// deleteStored deletes a backup's stored object, if it has one.
func (r *ScheduleReconciler) deleteStored(ctx context.Context, b *v1alpha1.EtcdBackup) error {
	if b.Status.Artifact == nil {
		return nil
	}
	key, ok := b.Spec.Destination.KeyOf(b.Status.Artifact.URI)
	if !ok {
		return fmt.Errorf("%s is not at the backup's destination", b.Status.Artifact.URI)
	}
	if b.Spec.Destination.PVC != nil {
		return r.pruneOnClaim(ctx, b, key)
	}
	st, err := OpenDestination(ctx, r.APIReader, r.Open, b.Namespace, b.Spec.Destination)
	if err != nil {
		return err
	}
	defer st.Close()
	return st.Delete(ctx, key)
}

// errPruning: a Pod deletes a snapshot from a claim.
var errPruning = errors.New("a Pod deletes the snapshot")

// pruneOnClaim deletes a snapshot from a claim through a Pod that mounts it, owned by the
// backup (it goes with it): errPruning until the Pod succeeded; a failed Pod is replaced on
// the next try.
func (r *ScheduleReconciler) pruneOnClaim(ctx context.Context, b *v1alpha1.EtcdBackup, key string) error {
	p, err := backupPod(ctx, r, b, "prune")
	switch {
	case err != nil:
		return err
	case p == nil:
		if err := createBackupPod(ctx, r, b, resources.PrunePod(b, r.Images, key)); err != nil {
			return err
		}
		return errPruning
	}
	switch p.Status.Phase {
	case corev1.PodSucceeded:
		return nil
	case corev1.PodFailed:
		why := observe.FailedContainer(p.Status.ContainerStatuses)
		return errors.Join(fmt.Errorf("the Pod %s failed in %s", p.Name, why), deleteBackupPod(ctx, r, b, "prune"))
	}
	return errPruning
}

// ownedBy is the backups s created: labelled with its name and owned by its UID, so a
// schedule re-created under the same name does not prune its predecessor's.
func ownedBy(bs []v1alpha1.EtcdBackup, s *v1alpha1.EtcdBackupSchedule) []v1alpha1.EtcdBackup {
	var out []v1alpha1.EtcdBackup
	for _, b := range bs {
		if ref := metav1.GetControllerOf(&b); ref != nil && ref.UID == s.UID {
			out = append(out, b)
		}
	}
	return out
}

// recordSuccess records the newest successful backup in status, and the newest verified
// of those that exist (retention keeps it; one deleted by hand, or drilled again and
// failed, is no longer named).
func recordSuccess(s *v1alpha1.EtcdBackupSchedule, owned []v1alpha1.EtcdBackup) {
	s.Status.LastVerifiedBackup, s.Status.LastVerifiedTime = "", nil
	if v := backup.NewestVerified(owned); v != nil {
		s.Status.LastVerifiedBackup, s.Status.LastVerifiedTime = v.Name, v.Status.Artifact.TakenAt.DeepCopy()
	}
	for _, b := range owned {
		a := b.Status.Artifact
		if b.Status.Phase != v1alpha1.BackupSucceeded || a == nil {
			continue
		}
		if s.Status.LastSuccessfulTime == nil || a.TakenAt.After(s.Status.LastSuccessfulTime.Time) {
			s.Status.LastSuccessfulBackup, s.Status.LastSuccessfulTime = b.Name, a.TakenAt.DeepCopy()
		}
	}
}

// lastDrillFailed is the newest drilled backup when its drill failed; nil otherwise.
func lastDrillFailed(owned []v1alpha1.EtcdBackup) *v1alpha1.EtcdBackup {
	var last *v1alpha1.EtcdBackup
	for i, b := range owned {
		v := conditions.Get(&b, v1alpha1.VerifiedCondition)
		if v != nil && v.Status != metav1.ConditionUnknown && (last == nil || b.Name > last.Name) {
			last = &owned[i]
		}
	}
	if last == nil || !last.DrillFailed() {
		return nil
	}
	return last
}

// lastEnded is the newest backup that ended, nil when none did. Names end in the time the
// backup was for, so the newest has the greatest.
func lastEnded(owned []v1alpha1.EtcdBackup) *v1alpha1.EtcdBackup {
	var last *v1alpha1.EtcdBackup
	for i, b := range owned {
		if ended(b) && (last == nil || b.Name > last.Name) {
			last = &owned[i]
		}
	}
	return last
}
