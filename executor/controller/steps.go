package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/executor/status"
	"github.com/etcdplan/etcdplan/planner"
)

// apply carries out one step. Every action is idempotent: applying it again after it took
// effect, or after the operator stopped midway, changes nothing more. Membership changes act
// on the member IDs the step carries, never on names. etcd refusing a change for now by its
// own rules is a wait, polled, not a failure backed off from.
func (r *Reconciler) apply(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, s plan.Step) error {
	err := r.effect(ctx, c, o, s)
	if errors.Is(err, etcd.ErrNotYet) {
		return status.Waiting("%s %s: %v", s.Action, s.Subject(), err)
	}
	return err
}

func (r *Reconciler) effect(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, s plan.Step) error {
	switch s.Action {
	case plan.CreateSeed:
		return r.startMember(ctx, c, o, s, []string{s.Member})
	case plan.StartMember:
		return r.startMember(ctx, c, o, s, nil)
	case plan.CheckData:
		return r.checkData(ctx, c, o, s)
	case plan.AddLearner:
		return r.addLearner(ctx, c, o, s)
	case plan.PromoteLearner:
		return withIDs(o, func(ids ...uint64) error { return o.etcd.Promote(ctx, ids[0]) }, s.MemberID)
	case plan.TransferLeadership:
		return withIDs(o, func(ids ...uint64) error { return o.etcd.MoveLeader(ctx, ids[0], ids[1]) }, s.MemberID, s.TargetID)
	case plan.RemoveMember:
		return withIDs(o, func(ids ...uint64) error { return o.etcd.Remove(ctx, ids[0]) }, s.MemberID)
	case plan.UpdatePeerURL:
		url := vocab.PeerURLAt(c.Name, c.Namespace, s.Member, s.Why == plan.WhyPeerURLToTLS, planner.MovedPeerURLPort(s))
		return withIDs(o, func(ids ...uint64) error { return o.etcd.UpdatePeerURL(ctx, ids[0], url) }, s.MemberID)
	case plan.Compact:
		if o.etcd == nil {
			return errors.New("no member answers")
		}
		return o.etcd.Compact(ctx)
	case plan.Defragment:
		return withIDs(o, func(ids ...uint64) error { return o.etcd.Defragment(ctx, s.Member, ids[0]) }, s.MemberID)
	case plan.DisarmAlarm:
		return withIDs(o, func(ids ...uint64) error { return o.etcd.DisarmNoSpace(ctx, ids[0]) }, s.MemberID)
	case plan.DeleteMember:
		// Two requests at once: the claim's deletion waits for no Pod (its protection does).
		pvc := make(chan error, 1)
		go func() { pvc <- r.deletePVC(ctx, c, o, s) }()
		return errors.Join(r.deleteMemberPod(ctx, c, o, s.Member), <-pvc)
	case plan.StopMember:
		if err := r.deleteMemberPod(ctx, c, o, s.Member); err != nil {
			return err
		}
		if p := o.pods[s.Member]; p != nil && p.DeletionTimestamp != nil {
			return r.podGoing(ctx, p) // a stop is done once the Pod is gone
		}
		return nil
	case plan.ExpandVolume:
		return r.expandPVC(ctx, c, o, s)
	case plan.UpgradeMember, plan.RestartMember:
		return r.recreatePod(ctx, c, o, s)
	case plan.ForceNewCluster:
		return r.forceNewCluster(ctx, c, o, s)
	case plan.RestoreFromBackup:
		return r.restoreFromBackup(ctx, c, o, s)
	case plan.SnapshotSurvivor, plan.SnapshotSource:
		return r.snapshotMember(ctx, c, o, s)
	case plan.Acknowledge:
		return r.acknowledge(c, s)
	case plan.RenewCertificate:
		return r.certs().Renew(ctx, o.inUse, s.Secret, r.now())
	case plan.AwaitCertificate:
		return r.awaitCertificate(ctx, c, o, s)
	case plan.RotateCA:
		if o.CA != nil && o.CA.Source != "" {
			return r.certs().ChangeSource(ctx, c, o.CA.Source, s.Why, o.members, r.now())
		}
		return r.certs().Rotate(ctx, o.inUse, s.Why, r.now())
	case plan.EnableAuth:
		if s.Why == plan.WhyAuthAdopted {
			return r.adoptUsers(ctx, c, o)
		}
		return r.enableAuth(ctx, c, o)
	case plan.UpdateUsers:
		return r.updateUsers(ctx, c, o)
	case plan.DisableAuth:
		return disableAuth(ctx, c, o)
	}
	return fmt.Errorf("unknown action %q", s.Action)
}

