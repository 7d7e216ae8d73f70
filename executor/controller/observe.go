package controller

import (
	"context"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/planner"
)

// observation is one look at a cluster: the planner's input and what the executor needs
// to act on it.
type observation struct {
	planner.Observed
	pods map[string]*corev1.Pod
	pvcs map[string]*corev1.PersistentVolumeClaim
	etcd etcd.Cluster // nil when no member has an address
	// applied is the action applied on this look, if any.
	applied plan.Action
	// defragNext is when spec.maintenance.defrag.schedule comes next (zero: no schedule).
	defragNext time.Time
}

// clients keeps one etcd connection per cluster, re-pointed as member Pods move.
type clients struct {
	mu sync.Mutex
	m  map[types.NamespacedName]etcd.Cluster
}

func (cs *clients) get(uid types.NamespacedName, clusterID string, endpoints map[string]string, dial func(map[string]string) (etcd.Cluster, error)) (etcd.Cluster, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if cli, ok := cs.m[uid]; ok {
		cli.SetCluster(clusterID, endpoints)
		return cli, nil
	}
	cli, err := dial(endpoints)
	if err != nil {
		return nil, err
	}
	cli.SetCluster(clusterID, endpoints)
	if cs.m == nil {
		cs.m = map[types.NamespacedName]etcd.Cluster{}
	}
	cs.m[uid] = cli
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
	objs, err := observe.List(ctx, r, c)
	if err != nil {
		return nil, err
	}
	o := &observation{
		Observed: objs.Observed(c),
		pods:     map[string]*corev1.Pod{},
		pvcs:     map[string]*corev1.PersistentVolumeClaim{},
	}
	for i := range objs.Pods {
		o.pods[objs.Pods[i].Name] = &objs.Pods[i]
	}
	for i := range objs.PVCs {
		o.pvcs[objs.PVCs[i].Name] = &objs.PVCs[i]
	}
	endpoints := observe.Endpoints(objs.Pods)
	if len(endpoints) == 0 {
		return o, nil
	}
	cli, err := r.clients.get(client.ObjectKeyFromObject(c), c.Status.ClusterID, endpoints, r.Dial)
	if err != nil {
		return o, nil
	}
	o.etcd = cli
	view, err := cli.View(ctx)
	if err != nil || len(view.Members) == 0 {
		return o, nil // nobody answered, or another cluster did
	}
	if c.Status.ClusterID == "" {
		// The cluster's first answer: it must come from a member of this cluster (a Pod IP
		// may belong to another cluster's member), and sets the ID later answers must carry.
		if !slices.ContainsFunc(view.Members, func(m planner.EtcdMember) bool { return planner.ManagedName(c.Name, c.Namespace, m.PeerURLs) != "" }) {
			return o, nil
		}
		cli.SetCluster(view.ClusterID, endpoints)
	}
	if !view.Linearizable {
		// Reads through a quorum failed: dial afresh next time, so a connection stuck on
		// members that cannot serve them (a learner) is not kept.
		log.FromContext(ctx).Info("etcd member list read without a quorum; reconnecting")
		r.clients.forget(client.ObjectKeyFromObject(c))
		o.etcd = nil // closed; nothing that needs etcd runs on a view without a quorum
	}
	o.Etcd = view
	return o, nil
}
