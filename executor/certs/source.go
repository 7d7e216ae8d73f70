package certs

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/pki"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/executor/status"
	"github.com/etcdplan/etcdplan/planner"
)

// A change of spec.tls's source on a running cluster is planned as a rotation of its CA
// (planner/rotation.go), the new source's CA for the new one. From its first step on,
// members trust the trust Secret (<cluster>-trust) on both sides, and it holds:
//   - Asked: nothing yet of the change (from Provided there is no trust Secret yet);
//     status.tls.inUse records the old source, and members serve and trust as it says;
//   - Trusting: the old and the new source's CAs; members still serve the old source's
//     Secrets, and the Auto client Secrets trust both;
//   - Issuing: the same; members made now serve the new source's Secrets, and the operator
//     dials with the new source's certificate;
//   - Retiring: the new source's CAs alone.
// The stage is kept in the trust Secret's annotation (vocab.AnnotationSourceChange), so it
// survives the operator. Planned so far: Auto or CertManager to Provided, and Provided to
// Auto (whose CA and certificates are issued at the first step, before any member needs
// them).

// InUse is the cluster with the TLS its members serve by (resources.InUse) and, while
// spec.tls changes source, that change in status.tls.caRotation (resources.SourceChanging):
// with the old source's Secrets until pass 2, the new source's from then on.
func (k Keeper) InUse(ctx context.Context, c *v1alpha1.EtcdCluster, pods []corev1.Pod) (*v1alpha1.EtcdCluster, error) {
	inUse := resources.InUse(c, pods)
	if inUse != c || !c.Spec.TLS.ClientTLS() && !c.Spec.TLS.PeerTLS() {
		return unmarked(inUse), nil // a side switched off, or plain text: no source to change
	}
	stage, words, err := k.sourceStage(ctx, c)
	if err != nil {
		return nil, err
	}
	var was *v1alpha1.TLSSpec
	if c.Status.TLS != nil {
		was = c.Status.TLS.InUse
	}
	if stage == "" {
		if words, err = ChangeOf(was, c.Spec.TLS); err != nil || words == "" {
			return unmarked(c), err
		}
		stage = planner.CAAsked
	}
	if to := target(c.Spec.TLS); to == "" || !strings.HasSuffix(words, " to "+string(to)) {
		return nil, status.Stuck(string(v1alpha1.ReasonTLSSourceChange), "a change of source (%s) runs, in pass %d, and spec.tls no longer "+
			"asks for it: set spec.tls back to the source it moves to until it is done", words, stage.Pass())
	}
	out := c.DeepCopy()
	if stage == planner.CAAsked || stage == planner.CATrusting {
		if !was.ClientTLS() && !was.PeerTLS() {
			return nil, status.Stuck(string(v1alpha1.ReasonTLSSecretNotFound), "spec.tls changes source (%s) and the source the members "+
				"serve by is not recorded (status.tls.inUse): set spec.tls back as it was until the operator records it", words)
		}
		out.Spec.TLS = was.DeepCopy()
	}
	if out.Status.TLS == nil {
		out.Status.TLS = &v1alpha1.TLSStatus{}
	}
	out.Status.TLS.CARotation = &v1alpha1.CARotationStatus{Source: words, Stage: string(stage), Pass: int32(stage.Pass())}
	return out, nil
}

// unmarked is the cluster without the mark of a change of source that the last look's
// status may carry: none runs.
func unmarked(c *v1alpha1.EtcdCluster) *v1alpha1.EtcdCluster {
	if resources.SourceChange(c) == nil {
		return c
	}
	out := c.DeepCopy()
	out.Status.TLS.CARotation = nil
	return out
}

// sourceStage reads where a change of source stands from the trust Secret; "" when none
// runs (or the cluster has no trust Secret).
func (k Keeper) sourceStage(ctx context.Context, c *v1alpha1.EtcdCluster) (planner.CAStage, string, error) {
	s := &corev1.Secret{}
	err := k.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: vocab.TrustSecret(c.Name)}, s)
	if apierrors.IsNotFound(err) {
		return "", "", nil
	}
	if err != nil {
		return "", "", err
	}
	stage, words, _ := strings.Cut(s.Annotations[vocab.AnnotationSourceChange], " ")
	return planner.CAStage(stage), words, nil
}

// ChangeOf says in words how spec.tls changes source from was (the TLS the members serve
// by) to now; "" when it does not. A change not planned yet is a status.Stuck error.
func ChangeOf(was, now *v1alpha1.TLSSpec) (string, error) {
	words := changeOf(was, now)
	if words == "" {
		return "", nil
	}
	return words, supported(was, now)
}

