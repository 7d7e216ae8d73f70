package controller

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/adoption"
	"github.com/etcdplan/etcdplan/executor/certs"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/planner"
)

// observation is one look at a cluster: the planner's input and what the executor needs
// to act on it.
type observation struct {
	planner.Observed
	// desired is the planner's view of the spec, computed once per look.
	desired planner.Desired
	pods    map[string]*corev1.Pod
	pvcs    map[string]*corev1.PersistentVolumeClaim
	// checks are the cluster's check Pods (plan.CheckData).
	checks []corev1.Pod
	etcd   etcd.Cluster // nil when no member has an address
	// applied is the step applied on this look, if any.
	applied plan.Step
	// defragNext is when spec.maintenance.defrag.schedule comes next (zero: no schedule).
	defragNext time.Time
	// snapshotTo is where a survivor's snapshot goes (Observed.SnapshotTo); nil for none.
	snapshotTo *v1alpha1.BackupDestination
	// tls is what the look found of the cluster's TLS, and inUse the cluster with the TLS
	// its members serve by (certs.Keeper.InUse).
	tls   certs.State
	inUse *v1alpha1.EtcdCluster
	// members are the members with a Pod or a claim: their peer certificates are the
	// cluster's.
	members []string
}

// clients keeps one etcd connection per cluster, re-pointed as member Pods move, and
// dialed again when the operator's client certificate changed or the members' endpoints
// turned to TLS (a connection dials one way).
type clients struct {
	mu sync.Mutex
	m  map[types.NamespacedName]conn
}

// conn is a cluster's connection and the version of the TLS configuration it was dialed with.
type conn struct {
	etcd.Cluster
	tls string
}

func (cs *clients) get(uid types.NamespacedName, clusterID string, endpoints map[string]string, t certs.State, dial etcd.DialFunc) (etcd.Cluster, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	version := t.Version + " " + observe.Scheme(endpoints)
	if cli, ok := cs.m[uid]; ok && cli.tls == version {
		cli.SetCluster(clusterID, endpoints)
		return cli, nil
	} else if ok {
		_ = cli.Close()
	}
	cli, err := dial(endpoints, t.Operator)
	if err != nil {
		return nil, err
	}
	cli.SetCluster(clusterID, endpoints)
	if cs.m == nil {
		cs.m = map[types.NamespacedName]conn{}
	}
	cs.m[uid] = conn{cli, version}
	return cli, nil
}

// forget closes the connection of a cluster that is gone.
func (cs *clients) forget(uid types.NamespacedName) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cli, ok := cs.m[uid]; ok {
		_ = cli.Close()
		delete(cs.m, uid)
	}
}

func (r *Reconciler) observe(ctx context.Context, c *v1alpha1.EtcdCluster) (*observation, error) {
	for tries := 1; ; tries++ {
		o, err := r.observeOnce(ctx, c, tries < maxLooks)
		if !errors.Is(err, errEndpointGoing) {
			return o, err
		}
	}
}

// maxLooks bounds the looks observe starts again when a member Pod it asks goes meanwhile.
const maxLooks = 3

// errEndpointGoing: a member Pod whose etcd the look asks started to go (the cache shows
// it deleted, or going) while the look waited for etcd.
var errEndpointGoing = errors.New("a member Pod the look asks started to go")

// viewWhileServing reads etcd's view, and gives it up (errEndpointGoing) once a member Pod
// it asks starts to go: a stopping etcd holds calls until their clocks end, seconds in all,
// while a look without it takes moments. A look that gives up is started again, on the
// Pods the cache holds then.
func (r *Reconciler) viewWhileServing(ctx context.Context, c *v1alpha1.EtcdCluster, cli etcd.Cluster, asked map[string]types.UID) (*planner.EtcdView, error) {
	vctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-vctx.Done():
				return
			case <-tick.C:
			}
			if r.podsGoing(vctx, c, asked, nil) {
				cancel(errEndpointGoing)
				return
			}
		}
	}()
	view, err := cli.View(vctx)
	if cause := context.Cause(vctx); errors.Is(cause, errEndpointGoing) {
		return nil, cause
	}
	return view, err
}

// podsGoing: one of the member Pods seen staying (by name, with its UID) is gone, replaced
// or going in the cache, or one seen going is gone or replaced.
func (r *Reconciler) podsGoing(ctx context.Context, c *v1alpha1.EtcdCluster, staying, going map[string]types.UID) bool {
	pods, err := observe.MemberPods(ctx, r.Client, c)
	if err != nil {
		return false
	}
	left := func(name string, uid types.UID, goes bool) bool {
		i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return p.Name == name })
		return i < 0 || pods[i].UID != uid || goes && pods[i].DeletionTimestamp != nil
	}
	for name, uid := range staying {
		if left(name, uid, true) {
			return true
		}
	}
	for name, uid := range going {
		if left(name, uid, false) {
			return true
		}
	}
	return false
}

// lookPods are the look's member Pods going (or not), by name and UID, but the one named.
func lookPods(o *observation, except string, going bool) map[string]types.UID {
	out := map[string]types.UID{}
	for name, p := range o.pods {
		if name != except && (p.DeletionTimestamp != nil) == going {
			out[name] = p.UID
		}
	}
	return out
}

