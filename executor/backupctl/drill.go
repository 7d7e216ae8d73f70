package backupctl

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/certs"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/executor/status"
)

// DefaultDrillDeadline bounds a restore drill, from its Pod's creation, unless the
// operator's --drill-deadline (BackupReconciler.DrillDeadline) says otherwise; drillPoll is
// how often a running drill is looked at between its Pod's events. A drill that could not
// run is tried again drillRetryFirst later, each next try twice as long after, at most
// drillRetryMax.
const (
	DefaultDrillDeadline = 15 * time.Minute
	drillPoll            = 2 * time.Second
	drillRetryFirst      = time.Minute
	drillRetryMax        = time.Hour
)

// drillDue: the backup asks for a drill and has no verdict on its spec as it is now.
func drillDue(b *v1alpha1.EtcdBackup) bool {
	if !b.Spec.Verify || b.Status.Phase != v1alpha1.BackupSucceeded || b.Status.Artifact == nil {
		return false
	}
	v := conditions.Get(b, v1alpha1.VerifiedCondition)
	return v == nil || v.Status == metav1.ConditionUnknown || v.ObservedGeneration != b.Generation
}

// drill restores the backup into a scratch etcd and checks what it holds against what the
// cluster held, one look at a time: the Pod is made, then waited on, then read and removed.
func (r *BackupReconciler) drill(ctx context.Context, b *v1alpha1.EtcdBackup) (reconcile.Result, error) {
	if wait := r.drillWait(b); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	p, err := backupPod(ctx, r, b, "drill")
	switch {
	case errors.Is(err, errInTheWay):
		return r.notRun(b, v1alpha1.ReasonDrillBlocked, err.Error()), nil
	case err != nil:
		return reconcile.Result{}, err
	case p == nil:
		return r.startDrill(ctx, b)
	}
	if why := observe.FailedContainer(append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...)); why != "" {
		r.verdict(b, false, v1alpha1.ReasonDrillFailed, fmt.Sprintf("restoring %s failed in %s", b.Status.Artifact.URI, why))
		return reconcile.Result{}, deleteBackupPod(ctx, r, b, "drill")
	}
	if deadline := r.drillDeadline(); status.Now(r.Now).Sub(p.CreationTimestamp.Time) > deadline {
		msg := fmt.Sprintf("the scratch etcd restored from %s did not serve within %v%s", b.Status.Artifact.URI, deadline, waitingOn(p))
		return r.notRun(b, v1alpha1.ReasonDrillDeadlineExceeded, msg), deleteBackupPod(ctx, r, b, "drill")
	}
	if !observe.PodReady(p) || p.Status.PodIP == "" {
		return reconcile.Result{RequeueAfter: drillPoll}, nil
	}
	a := b.Status.Artifact
	inspect := r.Inspect
	if inspect == nil {
		inspect = etcd.ContentsAt
	}
	password, err := r.rootPassword(ctx, b)
	if err == nil {
		var got etcd.Contents
		if got, err = inspect(ctx, observe.ClientURL(p), a.Revision, password); err == nil {
			ok, reason, msg := compareContents(a, got)
			r.verdict(b, ok, reason, msg)
			return reconcile.Result{}, deleteBackupPod(ctx, r, b, "drill")
		}
	}
	conditions.MarkUnknown(b, v1alpha1.VerifiedCondition, v1alpha1.ReasonDrilling, "reading the scratch etcd %s: %v; trying again", p.Name, err)
	return reconcile.Result{RequeueAfter: drillPoll}, nil
}

// rootPassword is the password of etcd's root user of the backup's cluster when the cluster
// has had auth on (its snapshots carry etcd's users and auth flag): the drill reads the
// scratch etcd as root. "" when it never had auth, or is gone.
func (r *BackupReconciler) rootPassword(ctx context.Context, b *v1alpha1.EtcdBackup) (string, error) {
	c := &v1alpha1.EtcdCluster{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterRef.Name}, c); err != nil || c.Status.Auth == nil {
		return "", client.IgnoreNotFound(err)
	}
	s := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: c.RootPasswordSecret()}, s); err != nil {
		return "", fmt.Errorf("reading root's password for the snapshot's etcd authentication: %w", err)
	}
	return string(s.Data[certs.RootPasswordKey]), nil
}

// startDrill makes the drill's Pod, on the version and placement of the backup's cluster
// (the version a recovery would restore with), or the backup's own version when the
// cluster is gone.
func (r *BackupReconciler) startDrill(ctx context.Context, b *v1alpha1.EtcdBackup) (reconcile.Result, error) {
	a := b.Status.Artifact
	src, err := SnapshotOf(b)
	if err != nil {
		r.verdict(b, false, v1alpha1.ReasonDrillFailed, err.Error())
		return reconcile.Result{}, nil
	}
	c := &v1alpha1.EtcdCluster{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterRef.Name}, c); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	version := c.Spec.Version
	if version == "" || NewerMinor(a.EtcdVersion, version) {
		version = a.EtcdVersion
	}
	p := resources.DrillPod(b, c, r.Images, resources.Restore{From: b.Name, Source: src, SHA256: a.SHA256}, version)
	if err := createBackupPod(ctx, r, b, p); err != nil {
		return reconcile.Result{}, err
	}
	b.Status.NextDrillTime = nil
	conditions.MarkUnknown(b, v1alpha1.VerifiedCondition, v1alpha1.ReasonDrilling, "restoring %s into a scratch etcd of version %s (Pod %s)", a.URI, version, p.Name)
	status.Progressing(b, v1alpha1.ReasonDrilling, "restore drill running in Pod "+p.Name) // Ready again once verified
	return reconcile.Result{RequeueAfter: drillPoll}, nil
}

