package bench

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/pki"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/test/framework"
)

// tlsChanges measures, runs times each, TLS switched on for a running plain cluster, a
// rotation of a TLS cluster's CA and the renewal of its certificates: the operator's plan,
// and the naive way on the floor's cluster (every member restarted at once with the new
// configuration in place). Each scenario's clusters have names of their own (tlsName says
// why) and are deleted after it.
func (b *bench) tlsChanges(runs int) []benchResult {
	var results []benchResult
	for i := 1; i <= runs; i++ {
		for _, scenario := range []func(string) benchResult{b.switchOn, b.rotateCA, b.renew} {
			name := fmt.Sprintf("tc%d", len(results))
			r := scenario(name)
			r.Run, r.Of = i, runs
			results = append(results, r)
			b.deleteCluster(name)
			b.deleteTLS(name)
		}
	}
	return results
}

// switchOn measures spec.tls set to Auto on a running plain cluster of three: the
// operator's plan (approved the moment it waits for approval) against the peer URLs moved
// to https in one go and every member restarted at once serving TLS alone, its Secrets
// issued before. The writer follows the cluster (probe.follow): it speaks TLS once every
// member serves it.
func (b *bench) switchOn(name string) benchResult {
	t, version := b.t, "3.6.16"
	c := framework.NewCluster(b.opNS, name, 3)
	require.NoError(t, framework.Env.Client.Create(context.Background(), c))
	fl := newFloor(t, b.floorNS, c)
	fl.bootstrap(3, version)
	framework.WaitReady(t, b.opNS, name)
	servesTLS := func(ns string) bool {
		for _, p := range framework.MemberPods(t, ns, name) {
			if resources.Served(&p) != (plan.Listen{Client: plan.ListenTLS, Peer: plan.ListenTLS}) {
				return false
			}
		}
		return true
	}
	r := b.run("TLS switched on", name, 3, version, func() {
		markTLS(b.opNS, name)
		framework.Update(t, b.opNS, name, func(c *v1alpha1.EtcdCluster) { c.Spec.TLS = &v1alpha1.TLSSpec{Mode: v1alpha1.TLSAuto} })
		b.approve(name)
	}, nil, servesTLS)
	fl.c = floorOwner(t, withTLS(fl.c))
	fl.issue()
	b.naive(&r, "peer URLs moved to https in one go, then every member restarted at once serving TLS alone", name, version, func() {
		leader := fl.leader()
		for m, id := range fl.members {
			fl.through(leader, func(ctx context.Context, cli *clientv3.Client) error {
				_, err := cli.MemberUpdate(ctx, id, []string{resources.PeerURL(fl.c, m)})
				return err
			})
		}
		fl.restartAll(version)
	}, servesTLS)
	return r
}

// approve approves the operator's plan for a cluster once it waits for approval, as its
// user would the moment every client speaks TLS.
func (b *bench) approve(name string) {
	c := framework.WaitFor(b.t, b.opNS, name, 5*time.Minute, "the plan awaiting approval", func(c *v1alpha1.EtcdCluster) bool {
		return c.Status.Plan != nil && c.Status.Plan.Phase == v1alpha1.PlanAwaitingApproval
	})
	b.t.Logf("bench: %s: plan %s awaits approval at step %d", name, c.Status.Plan.ID, c.Status.Plan.Current+1)
	// A patch of the annotation, as kubectl etcd approve makes: an update of the whole
	// object raised the cluster's generation, and the sampler then saw no step after it.
	framework.PatchSpec(b.t, c, func() { c.Annotations = map[string]string{v1alpha1.AnnotationApprove: c.Status.Plan.ID} })
}

