package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/executor/resources"
)

// drillDeadline bounds a restore drill, from its Pod's creation; drillPoll is how often a
// running drill is looked at between its Pod's events.
const (
	drillDeadline = 15 * time.Minute
	drillPoll     = 2 * time.Second
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
	p, err := backupPod(ctx, r, b, "drill")
	switch {
	case errors.Is(err, errInTheWay):
		r.verdict(b, false, "DrillBlocked", err.Error())
		return reconcile.Result{}, nil
	case err != nil:
		return reconcile.Result{}, err
	case p == nil:
		return r.startDrill(ctx, b)
	}
	if why := failedContainer(append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...)); why != "" {
		r.verdict(b, false, "DrillFailed", fmt.Sprintf("restoring %s failed in %s", b.Status.Artifact.URI, why))
		return reconcile.Result{}, deletePod(ctx, r, b, "drill")
	}
	if now(r.Now).Sub(p.CreationTimestamp.Time) > drillDeadline {
		r.verdict(b, false, "DrillDeadlineExceeded", fmt.Sprintf("the scratch etcd restored from %s did not serve within %v", b.Status.Artifact.URI, drillDeadline))
		return reconcile.Result{}, deletePod(ctx, r, b, "drill")
	}
	if !observe.PodReady(p) || p.Status.PodIP == "" {
		return reconcile.Result{RequeueAfter: drillPoll}, nil
	}
	a := b.Status.Artifact
	inspect := r.Inspect
	if inspect == nil {
		inspect = etcd.ContentsAt
	}
	got, err := inspect(ctx, observe.ClientURL(p), a.Revision)
	if err != nil {
		conditions.MarkUnknown(b, v1alpha1.VerifiedCondition, "Drilling", "reading the scratch etcd %s: %v; trying again", p.Name, err)
		return reconcile.Result{RequeueAfter: drillPoll}, nil
	}
	ok, reason, msg := compareContents(a, got)
	r.verdict(b, ok, reason, msg)
	return reconcile.Result{}, deletePod(ctx, r, b, "drill")
}

// startDrill makes the drill's Pod, on the version and placement of the backup's cluster
// (the version a recovery would restore with), or the backup's own version when the
// cluster is gone.
func (r *BackupReconciler) startDrill(ctx context.Context, b *v1alpha1.EtcdBackup) (reconcile.Result, error) {
	a := b.Status.Artifact
	src, err := snapshotOf(b)
	if err != nil {
		r.verdict(b, false, "DrillFailed", err.Error())
		return reconcile.Result{}, nil
	}
	c := &v1alpha1.EtcdCluster{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterRef.Name}, c); client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	version := c.Spec.Version
	if version == "" || newerMinor(a.EtcdVersion, version) {
		version = a.EtcdVersion
	}
	p := resources.DrillPod(b, c, r.Images, resources.Restore{From: b.Name, Source: src, SHA256: a.SHA256}, version)
	if err := createPod(ctx, r, b, p); err != nil {
		return reconcile.Result{}, err
	}
	conditions.MarkUnknown(b, v1alpha1.VerifiedCondition, "Drilling", "restoring %s into a scratch etcd of version %s (Pod %s)", a.URI, version, p.Name)
	progressing(b, "Drilling", "restore drill running in Pod "+p.Name) // Ready again once verified
	return reconcile.Result{RequeueAfter: drillPoll}, nil
}

// verdict records the drill's outcome. A backup whose drill failed is not Ready: it may
// not restore, and a recovery passes it over.
func (r *BackupReconciler) verdict(b *v1alpha1.EtcdBackup, ok bool, reason, msg string) {
	conditions.Delete(b, meta.ReconcilingCondition)
	if ok {
		conditions.MarkTrue(b, v1alpha1.VerifiedCondition, reason, "%s", msg)
		conditions.Delete(b, meta.StalledCondition)
		conditions.MarkTrue(b, meta.ReadyCondition, "Verified", "%s", msg)
		return
	}
	conditions.MarkFalse(b, v1alpha1.VerifiedCondition, reason, "%s", msg)
	stall(b, reason, msg)
}

// compareContents checks what the scratch etcd holds at the artifact's revision against
// what the cluster held: the key count always, etcd's history hash when both were
// compacted at the same revision (the hash covers the history since compaction).
func compareContents(a *v1alpha1.Artifact, got etcd.Contents) (bool, string, string) {
	want := a.Contents
	switch {
	case want == nil:
		return true, "Restored", fmt.Sprintf("%s restored into a scratch etcd, which serves revision %d (%d keys; the backup recorded no contents to compare)",
			a.URI, a.Revision, got.Keys)
	case got.Keys != want.Keys:
		return false, "ContentsDiffer", fmt.Sprintf("%s restored, but holds %d keys at revision %d where the cluster held %d",
			a.URI, got.Keys, a.Revision, want.Keys)
	case got.CompactRevision == want.CompactRevision && int64(got.HashKV) != want.HashKV:
		return false, "ContentsDiffer", fmt.Sprintf("%s restored, but the hash of its history up to revision %d is %d where the cluster's was %d",
			a.URI, a.Revision, got.HashKV, want.HashKV)
	case got.CompactRevision != want.CompactRevision:
		return true, "Restored", fmt.Sprintf("%s restored into a scratch etcd, which holds the %d keys the cluster held at revision %d (history hash not compared: compacted at %d, the cluster at %d)",
			a.URI, got.Keys, a.Revision, got.CompactRevision, want.CompactRevision)
	}
	return true, "Restored", fmt.Sprintf("%s restored into a scratch etcd, which holds the %d keys and the history hash the cluster had at revision %d",
		a.URI, got.Keys, a.Revision)
}