// verdict records the drill's outcome. A backup whose drill failed is not Ready: it may
// not restore, and a recovery passes it over.
func (r *BackupReconciler) verdict(b *v1alpha1.EtcdBackup, ok bool, reason, msg string) {
	b.Status.DrillTries, b.Status.NextDrillTime = 0, nil
	conditions.Delete(b, meta.ReconcilingCondition)
	if ok {
		conditions.MarkTrue(b, v1alpha1.VerifiedCondition, reason, "%s", msg)
		conditions.Delete(b, meta.StalledCondition)
		conditions.MarkTrue(b, meta.ReadyCondition, v1alpha1.ReasonVerified, "%s", msg)
		return
	}
	conditions.MarkFalse(b, v1alpha1.VerifiedCondition, reason, "%s", msg)
	status.Stall(b, reason, msg)
}

// notRun records a drill that could not run: no verdict, so the backup stays Ready and
// Verified Unknown, and the drill is tried again, each wait twice the one before.
func (r *BackupReconciler) notRun(b *v1alpha1.EtcdBackup, reason, msg string) reconcile.Result {
	wait := drillRetryMax
	if n := b.Status.DrillTries; n < 6 { // 1 min << 6 is past the hour
		wait = drillRetryFirst << n
	}
	next := status.Now(r.Now).Add(wait)
	b.Status.DrillTries++
	b.Status.NextDrillTime = &metav1.Time{Time: next}
	msg = fmt.Sprintf("%s; tried again at %s", msg, next.UTC().Format(time.RFC3339))
	conditions.MarkUnknown(b, v1alpha1.VerifiedCondition, reason, "%s", msg)
	conditions.Delete(b, meta.ReconcilingCondition)
	conditions.Delete(b, meta.StalledCondition)
	conditions.MarkTrue(b, meta.ReadyCondition, reason, "the snapshot is stored and may restore, but its restore drill could not run: %s", msg)
	return reconcile.Result{RequeueAfter: wait}
}

// drillDeadline is how long a drill's Pod has to serve: DrillDeadline when set, else
// DefaultDrillDeadline.
func (r *BackupReconciler) drillDeadline() time.Duration {
	if r.DrillDeadline > 0 {
		return r.DrillDeadline
	}
	return DefaultDrillDeadline
}

// drillWait is what is left of the wait before a drill that could not run is tried again;
// a new spec is drilled at once.
func (r *BackupReconciler) drillWait(b *v1alpha1.EtcdBackup) time.Duration {
	v := conditions.Get(b, v1alpha1.VerifiedCondition)
	if b.Status.NextDrillTime == nil || v == nil || v.ObservedGeneration != b.Generation {
		return 0
	}
	return b.Status.NextDrillTime.Sub(status.Now(r.Now))
}

// waitingOn says what keeps a drill's Pod from serving, as the scheduler or kubelet says
// it (unscheduled, a container waiting, an init container still running); "" when
// neither says.
func waitingOn(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return fmt.Sprintf(" (not scheduled: %s)", c.Message)
		}
	}
	for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if w := cs.State.Waiting; w != nil && w.Reason != "" && w.Reason != "PodInitializing" {
			return fmt.Sprintf(" (%s waits: %s)", cs.Name, strings.TrimSuffix(w.Reason+": "+w.Message, ": "))
		}
	}
	for _, cs := range p.Status.InitContainerStatuses {
		if cs.State.Running != nil {
			return fmt.Sprintf(" (%s still runs)", cs.Name)
		}
	}
	return ""
}

// compareContents checks what the scratch etcd holds at the artifact's revision against
// what the cluster held: the key count always, etcd's history hash when both were
// compacted at the same revision (the hash covers the history since compaction).
func compareContents(a *v1alpha1.Artifact, got etcd.Contents) (bool, string, string) {
	want := a.Contents
	switch {
	case want == nil:
		return true, v1alpha1.ReasonRestored, fmt.Sprintf("%s restored into a scratch etcd, which serves revision %d (%d keys; the backup recorded no contents to compare)",
			a.URI, a.Revision, got.Keys)
	case got.Keys != want.Keys:
		return false, v1alpha1.ReasonContentsDiffer, fmt.Sprintf("%s restored, but holds %d keys at revision %d where the cluster held %d",
			a.URI, got.Keys, a.Revision, want.Keys)
	case got.CompactRevision == want.CompactRevision && int64(got.HashKV) != want.HashKV:
		return false, v1alpha1.ReasonContentsDiffer, fmt.Sprintf("%s restored, but the hash of its history up to revision %d is %d where the cluster's was %d",
			a.URI, a.Revision, got.HashKV, want.HashKV)
	case got.CompactRevision != want.CompactRevision:
		return true, v1alpha1.ReasonRestored, fmt.Sprintf("%s restored into a scratch etcd, which holds the %d keys the cluster held at revision %d (history hash not compared: compacted at %d, the cluster at %d)",
			a.URI, got.Keys, a.Revision, got.CompactRevision, want.CompactRevision)
	}
	return true, v1alpha1.ReasonRestored, fmt.Sprintf("%s restored into a scratch etcd, which holds the %d keys and the history hash the cluster had at revision %d",
		a.URI, got.Keys, a.Revision)
}