// withIDs parses the member IDs a step carries and calls f with them.
func withIDs(o *observation, f func(ids ...uint64) error, ids ...string) error {
	if o.etcd == nil {
		return errors.New("no member answers")
	}
	parsed := make([]uint64, len(ids))
	for i, s := range ids {
		id, err := etcd.ParseID(s)
		if err != nil || s == "" {
			return fmt.Errorf("the step carries no valid member ID (%q)", s)
		}
		parsed[i] = id
	}
	return f(parsed...)
}

// owned reports whether an object is this cluster's to act on: it carries the cluster's
// labels, and its controller is this cluster. Volume claims may have no controller: a
// retained claim outlives the cluster that made it, and a cluster of the same name re-uses it.
func owned(c *v1alpha1.EtcdCluster, obj metav1.Object, claim bool) bool {
	l := obj.GetLabels()
	if l[v1alpha1.LabelCluster] != c.Name || l[vocab.LabelManagedBy] != vocab.ManagerName {
		return false
	}
	ref := metav1.GetControllerOf(obj)
	if ref == nil {
		return claim
	}
	return ref.UID == c.UID
}

// nameTaken is the error of a step whose object name is held by an object the cluster does
// not own: the operator never adopts it silently.
func nameTaken(kind, name string) error {
	return stuck(v1alpha1.ReasonNameTaken,
		"%s %s exists and is not this cluster's (its labels or controller differ): the name is taken by another object; "+
			"delete or rename that %s if it is not needed, or give the EtcdCluster another name", kind, name, kind)
}

// create creates an object; one that exists already counts only when the cluster owns it.
func (r *Reconciler) create(ctx context.Context, c *v1alpha1.EtcdCluster, obj client.Object, kind string, claim bool) error {
	err := r.Create(ctx, obj)
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return fmt.Errorf("creating %s %s: %w", kind, obj.GetName(), err)
		}
		return nil
	}
	existing := obj.DeepCopyObject().(client.Object)
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(obj), existing); err != nil {
		return fmt.Errorf("reading %s %s: %w", kind, obj.GetName(), err)
	}
	if !owned(c, existing, claim) {
		return nameTaken(kind, obj.GetName())
	}
	return nil
}

// startMember creates a member's volume claim and Pod. A Pod that ended is deleted first,
// so the member starts again on its volume through the preflight check. seeds, when the
// member is one, are the members of the new cluster it starts with (itself, or the seeds
// of a restore).
func (r *Reconciler) startMember(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, s plan.Step, seeds []string) error {
	ms, err := r.prepareMember(ctx, c, o, s, seeds)
	if err != nil || ms == nil {
		return err
	}
	return r.launch(ctx, c, s, seeds, []*resources.MemberSpec{ms})
}

