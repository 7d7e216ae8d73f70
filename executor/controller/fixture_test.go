package controller

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/etcd/etcdfake"
	"github.com/etcdplan/etcdplan/executor/internal/kubetest"
	"github.com/etcdplan/etcdplan/planner"
)

// fixture is one cluster "demo" of running members, a fake etcd behind them, a fake
// Kubernetes API and a clock the test moves.
type fixture struct {
	t      *testing.T
	r      *Reconciler
	kube   client.Client
	etcd   *etcdfake.Cluster
	events *record.FakeRecorder
	now    time.Time
	// listErr, when set, fails every List, as an API server that does not answer.
	listErr error
}

func newFixture(t *testing.T, members int, edit func(c *v1alpha1.EtcdCluster)) *fixture {
	t.Helper()
	objs, view := kubetest.Demo(members, edit)
	f := &fixture{t: t, etcd: etcdfake.New(view), events: record.NewFakeRecorder(100), now: time.Unix(1_800_000_000, 0)}
	f.kube = kubetest.Client(t, func() error { return f.listErr }, objs...)
	f.r = &Reconciler{Client: f.kube, APIReader: f.kube, Recorder: f.events, Dial: f.etcd.Dial, Now: func() time.Time { return f.now }}
	return f
}

// reconcile runs one reconcile and returns the cluster as it was written.
func (f *fixture) reconcile() (*v1alpha1.EtcdCluster, reconcile.Result) {
	f.t.Helper()
	res, err := f.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: "demo"}})
	require.NoError(f.t, err)
	return f.cluster(), res
}

func (f *fixture) cluster() *v1alpha1.EtcdCluster {
	c := &v1alpha1.EtcdCluster{}
	require.NoError(f.t, f.kube.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "demo"}, c))
	return c
}

func (f *fixture) update(edit func(c *v1alpha1.EtcdCluster)) {
	c := f.cluster()
	edit(c)
	c.Generation++
	require.NoError(f.t, f.kube.Update(context.Background(), c))
}

// approve sets the approval annotation to the plan ID, as kubectl etcd approve does.
func (f *fixture) approve(id string) {
	f.update(func(c *v1alpha1.EtcdCluster) { c.Annotations = map[string]string{v1alpha1.AnnotationApprove: id} })
}

func (f *fixture) setView(edit func(v *planner.EtcdView)) {
	v, err := f.etcd.View(context.Background())
	require.NoError(f.t, err)
	edit(v)
	f.etcd.SetView(v)
}

// learnerAdded adds to etcd's view member demo-3 (ID 4), added as a learner and not started.
func (f *fixture) learnerAdded(v *planner.EtcdView) {
	v.Members = append(v.Members, planner.EtcdMember{ID: "4", PeerURLs: []string{vocab.PeerURL(f.cluster().Name, f.cluster().Namespace, "demo-3", false)}, Learner: true})
}

func (f *fixture) warnings() []string {
	var out []string
	for _, e := range f.drain() {
		if strings.HasPrefix(e, corev1.EventTypeWarning) {
			out = append(out, e)
		}
	}
	return out
}

// drain returns the events recorded since the last drain, as "Type Reason message".
func (f *fixture) drain() []string {
	var out []string
	for {
		select {
		case e := <-f.events.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}
