// Package backupctl holds the reconcilers of backups: BackupReconciler takes the snapshot an
// EtcdBackup asks for (streamed by the operator, or by a Pod onto a volume claim) and drills
// it when asked (a restore into a scratch etcd); ScheduleReconciler creates an EtcdBackupSchedule's
// backups on time and prunes those its retention no longer keeps. source.go says where a
// backup's snapshot is and how its store opens, which a cluster's restore reads too.
package backupctl

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/backup"
	"github.com/etcdplan/etcdplan/executor/certs"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/executor/snapshot"
	"github.com/etcdplan/etcdplan/executor/status"
	"github.com/etcdplan/etcdplan/executor/store"
	"github.com/etcdplan/etcdplan/planner"
)

// backupDeadline is how long a backup is tried before it fails; backupRetry is the wait
// between tries.
const (
	backupDeadline = 10 * time.Minute
	backupRetry    = 10 * time.Second
)

// BackupReconciler takes the one snapshot each EtcdBackup asks for.
type BackupReconciler struct {
	client.Client
	// APIReader reads Secrets around the cache: the operator does not watch every Secret.
	APIReader client.Reader
	// Dial connects to etcd members; etcd.Dial outside tests.
	Dial etcd.DialFunc
	// Open prepares a destination's store; store.Open outside tests.
	Open OpenFunc
	// Now is the clock.
	Now func() time.Time
	// Images are what a restore drill's Pod runs.
	Images resources.Images
	// Inspect reads what a drill's scratch etcd holds, as root with the password when one
	// is given; etcd.ContentsAt outside tests.
	Inspect func(ctx context.Context, url string, rev int64, rootPassword string) (etcd.Contents, error)
	// DrillDeadline is how long a restore drill's scratch etcd has to serve, from its Pod's
	// creation, before the drill is taken as not run; 0 is 15 minutes.
	DrillDeadline time.Duration
}

// SetupWithManager registers the reconciler.
func (r *BackupReconciler) SetupWithManager(mgr ctrl.Manager) error {
	// A few at once: each holds one part (8 MiB) in memory, and a large database's backup
	// should not hold up another cluster's. A drill's Pod wakes its backup.
	return ctrl.NewControllerManagedBy(mgr).For(&v1alpha1.EtcdBackup{}).Owns(&corev1.Pod{}).
		WithOptions(controller.Options{MaxConcurrentReconciles: 4}).Complete(r)
}

// Reconcile takes the backup unless it ended, then drills it when it asks; a failure that retrying may cure (the
// cluster not ready yet, the store unreachable, a Secret not there yet) is tried again until
// the deadline. The backup is read from the API server: the event of its own Running write
// can wake a reconcile whose cache has not yet seen it end, and that would take the
// snapshot again.
func (r *BackupReconciler) Reconcile(ctx context.Context, req reconcile.Request) (result reconcile.Result, retErr error) {
	b := &v1alpha1.EtcdBackup{}
	if err := r.APIReader.Get(ctx, req.NamespacedName, b); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if ended(*b) && !drillDue(b) {
		return reconcile.Result{}, nil
	}
	writer := status.NewWriter(r.Client, b)
	b.Status.ObservedGeneration = b.Generation // a backup's spec is judged at every reconcile
	write := func() error { return writer.Write(ctx, b) }
	defer func() {
		if err := write(); err != nil && retErr == nil {
			retErr = err
		}
	}()
	if ended(*b) {
		return r.drill(ctx, b)
	}
	taken, err := r.take(ctx, b, func() error {
		b.Status.Phase = v1alpha1.BackupRunning
		status.Progressing(b, v1alpha1.ReasonRunning, "streaming a snapshot to "+b.Spec.Destination.URI(""))
		return write()
	})
	switch {
	case err == nil:
		b.Status.Phase, b.Status.Artifact = v1alpha1.BackupSucceeded, taken
		conditions.Delete(b, meta.ReconcilingCondition)
		conditions.MarkTrue(b, meta.ReadyCondition, v1alpha1.ReasonSucceeded, "stored %s (%d bytes, revision %d), matching etcd's integrity hash",
			taken.URI, taken.Size, taken.Revision)
		if drillDue(b) {
			return r.drill(ctx, b)
		}
		return reconcile.Result{}, nil
	case errors.Is(err, store.ErrRefused):
		fail(b, FailureReason(err), err.Error())
		return reconcile.Result{}, nil
	case status.Now(r.Now).Sub(b.CreationTimestamp.Time) > backupDeadline:
		fail(b, v1alpha1.ReasonDeadlineExceeded, fmt.Sprintf("no snapshot stored within %v; last: %v", backupDeadline, err))
		return reconcile.Result{}, deleteBackupPod(ctx, r, b, "snapshot")
	case errors.Is(err, errSnapshotRunning):
		return reconcile.Result{RequeueAfter: drillPoll}, nil
	}
	b.Status.Phase = v1alpha1.BackupPending
	if FailureReason(err) == v1alpha1.ReasonStoreFull {
		err = fmt.Errorf("%w; free space there (delete older backups, or lower a schedule's keepLast or maxAge)", err)
	}
	conditions.MarkReconciling(b, FailureReason(err), "%v; trying again", err)
	conditions.MarkFalse(b, meta.ReadyCondition, FailureReason(err), "%v", err)
	log.FromContext(ctx).Info("backup not taken; trying again", "reason", FailureReason(err), "error", err.Error(), "after", backupRetry)
	return reconcile.Result{RequeueAfter: backupRetry}, nil
}