// prepareMember readies a member's Pod: the Pod it had gone, its claim bound. It returns the
// Pod's spec, or nil when the Pod runs.
func (r *Reconciler) prepareMember(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, s plan.Step, seeds []string) (*resources.MemberSpec, error) {
	if p := o.pods[s.Member]; p != nil {
		if !owned(c, p, false) {
			return nil, nameTaken("Pod", s.Member)
		}
		if p.DeletionTimestamp != nil {
			if err := r.deleteMemberPod(ctx, c, o, s.Member); err != nil {
				return nil, err
			}
			if !r.goneSoon(ctx, c, o, p) {
				return nil, r.podGoing(ctx, p)
			}
			if r.checkedLost(ctx, c, o, s.Member) {
				return nil, status.Waiting("the check of %s found its data gone while its old Pod went: the next look plans on that", s.Member)
			}
		} else if observe.PodEnded(p) {
			if why := restoreFailed(p, observe.RestoreName(seedRestore(c, s)), seeds); len(seeds) > 0 && why != "" {
				return nil, stuck(v1alpha1.ReasonRestoreFailed, "%s", why)
			}
			if why := observe.PreflightError(p); why != "" {
				return nil, preflightFailed(p, why)
			}
			if err := r.deleteMemberPod(ctx, c, o, s.Member); err != nil {
				return nil, err
			}
			if !r.goneSoon(ctx, c, o, p) {
				return nil, status.Waiting("waiting for the ended Pod of %s to go", s.Member)
			}
		} else {
			return nil, nil
		}
		delete(o.pods, s.Member)
	}
	if c.Spec.Storage.Medium != v1alpha1.StorageMediumMemory {
		if err := r.classExists(ctx, c, o, s.Member); err != nil {
			return nil, err
		}
		if err := r.ensurePVC(ctx, c, o, s.Member); err != nil {
			return nil, err
		}
		if !r.soon(ctx, func() bool { return !r.binding(ctx, c, o, s.Member) }) {
			return nil, status.Waiting("waiting for the volume claim of %s to be bound (its storage class binds claims at once)", s.Member)
		}
	}
	ms := r.memberSpec(c, o, s, seeds)
	return &ms, nil
}

