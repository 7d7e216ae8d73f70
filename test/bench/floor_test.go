package bench

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	kwait "k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/test/framework"
)

// floor drives the operations a plan is made of (Pods and claims created and deleted,
// etcd's membership calls) directly, with no operator, no planner and no status: each as
// soon as the one before took effect, found by polling every few milliseconds. It renders
// the same Pods the operator does, so what it measures is what etcd and Kubernetes allow.
type floor struct {
	t       *testing.T
	c       *v1alpha1.EtcdCluster // never created: it only renders the members
	members map[string]uint64     // name -> etcd member ID
	// ordinals is one more than the highest ordinal of a member the floor started: a new
	// member takes the next one (fresh), as the operator's do. A name used before may
	// still resolve to its old Pod's address for a while, and with peer TLS etcd refuses a
	// member whose address its certificate's name does not resolve to.
	ordinals int
}

const floorPoll = 10 * time.Millisecond

// newFloor makes the floor of a cluster in ns, with the cluster's Services. A cluster with
// TLS has its Secrets issued by the product's own keeper (executor/certs), as
// the operator issues them: they belong to an EtcdCluster of the same spec in the floor's
// namespace, which no operator watches (floorOwner).
func newFloor(t *testing.T, ns string, c *v1alpha1.EtcdCluster) *floor {
	c = c.DeepCopy()
	c.Namespace = ns
	if c.Spec.TLS != nil {
		c = floorOwner(t, c)
	}
	ctx := context.Background()
	for _, svc := range []*corev1.Service{resources.Headless(c), resources.Client(c)} {
		if err := framework.Env.Client.Create(ctx, svc); !apierrors.IsAlreadyExists(err) {
			require.NoError(t, err) // a cluster of the same name was there before
		}
	}
	return &floor{t: t, c: c, members: map[string]uint64{}}
}

func (f *floor) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 3*time.Minute)
}

func (f *floor) images() resources.Images {
	return resources.Images{EtcdRepository: "quay.io/coreos/etcd", Operator: framework.OperatorImage}
}

// start creates a member's claim and Pod: a seed alone, or a member joining those listed.
func (f *floor) start(name, version string, seed, expectData bool) {
	f.ordinals = max(f.ordinals, vocab.Ordinal(f.c.Name, name)+1)
	ms := resources.MemberSpec{Name: name, Version: version, Seed: seed, ExpectData: expectData}
	ms.InitialCluster = []string{name + "=" + resources.PeerURL(f.c, name)}
	for m := range f.members {
		if m != name {
			ms.InitialCluster = append(ms.InitialCluster, m+"="+resources.PeerURL(f.c, m))
		}
	}
	f.create(ms)
}

// create creates a member's claim, unless it exists, and its Pod rendered from ms; first
// the member's peer certificate when the cluster's CA issues it, as the operator does.
func (f *floor) create(ms resources.MemberSpec) {
	ctx, cancel := f.ctx()
	defer cancel()
	require.NoError(f.t, keeper().EnsurePeer(ctx, f.c, ms.Name, time.Now()))
	pvc := resources.MemberPVC(f.c, ms.Name)
	if err := framework.Env.Client.Create(ctx, pvc); err != nil && !apierrors.IsAlreadyExists(err) {
		require.NoError(f.t, err)
	}
	require.NoError(f.t, framework.Env.Client.Create(ctx, resources.MemberPod(f.c, f.images(), ms)))
}

// endpoint waits for a member's Pod to have an IP and returns its client URL.
func (f *floor) endpoint(name string) string {
	ctx, cancel := f.ctx()
	defer cancel()
	var ep string
	require.NoError(f.t, kwait.PollUntilContextCancel(ctx, floorPoll, true, func(ctx context.Context) (bool, error) {
		var p corev1.Pod
		if framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: f.c.Namespace, Name: name}, &p) != nil || p.Status.PodIP == "" {
			return false, nil
		}
		ep = observe.ClientURL(&p)
		return true, nil
	}), "Pod %s gets an IP", name)
	return ep
}

// client connects to a member. It reconnects as the operator's client does (every 50 ms at
// first, and gives up a connection attempt after 2 s): with gRPC's defaults (a second, then
// longer, up to two minutes; 20 s per attempt) a member that starts while the floor waits
// for it would be seen late.
// A cluster with client TLS is dialed with the operator's certificate.
func (f *floor) client(name string) *clientv3.Client {
	tlsCfg, ok := clientTLS(f.c.Namespace, f.c.Name)
	require.True(f.t, ok, "the floor's TLS Secrets of %s are there", f.c.Name)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{f.endpoint(name)}, DialTimeout: 2 * time.Second, Logger: zap.NewNop(), TLS: tlsCfg,
		DialOptions: append([]grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 2 * time.Second,
		})}, etcd.ServerName(tlsCfg)...)})
	require.NoError(f.t, err)
	return cli
}

// healthy waits until a member answers and knows a leader, and records its ID.
func (f *floor) healthy(name string) {
	cli := f.client(name)
	defer cli.Close()
	ctx, cancel := f.ctx()
	defer cancel()
	ep := cli.Endpoints()[0]
	require.NoError(f.t, kwait.PollUntilContextCancel(ctx, floorPoll, true, func(ctx context.Context) (bool, error) {
		sctx, scancel := context.WithTimeout(ctx, time.Second)
		defer scancel()
		st, err := cli.Status(sctx, ep)
		if err != nil || st.Leader == 0 {
			return false, nil
		}
		f.members[name] = st.Header.MemberId
		return true, nil
	}), "member %s answers with a leader", name)
}

