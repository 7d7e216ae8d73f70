package controller

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/planner"
)

// The executor's side of an adoption (spec.bootstrap.join): the operator reaches the
// source's members at their client URLs beside its own members, records them when it first
// reads them, finds out when one left, and checks what only a dial can show.

// joinSpec is spec.bootstrap.join; nil when none.
func joinSpec(c *v1alpha1.EtcdCluster) *v1alpha1.JoinSpec {
	if c.Spec.Bootstrap == nil {
		return nil
	}
	return c.Spec.Bootstrap.Join
}

// adopting: an adoption is asked for or under way, and has not ended: the source's
// members are reached beside the cluster's own.
func adopting(c *v1alpha1.EtcdCluster) bool {
	j := c.Status.Join
	if j == nil {
		return joinSpec(c) != nil && c.Status.ClusterID == ""
	}
	return j.Phase == v1alpha1.JoinAdopting
}

// sourceEndpoints are the source members' client URLs by name: for each member status
// recorded, the URL among spec's endpoints it advertises, else its first; before any is
// recorded, spec's endpoints as join-<i>.
func sourceEndpoints(c *v1alpha1.EtcdCluster) map[string]string {
	out := map[string]string{}
	var given []string
	if j := joinSpec(c); j != nil {
		given = j.Endpoints
	}
	if c.Status.Join == nil || len(c.Status.Join.Source) == 0 {
		for i, u := range given {
			out[fmt.Sprintf("join-%d", i)] = u
		}
		return out
	}
	for _, m := range c.Status.Join.Source {
		if len(m.ClientURLs) == 0 {
			continue
		}
		out[m.Name] = m.ClientURLs[0]
		if i := slices.IndexFunc(m.ClientURLs, func(u string) bool { return slices.Contains(given, u) }); i >= 0 {
			out[m.Name] = m.ClientURLs[i]
		}
	}
	return out
}

// joinTLS is the configuration to dial the cluster's members and the source's with: the
// operator's own, with the source's CA added to the roots and its client certificate to
// the ones offered (Go offers the one whose issuer the member asks for). version changes
// with the Secret.
func (r *Reconciler) joinTLS(ctx context.Context, c *v1alpha1.EtcdCluster, own *tls.Config) (cfg *tls.Config, version string, err error) {
	j := joinSpec(c)
	if j == nil || j.TLSSecretName == "" {
		return own, "", nil
	}
	sec := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: j.TLSSecretName}, sec); err != nil {
		return nil, "", fmt.Errorf("spec.bootstrap.join.tlsSecretName %s: %w", j.TLSSecretName, err)
	}
	cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	if own != nil {
		cfg = own.Clone()
	}
	roots := x509.NewCertPool()
	if cfg.RootCAs != nil {
		roots = cfg.RootCAs.Clone()
	}
	if !roots.AppendCertsFromPEM(sec.Data["ca.crt"]) {
		return nil, "", fmt.Errorf("spec.bootstrap.join.tlsSecretName %s: key ca.crt holds no PEM certificate", j.TLSSecretName)
	}
	cfg.RootCAs = roots
	if len(sec.Data["tls.crt"]) > 0 {
		cert, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"])
		if err != nil {
			return nil, "", fmt.Errorf("spec.bootstrap.join.tlsSecretName %s: tls.crt and tls.key: %w", j.TLSSecretName, err)
		}
		cfg.Certificates = append(slices.Clone(cfg.Certificates), cert)
	}
	return cfg, sec.ResourceVersion, nil
}

// recordSource records the source's members from its first answer: the view is the source
// alone, since none of the cluster's own members joined yet.
// Each member's client URLs start with the one of spec's endpoints it answered at (at, by
// member ID): the operator reaches it there, whatever names it advertises.
func recordSource(c *v1alpha1.EtcdCluster, view *planner.EtcdView, at map[string]string) {
	j := &v1alpha1.JoinStatus{Phase: v1alpha1.JoinAdopting}
	for _, m := range view.Members {
		urls := m.ClientURLs
		if u, ok := at[m.ID]; ok {
			urls = append([]string{u}, slices.DeleteFunc(slices.Clone(urls), func(x string) bool { return x == u })...)
		}
		j.Source = append(j.Source, v1alpha1.SourceMember{ID: m.ID, Name: m.Name, ClientURLs: urls, PeerURLs: m.PeerURLs})
	}
	c.Status.Join = j
}

// membersAt asks each of the endpoints which member answers there: member ID -> endpoint.
func membersAt(ctx context.Context, eps []string, cfg *tls.Config) map[string]string {
	out := map[string]string{}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, TLS: cfg, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return out
	}
	defer func() { _ = cli.Close() }()
	for _, ep := range eps {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cli.Status(sctx, ep)
		cancel()
		if err == nil {
			out[etcd.ID(st.Header.MemberId)] = ep
		}
	}
	return out
}

// trackSource records, from a member list read through a quorum, that a source member left
// (no rollback from then on), and that every one did: the adoption is done.
func (r *Reconciler) trackSource(c *v1alpha1.EtcdCluster, view *planner.EtcdView) {
	j := c.Status.Join
	if j == nil || j.Phase != v1alpha1.JoinAdopting || !view.Linearizable {
		return
	}
	var left []string
	for _, m := range j.Source {
		if !slices.ContainsFunc(view.Members, func(em planner.EtcdMember) bool { return em.ID == m.ID }) {
			left = append(left, m.Name)
		}
	}
	j.SourceLeft = j.SourceLeft || len(left) > 0
	if len(left) == len(j.Source) {
		j.Phase = v1alpha1.JoinAdopted
		r.event(c, corev1.EventTypeNormal, v1alpha1.ReasonAdopted,
			"every source member left (%s): the cluster is the operator's alone; stop the removed members' processes and wipe their data directories "+
				"(a removed member that restarts keeps dialling its old peers)", strings.Join(left, ", "))
	}
}

