package controller

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/planner"
)

// observation is one look at a cluster: the planner's input and what the executor needs
// to act on it.
type observation struct {
	planner.Observed
	pods map[string]*corev1.Pod
	pvcs map[string]*corev1.PersistentVolumeClaim
	etcd *etcd.Client // nil when no member has an address
}

func (o *observation) close() {
	if o.etcd != nil {
		_ = o.etcd.Close()
	}
}

// memberID returns a member's etcd ID from etcd's view.
func (o *observation) memberID(name string) (uint64, bool) {
	if o.Etcd == nil {
		return 0, false
	}
	for _, m := range o.Etcd.Members {
		if m.MemberName() == name {
			id, err := etcd.ParseID(m.ID)
			return id, err == nil
		}
	}
	return 0, false
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
	// Members are reached at their Pod IPs, which work from inside and outside the
	// cluster network alike.
	endpoints := map[string]string{}
	for name, p := range o.pods {
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil && etcdRunning(p) {
			endpoints[name] = fmt.Sprintf("http://%s:%d", p.Status.PodIP, resources.ClientPort)
		}
	}
	if len(endpoints) == 0 {
		return o, nil
	}
	cli, err := r.Dial(endpoints)
	if err != nil {
		return o, nil
	}
	o.etcd = cli
	if view, err := cli.View(ctx); err == nil && len(view.Members) > 0 {
		o.Etcd = view
	}
	return o, nil
}

func etcdRunning(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "etcd" {
			return cs.State.Running != nil
		}
	}
	return false
}