// changeOf says in words how the source of each side that talks TLS before and after
// changed; "" when none did. A side switched on or off is a switch, not a change of source.
func changeOf(was, now *v1alpha1.TLSSpec) string {
	client := was.ClientTLS() && now.ClientTLS() && was.ClientMode() != now.ClientMode()
	peer := was.PeerTLS() && now.PeerTLS() && was.PeerMode() != now.PeerMode()
	side := func(name string, from, to v1alpha1.TLSMode) string { return fmt.Sprintf("%s%s to %s", name, from, to) }
	switch {
	case client && peer && was.ClientMode() == was.PeerMode() && now.ClientMode() == now.PeerMode():
		return side("", was.ClientMode(), now.ClientMode())
	case client && peer:
		return side("client ", was.ClientMode(), now.ClientMode()) + ", " + side("peer ", was.PeerMode(), now.PeerMode())
	case client:
		return side("client ", was.ClientMode(), now.ClientMode())
	case peer:
		return side("peer ", was.PeerMode(), now.PeerMode())
	}
	return ""
}

// supported: every side goes from the cluster's own CA (Auto or CertManager) to Provided,
// or from Provided to Auto, or has no TLS before and after. The trust Secret ends holding
// the new source's CAs alone, so no side may keep the old source.
func supported(was, now *v1alpha1.TLSSpec) error {
	ok := target(now) != ""
	for _, side := range [][2]v1alpha1.TLSMode{{was.ClientMode(), now.ClientMode()}, {was.PeerMode(), now.PeerMode()}} {
		ok = ok && (side[0].OwnCA() && side[1] == v1alpha1.TLSProvided || side == [2]v1alpha1.TLSMode{v1alpha1.TLSProvided, v1alpha1.TLSAuto} ||
			side == [2]v1alpha1.TLSMode{v1alpha1.TLSDisabled, v1alpha1.TLSDisabled})
	}
	if !ok {
		return status.Stuck(string(v1alpha1.ReasonTLSSourceChange), "spec.tls changes source (%s) on a running cluster: only a change "+
			"of every TLS side from Auto or CertManager to Provided, or from Provided to Auto, is planned yet; set spec.tls back as it was",
			changeOf(was, now))
	}
	return nil
}

// target is the one source of every side that talks TLS, as a change of source moves the
// cluster to it; "" when the sides differ or none talks TLS. A change that runs goes on
// only towards its target (the trust Secret would be left without a CA to trust).
func target(t *v1alpha1.TLSSpec) v1alpha1.TLSMode {
	switch {
	case t.ClientTLS() && t.PeerTLS() && t.ClientMode() != t.PeerMode():
		return ""
	case t.ClientTLS():
		return t.ClientMode()
	case t.PeerTLS():
		return t.PeerMode()
	}
	return ""
}

// sourceRotation is the change of source a cluster from InUse shows, for the planner.
func sourceRotation(c *v1alpha1.EtcdCluster) *planner.CARotation {
	r := c.Status.TLS.CARotation
	return &planner.CARotation{Stage: planner.CAStage(r.Stage), Secret: vocab.TrustSecret(c.Name), Source: r.Source}
}

// ChangeSource moves a change of source on from the stage the step's reason moves it
// from: each stage is one update of the trust Secret, and a step applied again finds its
// stage done and does nothing more. c is the cluster as its spec says (the new source);
// members are those with a Pod or a claim, whose peer certificates Auto issues at once.
func (k Keeper) ChangeSource(ctx context.Context, c *v1alpha1.EtcdCluster, words string, why plan.Why, members []string, now time.Time) error {
	if why == plan.WhyCANew && target(c.Spec.TLS) == v1alpha1.TLSAuto {
		if err := k.issueAhead(ctx, c, members, now); err != nil {
			return err
		}
	}
	trust := &corev1.Secret{}
	if err := k.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: vocab.TrustSecret(c.Name)}, trust); err != nil {
		return err
	}
	stage, _, _ := strings.Cut(trust.Annotations[vocab.AnnotationSourceChange], " ")
	next := map[plan.Why][2]string{ // the stage it moves from, and to
		plan.WhyCANew: {"", string(planner.CATrusting)}, plan.WhyCAIssues: {string(planner.CATrusting), string(planner.CAIssuing)},
		plan.WhyCARetired: {string(planner.CAIssuing), string(planner.CARetiring)}, plan.WhyCADropped: {string(planner.CARetiring), ""},
	}[why]
	if next == [2]string{} {
		return fmt.Errorf("RotateCA: unknown reason %q", why)
	}
	if stage != next[0] {
		return nil // done
	}
	newer, err := k.newBundle(ctx, c)
	if err != nil {
		return err
	}
	switch why {
	case plan.WhyCANew:
		older, err := k.oldBundle(ctx, c, trust)
		if err != nil {
			return err
		}
		trust.Data[vocab.CACertKey] = union(older, newer)
		if err := k.trustAlso(ctx, c, trust.Data[vocab.CACertKey]); err != nil {
			return err
		}
	case plan.WhyCARetired:
		trust.Data[vocab.CACertKey] = newer
	}
	if trust.Annotations == nil {
		trust.Annotations = map[string]string{}
	}
	trust.Annotations[vocab.AnnotationSourceChange] = next[1] + " " + words
	if next[1] == "" {
		delete(trust.Annotations, vocab.AnnotationSourceChange)
	}
	return k.Client.Update(ctx, trust)
}