// launch creates the Pods of members prepared for step s, all at once: the seeds of a
// restore start together. Seeds that start a new cluster wait, once, for every Pod but the
// seeds' to end, and restore what the step names.
func (r *Reconciler) launch(ctx context.Context, c *v1alpha1.EtcdCluster, s plan.Step, seeds []string, specs []*resources.MemberSpec) error {
	if slices.ContainsFunc(specs, func(ms *resources.MemberSpec) bool { return ms.Seed }) {
		if err := r.seedAlone(ctx, c, seeds); err != nil {
			return err
		}
		if spec := seedRestore(c, s); spec != nil {
			rs, err := r.restoreSource(ctx, c, spec)
			if err != nil {
				return err
			}
			for _, ms := range specs {
				if ms.Seed {
					ms.Restore = rs
				}
			}
		}
	}
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, ms := range specs {
		if s.Action == plan.RestoreFromBackup {
			ms.RestoreSeed = s.Backup
		}
		wg.Go(func() { errs[i] = r.createMemberPod(ctx, c, *ms) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, ms := range specs {
		if ms.Restore != nil {
			c.Status.RestoredFrom = ms.Restore.Source.URI(ms.Restore.Source.Key)
		}
	}
	return nil
}

// awaitCertificate waits until every ready member that mounts a renewed certificate serves
// it.
func (r *Reconciler) awaitCertificate(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, s plan.Step) error {
	ips := map[string]string{}
	for name, p := range o.pods {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil && observe.PodReady(p) {
			ips[name] = p.Status.PodIP
		}
	}
	return r.certs().Served(ctx, o.inUse, s.Secret, ips)
}

// tlsUnknown fails when a member's Pod is to serve TLS on a side that neither the spec nor
// the TLS in use (by) has: a side switched off with no record of its Secrets.
func tlsUnknown(c, by *v1alpha1.EtcdCluster, member string, listen plan.Listen) error {
	if l := resources.Serving(c, listen); l.Client != plan.ListenPlain && !by.Spec.TLS.ClientTLS() || l.Peer != plan.ListenPlain && !by.Spec.TLS.PeerTLS() {
		return stuck(v1alpha1.ReasonTLSSecretNotFound, "%s is to serve TLS while it is switched off, and the TLS the members served is not "+
			"recorded (status.tls.inUse): set spec.tls back as it was until the operator records it", member)
	}
	return nil
}

// createMemberPod creates a member's Pod, and first the peer certificate it mounts when the
// operator issues it.
func (r *Reconciler) createMemberPod(ctx context.Context, c *v1alpha1.EtcdCluster, ms resources.MemberSpec) error {
	by := ms.SecretsOf(c)
	if err := tlsUnknown(c, by, ms.Name, ms.Listen); err != nil {
		return err
	}
	if err := r.certs().EnsurePeer(ctx, by, ms.Name, r.now()); err != nil {
		return err
	}
	trust, err := r.certs().Trust(ctx, by, resources.Serving(c, ms.Listen))
	if err != nil {
		return err
	}
	ms.Trust = trust
	pod := resources.MemberPod(c, r.Images, ms)
	if err := controllerutil.SetControllerReference(c, pod, r.Scheme()); err != nil {
		return err
	}
	return r.create(ctx, c, pod, "Pod", false)
}

// seedAlone waits until no member Pod of the cluster but the seeds' may run etcd: seeds form
// a new cluster, and one cluster alone serves behind the client Service. Pods are read
// around the cache, so a seed created a moment ago is seen.
func (r *Reconciler) seedAlone(ctx context.Context, c *v1alpha1.EtcdCluster, seeds []string) error {
	pods, err := observe.MemberPods(ctx, r.APIReader, c)
	if err != nil {
		return err
	}
	for i := range pods {
		if p := &pods[i]; !slices.Contains(seeds, p.Labels[v1alpha1.LabelMember]) && !observe.PodEnded(p) {
			return status.Waiting("waiting for the Pod %s to end before %s starts a new cluster: one cluster alone serves behind the client Service",
				p.Name, strings.Join(seeds, ", "))
		}
	}
	return nil
}

// preflightFailed keeps a Pod whose preflight check could not read its member's data
// directory: a new Pod would fail the same way, and the data may be intact, so the member
// is neither replaced nor its volume deleted until a person mends the volume.
func preflightFailed(p *corev1.Pod, why string) error {
	return stuck(v1alpha1.ReasonPreflightFailed,
		"the preflight check of Pod %s could not read the member's data directory (%s): the data may be intact, so the member is not replaced "+
			"and its volume is kept; mend the volume (its permissions for the Pod's non-root user and fsGroup, the node's disk, the mount), "+
			"then delete Pod %s and a new one starts", p.Name, why, p.Name)
}

// seedRestore is what a seed's data is restored from: the backup a recovery names, else
// spec.bootstrap.restore; nil for none.
func seedRestore(c *v1alpha1.EtcdCluster, s plan.Step) *v1alpha1.RestoreSpec {
	switch {
	case s.Action == plan.RestoreFromBackup:
		return &v1alpha1.RestoreSpec{BackupName: s.Backup}
	case c.Spec.Bootstrap != nil:
		return c.Spec.Bootstrap.Restore
	}
	return nil
}

// podGoing says what a step waits for while a Pod terminates; a Pod stuck on a node that
// stopped reporting gets its own Stalled reason, since only a person can tell whether the
// node is gone for good.
func (r *Reconciler) podGoing(ctx context.Context, p *corev1.Pod) error {
	node := &corev1.Node{}
	if p.Spec.NodeName != "" && r.APIReader.Get(ctx, client.ObjectKey{Name: p.Spec.NodeName}, node) == nil && !nodeReady(node) {
		return stuck(v1alpha1.ReasonPodStuckTerminating,
			"Pod %s is terminating on node %s, which is not ready: if the node is gone for good, force-delete the Pod "+
				"(kubectl delete pod %s --force --grace-period=0; its volume is kept) and the member starts elsewhere", p.Name, p.Spec.NodeName, p.Name)
	}
	return status.Waiting("waiting for the old Pod of %s to go", p.Name)
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// memberSpec says how a member starts, from its membership history as it is now (member
// Pods never restart in place, so every start is a new Pod rendered from it): a seed, with
// the other seeds of a restore, only before the cluster formed; a joining member with the members etcd lists (itself
// included); a member that ever joined (its volume records an ID, etcd knows it started, or
// status recorded it as a voter) expects to find its data, and its Pod stops at the
// preflight check when the data is gone.
func (r *Reconciler) memberSpec(c *v1alpha1.EtcdCluster, o *observation, s plan.Step, seeds []string) resources.MemberSpec {
	seed := len(seeds) > 0
	ms := resources.MemberSpec{Name: s.Member, Version: s.Version, Seed: seed && c.Status.ClusterID == "", Listen: s.Listen}
	if o.inUse != nil && o.inUse != c {
		ms.TLS = o.inUse.Spec.TLS
	}
	if pvc := o.pvcs[s.Member]; pvc != nil && pvc.Annotations[vocab.AnnotationMemberID] != "" {
		ms.ExpectData = true
	}
	for _, rm := range o.Recorded {
		if rm.Name == s.Member && !rm.Learner {
			ms.ExpectData, ms.Voter = true, o.Etcd == nil // etcd's own view, when there is one, says below
		}
	}
	if seed {
		for _, name := range seeds {
			ms.InitialCluster = append(ms.InitialCluster, name+"="+resources.NewPeerURL(c, name, s.Listen))
		}
		// A seed whose Pod is made once its cluster answered is one of its members: it
		// starts on its own data and never restores again (a voter never forgets).
		ms.ExpectData = ms.ExpectData || !ms.Seed
		return ms
	}
	if o.Etcd == nil {
		ms.InitialCluster = []string{s.Member + "=" + resources.NewPeerURL(c, s.Member, s.Listen)}
		for _, rm := range o.Recorded {
			if rm.Name != s.Member {
				ms.InitialCluster = append(ms.InitialCluster, rm.Name+"="+resources.PeerURL(c, rm.Name))
			}
		}
		return ms
	}
	for _, m := range o.Etcd.Members {
		name := m.MemberName()
		for _, u := range m.PeerURLs { // as etcd has them: a joining member's must match
			ms.InitialCluster = append(ms.InitialCluster, name+"="+u)
		}
		if name == s.Member {
			ms.ExpectData = ms.ExpectData || m.Started()
			ms.Voter = !m.Learner
		}
	}
	return ms
}

// stopAtOnceGrace is the grace period of a member Pod deleted while etcd's graceful stop
// could achieve nothing (planner.StopAtOnce). Never 0: the kubelet removes the Pod object
// only once etcd stopped, so no etcd of it serves after its Pod is gone.
const stopAtOnceGrace = 1

// grace is the grace period a Pod stops within: the one its deletion asked, else its own.
func grace(p *corev1.Pod) int64 {
	return ptr.Deref(cmp.Or(p.DeletionGracePeriodSeconds, p.Spec.TerminationGracePeriodSeconds), 30)
}

// cutsGrace: a member Pod already going is to stop at once: the operator's, with a longer
// grace period than stopAtOnceGrace, and planner.StopAtOnce holds for its member.
func cutsGrace(c *v1alpha1.EtcdCluster, o *observation, p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil && grace(p) > stopAtOnceGrace && owned(c, p, false) && planner.StopAtOnce(o.desired, o.Observed, p.Name)
}

// deleteMemberPod deletes a member's Pod for good (the claim stays); one gone is no error,
// and so is one going, unless its grace period may be cut short (planner.StopAtOnce).
func (r *Reconciler) deleteMemberPod(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, member string) error {
	p := o.pods[member]
	going := p != nil && p.DeletionTimestamp != nil
	if p == nil || going && !cutsGrace(c, o, p) {
		return nil
	}
	opts := []client.DeleteOption{client.Preconditions{UID: &p.UID}}
	if going || planner.StopAtOnce(o.desired, o.Observed, member) {
		opts = append(opts, client.GracePeriodSeconds(stopAtOnceGrace))
	}
	if !owned(c, p, false) {
		return nameTaken("Pod", member)
	}
	err := r.Delete(ctx, p, opts...)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// recreatePod replaces a member's Pod with one rendered from the current spec at the
// step's version, on the same volume. The old Pod is deleted and the step waits for it to go
// (etcd stops within its grace period), then creates the new one, so the planner never sees
// the member without a Pod halfway through. A Pod that takes longer is waited for across
// reconciles, within the step's deadline.
func (r *Reconciler) recreatePod(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, s plan.Step) error {
	if p := o.pods[s.Member]; p != nil {
		if !owned(c, p, false) {
			return nameTaken("Pod", s.Member)
		}
		trust, err := r.certs().Trust(ctx, cmp.Or(o.inUse, c), resources.Serving(c, s.Listen))
		if err != nil {
			return err
		}
		if p.Annotations[vocab.AnnotationVersion] == s.Version && p.Annotations[vocab.AnnotationConfigHash] == c.Spec.ConfigHash() &&
			resources.Served(p) == resources.Serving(c, s.Listen) && p.Annotations[vocab.AnnotationTrust] == trust {
			return nil // already re-created
		}
		if err := tlsUnknown(c, cmp.Or(o.inUse, c), s.Member, s.Listen); err != nil {
			return err // before the old Pod goes
		}
		if err := r.removePod(ctx, c, o, p); err != nil {
			return err
		}
	}
	return r.startMember(ctx, c, o, s, nil)
}

// soonWait bounds how long a step waits within one reconcile for what usually follows its
// action in a moment (a deleted Pod going, a new claim binding): another look would cost
// more than the wait, most of all while no quorum answers. It covers a Pod deleted with
// stopAtOnceGrace and the kubelet's report that it ended. Longer waits go on across
// reconciles.
const soonWait = stopAtOnceGrace*time.Second + time.Second

// soon polls done every 50 ms for up to soonWait and reports whether it held.
func (r *Reconciler) soon(ctx context.Context, done func() bool) bool {
	held := false
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, soonWait, true, func(context.Context) (bool, error) {
		held = done()
		return held, nil
	})
	return held
}

// goneSoon reports whether the Pod (this one, by UID) is gone, read around the cache, waiting
// soonWait at most: a Pod whose etcd ended or stops at once goes within that, and the
// look the step runs on may be older than the Pod's end. It stops waiting once another
// member Pod the look saw staying starts to go, or one it saw going is gone (as the cache
// shows): that may change the plan (a quorum goes, and a survivor's snapshot is asked for
// early; a member whose Pod is gone starts before one whose Pod still goes), and the next
// look, which the Pod's event brings, says how.
func (r *Reconciler) goneSoon(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, p *corev1.Pod) bool {
	gone := false
	staying, going := lookPods(o, p.Name, false), lookPods(o, p.Name, true)
	r.soon(ctx, func() bool {
		now := &corev1.Pod{}
		err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(p), now)
		gone = apierrors.IsNotFound(err) || err == nil && now.UID != p.UID
		return gone || r.podsGoing(ctx, c, staying, going)
	})
	return gone
}

// removePod deletes a member's Pod and waits, within its grace period, until it is gone.
func (r *Reconciler) removePod(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, p *corev1.Pod) error {
	if err := r.deleteMemberPod(ctx, c, o, p.Name); err != nil {
		return err
	}
	gone := false
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Duration(grace(p)+5)*time.Second, true, func(ctx context.Context) (bool, error) {
		err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: c.Namespace, Name: p.Name}, &corev1.Pod{})
		gone = apierrors.IsNotFound(err)
		return gone, nil
	})
	if err != nil || !gone {
		return r.podGoing(ctx, p)
	}
	delete(o.pods, p.Name)
	return nil
}