// observeOnce is one look; with watch, it gives up its view of etcd once a member Pod it
// asks starts to go (viewWhileServing).
func (r *Reconciler) observeOnce(ctx context.Context, c *v1alpha1.EtcdCluster, watch bool) (*observation, error) {
	objs, err := observe.List(ctx, r, c)
	if err != nil {
		return nil, err
	}
	var members []string // with a Pod or a claim (observation.members)
	for _, p := range objs.Pods {
		members = append(members, p.Name)
	}
	for _, pvc := range objs.PVCs {
		if !slices.Contains(members, pvc.Name) {
			members = append(members, pvc.Name)
		}
	}
	inUse, err := r.certs().InUse(ctx, c, objs.Pods)
	if err != nil {
		return nil, err
	}
	tls, err := r.certs().Ensure(ctx, inUse, members, r.now())
	if err != nil {
		return nil, err
	}
	if tls.Status != nil {
		tls.Status.InUse = inUse.Spec.TLS
	}
	o := &observation{
		Observed:   objs.Observed(c),
		pods:       map[string]*corev1.Pod{},
		pvcs:       map[string]*corev1.PersistentVolumeClaim{},
		checks:     objs.Checks,
		snapshotTo: objs.SnapshotDestination(c.Status.ClusterID, c.Status.PreviousClusterID),
		tls:        tls,
		inUse:      inUse,
		members:    members,
	}
	o.Renewals, o.Trust, o.CA = tls.Renewals, tls.Trust, tls.Rotation
	for i := range objs.Pods {
		o.pods[objs.Pods[i].Name] = &objs.Pods[i]
	}
	for i := range objs.PVCs {
		o.pvcs[objs.PVCs[i].Name] = &objs.PVCs[i]
	}
	own := observe.Endpoints(objs.Pods)
	endpoints, dialTLS := maps.Clone(own), tls
	if adoption.Running(c) {
		maps.Copy(endpoints, adoption.Endpoints(c))
		if dialTLS.Operator, dialTLS.Version, err = adoption.TLS(ctx, r.APIReader, c, tls.Operator); err != nil {
			o.Join = joinFailed(o.Join, err)
			return o, nil
		}
		dialTLS.Version += tls.Version
	}
	if len(endpoints) == 0 {
		return o, nil
	}
	cli, err := r.clients.get(client.ObjectKeyFromObject(c), c.Status.ClusterID, endpoints, dialTLS, r.Dial)
	if err != nil {
		return o, nil
	}
	o.etcd = cli
	cli.SetStopping(observe.Stopping(objs.Pods))
	var view *planner.EtcdView
	if watch {
		asked := map[string]types.UID{}
		for name := range own {
			asked[name] = o.pods[name].UID
		}
		view, err = r.viewWhileServing(ctx, c, cli, asked)
	} else {
		view, err = cli.View(ctx)
	}
	if errors.Is(err, errEndpointGoing) {
		return nil, err
	}
	if err != nil || len(view.Members) == 0 {
		if adoption.Running(c) && c.Status.Join == nil {
			o.Join = joinFailed(o.Join, err)
		}
		return o, nil // nobody answered, or another cluster did
	}
	if c.Status.ClusterID == "" {
		// The cluster's first answer sets the ID later answers must carry.
		if !firstAnswer(c, restoreSeeds(objs), view) {
			return o, nil
		}
		cli.SetCluster(view.ClusterID, endpoints)
	}
	if view, err = r.observeSource(ctx, c, o, view, own, dialTLS.Operator); err != nil {
		o.Join = joinFailed(o.Join, err)
		return o, nil
	}
	if view.Linearizable {
		view.Auth = authState(ctx, c, cli, view)
	} else {
		// Reads through a quorum failed: dial afresh next time, so a connection stuck on
		// members that cannot serve them (a learner) is not kept.
		log.FromContext(ctx).Info("etcd member list read without a quorum; reconnecting")
		r.clients.forget(client.ObjectKeyFromObject(c))
		o.etcd = nil // closed; nothing that needs etcd runs on a view without a quorum
	}
	o.Etcd = view
	return o, nil
}

// firstAnswer reports whether a view may be the cluster's first answer. It must come from a
// member of this cluster (a Pod IP may belong to another cluster's member), and never from
// the cluster a recovery started anew from (status.previousClusterID), whoever answers for
// it. While a recovery from a backup is under way, only its seeds may answer: the members
// of the restored cluster, one of them answering under its own name.
func firstAnswer(c *v1alpha1.EtcdCluster, seeds []string, view *planner.EtcdView) bool {
	if c.Status.PreviousClusterID != "" && view.ClusterID == c.Status.PreviousClusterID {
		return false
	}
	if adoption.Running(c) {
		return c.Status.Join == nil // the source, at the endpoints the spec names
	}
	if len(seeds) > 0 {
		seed := func(m planner.EtcdMember) bool {
			return slices.Contains(seeds, vocab.ManagedName(c.Name, c.Namespace, m.PeerURLs))
		}
		return !slices.ContainsFunc(view.Members, func(m planner.EtcdMember) bool { return !seed(m) }) &&
			slices.ContainsFunc(view.Members, func(m planner.EtcdMember) bool {
				return m.Answering && seed(m) && m.Name == vocab.ManagedName(c.Name, c.Namespace, m.PeerURLs)
			})
	}
	return slices.ContainsFunc(view.Members, func(m planner.EtcdMember) bool { return vocab.ManagedName(c.Name, c.Namespace, m.PeerURLs) != "" })
}

// restoreSeeds are the members marked as the new seed of a recovery from a backup: on their
// claim, or (in memory) on a Pod that has not ended.
func restoreSeeds(objs observe.Objects) []string {
	var out []string
	for i := range objs.PVCs {
		if objs.PVCs[i].Annotations[vocab.AnnotationRestoreSeed] != "" {
			out = append(out, objs.PVCs[i].Labels[v1alpha1.LabelMember])
		}
	}
	for i := range objs.Pods {
		if p := &objs.Pods[i]; p.Annotations[vocab.AnnotationRestoreSeed] != "" && !observe.PodEnded(p) {
			out = append(out, p.Labels[v1alpha1.LabelMember])
		}
	}
	return out
}
