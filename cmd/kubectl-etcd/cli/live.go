package cli

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/adoption"
	"github.com/etcdplan/etcdplan/executor/certs"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/planner"
)

// liveSource reads observed states through the Kubernetes API alone: the member Pods and
// volume claims, and etcd's view as the operator last recorded it in status. No access to
// etcd itself is needed, so anyone who may read the EtcdCluster may plan against it.
type liveSource struct{ kube *kube }

func (s liveSource) Observed(ctx context.Context, c *v1alpha1.EtcdCluster) (planner.Observed, int64, error) {
	live, err := s.cluster(ctx, c)
	if err != nil {
		return planner.Observed{}, 0, err
	}
	objs, err := observe.List(ctx, s.kube, live)
	if err != nil {
		return planner.Observed{}, 0, fmt.Errorf("EtcdCluster %s/%s: %w", live.Namespace, live.Name, err)
	}
	o := objs.Observed(live)
	o.Etcd = observe.FromStatus(live)
	if adoption.Spec(c) != nil && live.Status.Join == nil {
		s.source(ctx, live, c, &o)
	}
	if o.CA == nil && asksRotation(live, c) {
		o.CA = observe.RotationAsked(live)
	}
	if words := changesSource(live, c); o.CA == nil && words != "" {
		o.CA = &planner.CARotation{Stage: planner.CAAsked, Secret: vocab.TrustSecret(c.Name), Source: words}
	}
	return o, nextGeneration(live, c), nil
}

// source reads the running cluster the manifest adopts (spec.bootstrap.join), with the
// credentials it names, as the operator's first look at it does: the plan is then the whole
// adoption. What keeps it from being read is a problem of the preflight.
func (s liveSource) source(ctx context.Context, live, c *v1alpha1.EtcdCluster, o *planner.Observed) {
	target := live.DeepCopy()
	target.Spec = c.Spec
	view, err := s.readSource(ctx, target)
	if err != nil {
		o.Join = &planner.Join{Problems: []string{err.Error()}}
		return
	}
	o.Etcd, o.Join = view, observe.Join(target)
	o.Join.Problems = adoption.Problems(target)
}

func (s liveSource) readSource(ctx context.Context, c *v1alpha1.EtcdCluster) (*planner.EtcdView, error) {
	cfg, _, err := adoption.TLS(ctx, s.kube, c, nil)
	if err != nil {
		return nil, err
	}
	cli, err := etcd.Dial(adoption.Endpoints(c), cfg)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cli.Close() }()
	view, err := cli.View(ctx)
	if err != nil {
		return nil, fmt.Errorf("no member of the source answers at spec.bootstrap.join.endpoints: %w", err)
	}
	return adoption.FirstLook(ctx, cli, c, nil, view, cfg)
}

// asksRotation: the manifest asks for a rotation of the cluster's CA that the live cluster
// does not ask for yet (the operator records the rotation it runs in status).
func asksRotation(live, c *v1alpha1.EtcdCluster) bool {
	want := c.Annotations[v1alpha1.AnnotationRotateCA]
	return want != "" && want != live.Annotations[v1alpha1.AnnotationRotateCA] && live.Status.ClusterID != "" &&
		(c.Spec.TLS.ClientMode() == v1alpha1.TLSAuto || c.Spec.TLS.PeerMode() == v1alpha1.TLSAuto)
}

// changesSource says in words how the manifest changes the source of the live cluster's TLS,
// when the operator plans that change; "" otherwise (the operator stalls on a change it does
// not plan, and admission refuses most).
func changesSource(live, c *v1alpha1.EtcdCluster) string {
	if live.Status.ClusterID == "" || live.Status.TLS == nil {
		return ""
	}
	words, err := certs.ChangeOf(live.Status.TLS.InUse, c.Spec.TLS)
	if err != nil {
		return ""
	}
	return words
}

// cluster reads the live EtcdCluster the manifest c describes; one that does not exist yet
// is an empty one, whose volumes (retained from a deleted cluster of that name) still count.
func (s liveSource) cluster(ctx context.Context, c *v1alpha1.EtcdCluster) (*v1alpha1.EtcdCluster, error) {
	key := client.ObjectKey{Namespace: c.Namespace, Name: c.Name}
	if key.Namespace == "" {
		key.Namespace = s.kube.namespace
	}
	live := &v1alpha1.EtcdCluster{}
	err := s.kube.Get(ctx, key, live)
	switch {
	case apierrors.IsNotFound(err):
		return &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}, nil
	case err != nil:
		return nil, fmt.Errorf("reading EtcdCluster %s: %w", key, err)
	}
	return live, nil
}

// nextGeneration is the generation the API server gives the manifest's spec: the live
// one when the spec is unchanged, the next one otherwise. A live plan then has the ID the
// operator records once the manifest is applied, as long as nothing else changes first.
func nextGeneration(live, c *v1alpha1.EtcdCluster) int64 {
	if live.Generation > 0 && equality.Semantic.DeepEqual(live.Spec, c.Spec) {
		return live.Generation
	}
	return live.Generation + 1
}