// through runs an etcd call on a voter until it succeeds.
func (f *floor) through(voter string, call func(ctx context.Context, cli *clientv3.Client) error) {
	cli := f.client(voter)
	defer cli.Close()
	ctx, cancel := f.ctx()
	defer cancel()
	var last error
	err := kwait.PollUntilContextCancel(ctx, floorPoll, true, func(ctx context.Context) (bool, error) {
		cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
		defer ccancel()
		last = call(cctx, cli)
		return last == nil, nil
	})
	if err != nil {
		f.report()
	}
	require.NoError(f.t, err, "etcd call through %s: %v", voter, last)
}

// report logs what each of the floor's members says of itself, and its member list, for a
// call that never succeeded.
func (f *floor) report() {
	for _, name := range slices.Sorted(maps.Keys(f.members)) {
		var p corev1.Pod
		if err := framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: f.c.Namespace, Name: name}, &p); err != nil || p.Status.PodIP == "" {
			f.t.Logf("floor: %s: no Pod with an IP (%v)", name, err)
			continue
		}
		cli := f.client(name)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := cli.Status(ctx, cli.Endpoints()[0])
		list, lerr := cli.MemberList(ctx, clientv3.WithSerializable())
		cancel()
		_ = cli.Close()
		f.t.Logf("floor: %s: status %+v (%v); its member list %+v (%v)", name, st, err, list, lerr)
	}
}

// join adds a member as a learner, starts it and promotes it as soon as etcd allows.
func (f *floor) join(voter, name, version string) {
	var id uint64
	f.through(voter, func(ctx context.Context, cli *clientv3.Client) error {
		resp, err := cli.MemberAddAsLearner(ctx, []string{resources.PeerURL(f.c, name)})
		if err == nil {
			id = resp.Member.ID
		}
		return err
	})
	f.members[name] = id
	f.start(name, version, false, false)
	f.through(voter, func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.MemberPromote(ctx, id)
		return err
	})
	f.healthy(name)
}

// bootstrap forms a cluster of n members: a seed, then one learner at a time. A cluster
// with TLS first has its CA and the certificates of client traffic issued (each member's
// peer certificate is issued before its Pod), as the operator's first look does.
func (f *floor) bootstrap(n int, version string) {
	if f.c.Spec.TLS != nil {
		ctx, cancel := f.ctx()
		_, err := keeper().Ensure(ctx, f.c, nil, time.Now())
		cancel()
		require.NoError(f.t, err)
	}
	seed := f.name(0)
	f.start(seed, version, true, false)
	f.healthy(seed)
	for i := 1; i < n; i++ {
		f.join(seed, f.name(i), version)
	}
}

func (f *floor) name(i int) string { return fmt.Sprintf("%s-%d", f.c.Name, i) }

// fresh is the name of the next member to join: an ordinal never used by the floor before.
func (f *floor) fresh() string { return f.name(f.ordinals) }

// leave hands leadership to voter if the member leads, removes it and deletes its Pod and
// claim.
func (f *floor) leave(voter, name string) {
	f.handOff(name, voter)
	id := f.members[name]
	f.through(voter, func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.MemberRemove(ctx, id)
		return err
	})
	delete(f.members, name)
	f.deletePod(name, false) // the next change need not wait for the Pod to go
	ctx, cancel := f.ctx()
	defer cancel()
	require.NoError(f.t, client.IgnoreNotFound(framework.Env.Client.Delete(ctx, resources.MemberPVC(f.c, name))))
}

// handOff makes to the leader if from leads; etcd moves leadership only at the leader.
func (f *floor) handOff(from, to string) {
	f.through(from, func(ctx context.Context, cli *clientv3.Client) error {
		st, err := cli.Status(ctx, cli.Endpoints()[0])
		if err != nil || st.Leader != st.Header.MemberId {
			return err
		}
		_, err = cli.MoveLeader(ctx, f.members[to])
		return err
	})
}

// lead makes a member the leader, wherever leadership is.
func (f *floor) lead(name string) {
	for m := range f.members {
		if m != name {
			f.handOff(m, name)
		}
	}
}

// deletePod deletes a member's Pod, and waits until it is gone if asked.
func (f *floor) deletePod(name string, wait bool, opts ...client.DeleteOption) {
	ctx, cancel := f.ctx()
	defer cancel()
	p := &corev1.Pod{}
	p.Namespace, p.Name = f.c.Namespace, name
	require.NoError(f.t, client.IgnoreNotFound(framework.Env.Client.Delete(ctx, p, opts...)))
	if wait {
		f.gone(name)
	}
}

// gone waits until members' Pods are gone: their etcd processes ended.
func (f *floor) gone(names ...string) {
	ctx, cancel := f.ctx()
	defer cancel()
	for _, name := range names {
		key := client.ObjectKey{Namespace: f.c.Namespace, Name: name}
		require.NoError(f.t, kwait.PollUntilContextCancel(ctx, floorPoll, true, func(ctx context.Context) (bool, error) {
			return apierrors.IsNotFound(framework.Env.Client.Get(ctx, key, &corev1.Pod{})), nil
		}), "Pod %s goes", name)
	}
}

// restart replaces a member's Pod with one at version on the same volume; a leader hands
// leadership to voter first.
func (f *floor) restart(voter, name, version string) {
	f.handOff(name, voter)
	f.deletePod(name, true)
	f.start(name, version, false, true)
	f.healthy(name)
}