// issueAhead issues what Auto needs (its CA, the trust Secret, the certificates of
// clients and of each member's peers) while members still serve the user's Secrets.
func (k Keeper) issueAhead(ctx context.Context, c *v1alpha1.EtcdCluster, members []string, now time.Time) error {
	c = unmarked(c)
	if _, err := k.Ensure(ctx, c, members, now); err != nil {
		return err
	}
	for _, m := range members {
		if err := k.EnsurePeer(ctx, c, m, now); err != nil {
			return err
		}
	}
	return nil
}

// newBundle is the trust of the source the change moves to: the ca.crt of the Secrets
// spec.tls names (Provided), or the cluster's CA (Auto).
func (k Keeper) newBundle(ctx context.Context, c *v1alpha1.EtcdCluster) ([]byte, error) {
	if target(c.Spec.TLS) != v1alpha1.TLSAuto {
		return k.providedBundle(ctx, c)
	}
	ca, err := k.read(ctx, c, vocab.CASecret(c.Name))
	if err != nil {
		return nil, err
	}
	return pki.Bundle(ca.Data[vocab.TLSCertKey]), nil
}

// oldBundle is the trust of the source the change moves from, at its first step: the
// trust Secret's (the cluster's own CA), or, from Provided, the ca.crt of the user's
// Secrets the members serve by (status.tls.inUse).
func (k Keeper) oldBundle(ctx context.Context, c *v1alpha1.EtcdCluster, trust *corev1.Secret) ([]byte, error) {
	if target(c.Spec.TLS) != v1alpha1.TLSAuto {
		return trust.Data[vocab.CACertKey], nil
	}
	was := c.DeepCopy()
	was.Spec.TLS = c.Status.TLS.InUse
	return k.providedBundle(ctx, was)
}

// providedBundle is the new source's trust: the ca.crt of the Secrets spec.tls names.
func (k Keeper) providedBundle(ctx context.Context, c *v1alpha1.EtcdCluster) ([]byte, error) {
	var cas [][]byte
	for _, name := range k.provided(c) {
		s, err := k.read(ctx, c, name)
		if err != nil {
			return nil, err
		}
		if _, err := pki.Certificates(s.Data[vocab.CACertKey]); err != nil {
			return nil, status.Stuck(string(v1alpha1.ReasonTLSSecretInvalid), "Secret %s: %s: %v", name, vocab.CACertKey, err)
		}
		cas = append(cas, s.Data[vocab.CACertKey])
	}
	return pki.Bundle(cas...), nil
}

// trustAlso adds both sources' CAs to the ca.crt of the client Secrets the operator
// issued (clientSecrets, the users' among them), so applications that read theirs again
// trust members serving either source's certificates through passes 1 and 2.
func (k Keeper) trustAlso(ctx context.Context, c *v1alpha1.EtcdCluster, bundle []byte) error {
	for _, name := range clientSecrets(c) {
		s := &corev1.Secret{}
		err := k.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, s)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return err
		}
		s.Data[vocab.CACertKey] = union(s.Data[vocab.CACertKey], bundle)
		if err := k.Client.Update(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// union joins trust bundles into one that holds each certificate once.
func union(bundles ...[]byte) []byte {
	var pems [][]byte
	for _, b := range bundles {
		certs, _ := pki.Certificates(b) // a bundle that does not parse adds nothing
		for _, c := range certs {
			pems = append(pems, pemOf(c))
		}
	}
	return pki.Bundle(pems...)
}