// joinProblems is the preflight of spec against the source, before any of the cluster's
// members joined: the source's client URLs are of the scheme the cluster's own members
// serve (one connection reaches both).
func joinProblems(c *v1alpha1.EtcdCluster) []string {
	j := joinSpec(c)
	if j == nil {
		return nil
	}
	var out []string
	for _, u := range j.Endpoints {
		if https := strings.HasPrefix(u, "https://"); https != c.Spec.TLS.ClientTLS() {
			out = append(out, fmt.Sprintf("endpoint %s and the cluster's own client TLS (tls.client.mode) differ: the operator reaches both with one connection; "+
				"set spec.tls so members serve clients as the source does, then change it after the adoption", u))
			break
		}
	}
	return out
}

// sourceLastHeld: the plan's current step removes the last source member; it waits for
// approval.
func sourceLastHeld(rec *v1alpha1.PlanStatus) bool {
	s := currentStep(rec)
	return s != nil && s.Why == plan.WhySourceLast
}

// sourceLastMessage says what the held step does and how to let it run.
func sourceLastMessage(c *v1alpha1.EtcdCluster, rec *v1alpha1.PlanStatus) string {
	var eps []string
	if j := joinSpec(c); j != nil {
		eps = j.Endpoints
	}
	return fmt.Sprintf("plan %s removes the last source member %s: clients of the source's endpoints (%s) must use the cluster's Service %s.%s.svc from then on; "+
		"once it left, stop the removed source members' processes and wipe their data directories (a removed member that restarts keeps dialling its old peers); "+
		"approve: kubectl etcd approve %s --plan %s (or set the annotation %s: %s)",
		rec.ID, currentStep(rec).Member, strings.Join(eps, ", "), vocab.ClientService(c.Name), c.Namespace, c.Name, rec.ID, v1alpha1.AnnotationApprove, rec.ID)
}

// observeSource records the source's members at its first answer, and reads the view again
// with each reached under its name (the first read knew only spec's endpoints); it notes
// when source members left, and runs the preflight's dials until the cluster's own first
// member exists.
func (r *Reconciler) observeSource(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, view *planner.EtcdView, cfg *tls.Config) (*planner.EtcdView, error) {
	if !adopting(c) {
		return view, nil
	}
	if c.Status.Join == nil {
		recordSource(c, view, membersAt(ctx, joinSpec(c).Endpoints, cfg))
		endpoints := observe.Endpoints(nil)
		maps.Copy(endpoints, sourceEndpoints(c))
		o.etcd.SetCluster(view.ClusterID, endpoints)
		var err error
		if view, err = o.etcd.View(ctx); err != nil || len(view.Members) == 0 {
			return nil, errors.Join(err, errors.New("the source did not answer again"))
		}
	}
	r.trackSource(c, view)
	o.Join = observe.Join(c)
	if !c.Status.Join.SourceLeft && len(o.members) == 0 {
		o.Join.Problems = joinProblems(c)
	}
	return view, nil
}

// joinFailed adds why the source could not be read to what the preflight found.
func joinFailed(j *planner.Join, err error) *planner.Join {
	if j == nil {
		j = &planner.Join{}
	}
	if err != nil {
		j.Problems = append(j.Problems, err.Error())
	}
	return j
}

// holdForAdoption keeps the finalizer that holds the EtcdCluster's deletion while its
// adoption can still be rolled back (no source member left), and drops it once it cannot,
// or the rollback is done. gone: the finalizer was the last thing keeping a deleted
// EtcdCluster, which goes now.
func (r *Reconciler) holdForAdoption(ctx context.Context, c *v1alpha1.EtcdCluster) (gone bool, err error) {
	want := rollbackPossible(c)
	if want == controllerutil.ContainsFinalizer(c, v1alpha1.FinalizerAdoption) {
		return false, nil
	}
	base := c.DeepCopy()
	if want {
		controllerutil.AddFinalizer(c, v1alpha1.FinalizerAdoption)
	} else {
		controllerutil.RemoveFinalizer(c, v1alpha1.FinalizerAdoption)
	}
	patch := client.MergeFromWithOptions(&v1alpha1.EtcdCluster{ObjectMeta: base.ObjectMeta}, client.MergeFromWithOptimisticLock{})
	obj := &v1alpha1.EtcdCluster{ObjectMeta: *c.ObjectMeta.DeepCopy()}
	if err := r.Patch(ctx, obj, patch); err != nil {
		return false, err
	}
	c.ResourceVersion = obj.ResourceVersion
	return c.DeletionTimestamp != nil && !want, nil
}

// rollbackPossible: an adoption is asked for or under way, no source member left, and no
// rollback finished.
func rollbackPossible(c *v1alpha1.EtcdCluster) bool {
	j := c.Status.Join
	switch {
	case j != nil && (j.Phase != v1alpha1.JoinAdopting || j.SourceLeft):
		return false
	case c.Status.Plan != nil && c.Status.Plan.Blocked != nil && c.Status.Plan.Blocked.Reason == plan.BlockAdoptionRolledBack:
		return false
	}
	return j != nil || joinSpec(c) != nil
}