// take streams the snapshot: from the member spec.member names, else from one chosen on
// etcd's own view, to the destination. running records that it starts.
func (r *BackupReconciler) take(ctx context.Context, b *v1alpha1.EtcdBackup, running func() error) (*v1alpha1.Artifact, error) {
	c := &v1alpha1.EtcdCluster{}
	if err := r.Get(ctx, client.ObjectKey{Namespace: b.Namespace, Name: b.Spec.ClusterRef.Name}, c); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, status.Stuck(v1alpha1.ReasonClusterNotFound, "EtcdCluster %s does not exist", b.Spec.ClusterRef.Name)
		}
		return nil, err
	}
	var st store.Store
	if pvc := b.Spec.Destination.PVC; pvc != nil {
		if a, done, err := r.claimSnapshot(ctx, b); done {
			return a, err
		}
	} else {
		var err error
		if st, err = OpenDestination(ctx, r.APIReader, r.Open, b.Namespace, b.Spec.Destination); err != nil {
			return nil, err
		}
		defer st.Close()
	}
	conn, view, endpoints, err := r.connect(ctx, c, b.Spec.Member != "")
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	m, err := backup.Source(view)
	if b.Spec.Member != "" {
		m, err = backup.Member(view, b.Spec.Member)
	}
	if err != nil {
		return nil, status.Stuck(v1alpha1.ReasonNoMemberAnswers, "%v", err)
	}
	if err := running(); err != nil {
		return nil, err
	}
	at := status.Now(r.Now)
	unique := string(b.UID)
	if len(unique) > 8 {
		unique = unique[:8]
	}
	if st == nil {
		return nil, r.startClaimSnapshot(ctx, b, c, m, view.ClusterID, endpoints[m.Name], at, unique)
	}
	t, err := backup.Take(ctx, conn, m, st, func(rev int64) string { return backup.Key(c.Namespace, c.Name, at, rev, unique) })
	if err != nil {
		if errors.Is(err, snapshot.ErrCorrupt) {
			return nil, status.Stuck(v1alpha1.ReasonSnapshotCorrupt, "the snapshot of %s did not match etcd's integrity hash and was not kept", m.Name)
		}
		return nil, err
	}
	return artifact(st.URI(t.Key), t, m.Version, m.Name, view.ClusterID, at), nil
}

// connect dials the cluster's running members and reads etcd's view through them, a local
// one for a backup of a named member (the snapshot of a survivor is asked for while no
// quorum answers); the caller closes the connection.
func (r *BackupReconciler) connect(ctx context.Context, c *v1alpha1.EtcdCluster, local bool) (etcd.Cluster, *planner.EtcdView, map[string]string, error) {
	if c.Status.ClusterID == "" {
		return nil, nil, nil, status.Stuck(v1alpha1.ReasonClusterNotReady, "EtcdCluster %s has not formed yet", c.Name)
	}
	pods, err := observe.MemberPods(ctx, r, c)
	if err != nil {
		return nil, nil, nil, err
	}
	endpoints := observe.Endpoints(pods)
	if len(endpoints) == 0 {
		return nil, nil, nil, status.Stuck(v1alpha1.ReasonNoMemberAnswers, "no member of %s runs", c.Name)
	}
	keeper := certs.Keeper{Client: r.Client, Reader: r.APIReader}
	inUse, err := keeper.InUse(ctx, c, pods)
	if err != nil {
		return nil, nil, nil, err
	}
	tlsCfg, _, err := keeper.Operator(ctx, inUse)
	if err != nil {
		return nil, nil, nil, err
	}
	conn, err := r.Dial(endpoints, tlsCfg)
	if err != nil {
		return nil, nil, nil, err
	}
	conn.SetCluster(c.Status.ClusterID, endpoints)
	conn.SetStopping(observe.Stopping(pods))
	read := conn.View
	if local {
		read = conn.LocalView
	}
	view, err := read(ctx)
	if err != nil {
		_ = conn.Close()
		return nil, nil, nil, status.Stuck(v1alpha1.ReasonNoMemberAnswers, "%v", err)
	}
	return conn, view, endpoints, nil
}

// artifact describes a stored snapshot.
func artifact(uri string, t backup.Taken, version, member, clusterID string, at time.Time) *v1alpha1.Artifact {
	return &v1alpha1.Artifact{URI: uri, Size: t.Size, SHA256: t.SHA256, Revision: t.Revision, EtcdVersion: version,
		Member: member, ClusterID: clusterID, TakenAt: metav1.NewTime(at),
		Contents: &v1alpha1.Contents{Keys: t.Contents.Keys, HashKV: int64(t.Contents.HashKV), CompactRevision: t.Contents.CompactRevision}}
}

// fail ends a backup that will not be tried again.
func fail(b *v1alpha1.EtcdBackup, why, msg string) {
	b.Status.Phase = v1alpha1.BackupFailed
	status.Stall(b, why, msg)
}