// rotateCA measures a rotation of the CA of a TLS cluster of three: the operator's three
// passes, asked by the annotation kubectl etcd rotate-ca sets, against every certificate
// issued again from a new CA that members trust alone, and every member restarted at once.
// The writer reads its client Secret again every half second (probe.follow).
func (b *bench) rotateCA(name string) benchResult {
	t, version := b.t, "3.6.16"
	c := withTLS(framework.NewCluster(b.opNS, name, 3))
	markTLS(b.opNS, name)
	require.NoError(t, framework.Env.Client.Create(context.Background(), c))
	fl := newFloor(t, b.floorNS, c)
	fl.bootstrap(3, version)
	framework.WaitReady(t, b.opNS, name)
	caOf := func(ns string) (*corev1.Secret, error) {
		s := &corev1.Secret{}
		return s, framework.Env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: vocab.CASecret(name)}, s)
	}
	old := map[string][]byte{}
	for _, ns := range []string{b.opNS, b.floorNS} {
		ca, err := caOf(ns)
		require.NoError(t, err)
		old[ns] = ca.Data[vocab.TLSCertKey]
	}
	rotated := func(ns string) bool { // a new CA issues, and no rotation is under way
		ca, err := caOf(ns)
		return err == nil && !bytes.Equal(ca.Data[vocab.TLSCertKey], old[ns]) && len(ca.Data[vocab.NextCertKey]) == 0 && len(ca.Data[vocab.PreviousCertKey]) == 0
	}
	r := b.run("CA rotated", name, 3, version, func() {
		c := framework.Get(t, b.opNS, name) // annotated as kubectl etcd rotate-ca does: a patch
		framework.PatchSpec(t, c, func() { c.Annotations = map[string]string{v1alpha1.AnnotationRotateCA: "bench"} })
	}, nil, rotated)
	b.naive(&r, "every certificate issued again from a new CA trusted alone, then every member restarted at once", name, version, func() {
		require.NoError(t, framework.Env.Client.DeleteAllOf(context.Background(), &corev1.Secret{}, client.InNamespace(b.floorNS),
			client.MatchingLabels{v1alpha1.LabelCluster: name}))
		fl.issue()
		fl.restartAll(version)
	}, rotated)
	return r
}

// renew measures the renewal of the certificates of a TLS cluster of three, valid 3
// minutes (the least spec.tls.certificateValidity allows: each is due 2 minutes after it
// was issued): the operator's RenewCertificate steps, which restart no member, from the
// moment the first is due, against the same certificates issued again and every member
// restarted at once, as by a tool that does not know etcd reads its certificate at every
// handshake.
func (b *bench) renew(name string) benchResult {
	t, version := b.t, "3.6.16"
	c := withTLS(framework.NewCluster(b.opNS, name, 3))
	c.Spec.TLS.CertificateValidity = &metav1.Duration{Duration: 3 * time.Minute}
	markTLS(b.opNS, name)
	require.NoError(t, framework.Env.Client.Create(context.Background(), c))
	framework.WaitReady(t, b.opNS, name)
	leaves := func(ns string) map[string]*corev1.Secret {
		var list corev1.SecretList
		require.NoError(t, framework.Env.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v1alpha1.LabelCluster: name}))
		out := map[string]*corev1.Secret{}
		for _, s := range list.Items {
			if s.Name != vocab.CASecret(name) && s.Name != vocab.TrustSecret(name) {
				out[s.Name] = &s
			}
		}
		return out
	}
	old := map[string]map[string]*corev1.Secret{b.opNS: leaves(b.opNS)}
	renewed := func(ns string) bool { // every certificate issued again, and served
		for n, s := range leaves(ns) {
			if s.Annotations[vocab.AnnotationUnserved] != "" || old[ns][n] != nil && bytes.Equal(s.Data[vocab.TLSCertKey], old[ns][n].Data[vocab.TLSCertKey]) {
				return false
			}
		}
		return true
	}
	due := time.Time{}
	for _, s := range old[b.opNS] {
		f, err := pki.Read(s.Data[vocab.TLSCertKey])
		require.NoError(t, err)
		if due.IsZero() || f.RenewAt().Before(due) {
			due = f.RenewAt()
		}
	}
	time.Sleep(time.Until(due.Add(-6 * time.Second))) // run writes 6 s before the change
	r := b.run("certificates renewed", name, 3, version, func() {}, nil, renewed)
	// The floor's cluster is made only now: its certificates, issued again whether due or
	// not, must not run out meanwhile.
	fl := newFloor(t, b.floorNS, c)
	fl.bootstrap(3, version)
	old[b.floorNS] = leaves(b.floorNS)
	b.naive(&r, "the same certificates issued again, then every member restarted at once", name, version, func() {
		for n, s := range leaves(b.floorNS) {
			require.NoError(t, client.IgnoreNotFound(framework.Env.Client.Delete(context.Background(), s)), n)
		}
		fl.issue()
		fl.restartAll(version)
	}, renewed)
	return r
}

// issue issues what is missing of the floor's TLS Secrets, each member's peer certificate
// among them, through the operator's own code.
func (f *floor) issue() {
	ctx, cancel := f.ctx()
	defer cancel()
	_, err := keeper().Ensure(ctx, f.c, nil, time.Now())
	require.NoError(f.t, err)
	for m := range f.members {
		require.NoError(f.t, keeper().EnsurePeer(ctx, f.c, m, time.Now()))
	}
}

// restartAll deletes every member's Pod at once and, once all are gone, starts each again
// on its volume as the cluster's spec now says: a change of configuration the naive way.
func (f *floor) restartAll(version string) {
	for m := range f.members {
		f.deletePod(m, false)
	}
	for m := range f.members {
		f.deletePod(m, true)
	}
	for m := range f.members {
		f.start(m, version, false, true)
	}
}
