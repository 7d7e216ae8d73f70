package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/etcdplan/etcdplan/api/plan"
)

// wca is the simulated cluster's own CA, as the executor keeps it in Secrets: CAs are
// letters. issuing signs new certificates; next is a new CA not issuing yet, previous the
// old one while it is still trusted or kept; trust is the trust Secret, which a Pod mounts
// as it is when it starts; leaves are the issuer of each certificate, and unserved the
// issuer members may still serve a renewed one's predecessor from.
type wca struct {
	asked bool
	// source: the rotation is a change of spec.tls's source, in words; the new source's
	// certificates are what a member's Pod mounts (wmember.serves) from pass 2 on.
	source                   string
	issuing, next, previous  string
	trust                    []string
	leaves, unserved         map[string]string
	clientTLS, peerTLS, made bool
}

// newCA is a cluster's CA "A" that issued every certificate of its members.
func newCA(w *world, d Desired) *wca {
	ca := &wca{issuing: "A", trust: []string{"A"}, leaves: map[string]string{}, unserved: map[string]string{},
		clientTLS: d.ClientTLS, peerTLS: d.PeerTLS}
	for _, l := range ca.clientLeaves() {
		ca.leaves[l] = "A"
	}
	for _, m := range w.members {
		if m.pod {
			m.trusts = "A"
			ca.leaves[m.name+"-peer-tls"] = "A"
		}
	}
	return ca
}

func (ca *wca) clientLeaves() []string {
	if !ca.clientTLS {
		return nil
	}
	return []string{"demo-server-tls", "demo-operator-tls", "demo-client-tls"}
}

// stage is the rotation's as the executor reads it from the CA and trust Secrets.
func (ca *wca) stage() CAStage {
	switch {
	case ca.next != "":
		return CATrusting
	case ca.previous != "" && slices.Contains(ca.trust, ca.previous):
		return CAIssuing
	case ca.previous != "":
		return CARetiring
	case ca.asked:
		return CAAsked
	}
	return ""
}

// observeCA adds what the executor finds of the CA: the trust bundle a new Pod mounts, the
// rotation's stage with the leaves in the order renewals list them, and the leaves to renew
// (those of a CA that no longer issues, and those renewed that members may not serve yet).
func (w *world) observeCA(o *Observed) {
	ca := w.ca
	o.Trust = strings.Join(ca.trust, "+")
	if ca.source != "" {
		o.Trust += "@" + ca.issuing
	}
	var leaves []Renewal
	for _, l := range ca.clientLeaves() {
		leaves = append(leaves, Renewal{Secret: l, Mounted: l == "demo-server-tls"})
	}
	for _, m := range w.sorted() {
		if _, ok := ca.leaves[m.name+"-peer-tls"]; ok && (m.pod || m.pvc) && ca.peerTLS { // of members with a Pod or a claim
			leaves = append(leaves, Renewal{Secret: m.name + "-peer-tls", Mounted: true})
		}
	}
	if st := ca.stage(); st != "" {
		o.CA = &CARotation{Stage: st, Secret: "demo-ca", Leaves: leaves, PeerLeaves: ca.peerTLS, Source: ca.source}
	}
	o.Renewals = nil
	if ca.source != "" {
		return // the new source's certificates are not the old CA's to issue again
	}
	for _, l := range leaves {
		switch {
		case ca.unserved[l.Secret] != "":
			l.Unserved = true
		case ca.leaves[l.Secret] != ca.issuing:
			l.Rotated = true
		default:
			continue
		}
		o.Renewals = append(o.Renewals, l)
	}
}

// mount gives a member's new Pod the trust Secret as it is, and its peer certificate from
// the CA that issues when it has none.
func (w *world) mount(m *wmember) {
	m.trusts = strings.Join(w.ca.trust, "+")
	if w.ca.source != "" {
		m.serves = w.ca.issuing // the Secrets of the source that issues now
	}
	if _, ok := w.ca.leaves[m.name+"-peer-tls"]; !ok {
		w.ca.leaves[m.name+"-peer-tls"] = w.ca.issuing
	}
}

// rotate applies a RotateCA step, checking that the CA Secret is at the stage it moves on from.
func (w *world) rotate(s plan.Step) error {
	ca := w.ca
	switch {
	case s.Why == plan.WhyCANew && ca.stage() == CAAsked:
		ca.next = string(rune(ca.issuing[0] + 1))
		ca.trust, ca.asked = append(slices.Clone(ca.trust), ca.next), false
	case s.Why == plan.WhyCAIssues && ca.stage() == CATrusting:
		ca.previous, ca.issuing, ca.next = ca.issuing, ca.next, ""
		if ca.source != "" {
			// The operator dials with the new source's certificate from now on; applications
			// are to move to it before pass 3.
			for _, l := range ca.clientLeaves() {
				ca.leaves[l] = ca.issuing
			}
		}
	case s.Why == plan.WhyCARetired && ca.stage() == CAIssuing:
		ca.trust = []string{ca.issuing}
	case s.Why == plan.WhyCADropped && ca.stage() == CARetiring:
		ca.previous = ""
	default:
		return fmt.Errorf("RotateCA %s at stage %q", s.Why, ca.stage())
	}
	return nil
}

// renew applies a certificate step to the CA's leaves.
func (w *world) renew(s plan.Step) error {
	ca := w.ca
	was, ok := ca.leaves[s.Secret]
	switch {
	case !ok:
		return fmt.Errorf("%s of %s, which no one holds", s.Action, s.Secret)
	case s.Action == plan.AwaitCertificate:
		delete(ca.unserved, s.Secret)
	case was == ca.issuing && ca.unserved[s.Secret] == "":
		return fmt.Errorf("RenewCertificate of %s, which the CA that issues issued", s.Secret)
	default:
		ca.leaves[s.Secret] = ca.issuing
		if s.Secret == "demo-server-tls" || strings.HasSuffix(s.Secret, "-peer-tls") {
			ca.unserved[s.Secret] = was
		}
	}
	return nil
}

// mistrust names a certificate some running member or client may be presented and does not
// trust: a member's peer certificate to every other member, the operator's and the
// applications' client certificates to every member, the server certificate to the operator,
// which trusts what the trust Secret holds.
func (w *world) mistrust() error {
	ca := w.ca
	issuers := func(secret string) []string {
		if m := w.members[strings.TrimSuffix(secret, "-peer-tls")]; m != nil && m.serves != "" {
			return []string{m.serves} // a change of source: what its Pod mounted
		}
		return slices.DeleteFunc([]string{ca.leaves[secret], ca.unserved[secret]}, func(s string) bool { return s == "" })
	}
	check := func(who, trusts, secret string) error {
		for _, i := range issuers(secret) {
			if !slices.Contains(strings.Split(trusts, "+"), i) {
				return fmt.Errorf("%s trusts %s and may be presented Secret %s's certificate of CA %s", who, trusts, secret, i)
			}
		}
		return nil
	}
	var errs []error
	for _, b := range w.sorted() {
		if !b.pod || !b.inEtcd {
			continue
		}
		for _, a := range w.sorted() {
			if a != b && a.pod && a.inEtcd && ca.peerTLS {
				errs = append(errs, check(b.name, b.trusts, a.name+"-peer-tls"))
			}
		}
		for _, l := range ca.clientLeaves() {
			if l != "demo-server-tls" {
				errs = append(errs, check(b.name, b.trusts, l))
			}
		}
	}
	if ca.clientTLS && ca.source == "" {
		errs = append(errs, check("the operator", strings.Join(ca.trust, "+"), "demo-server-tls"))
	}
	for _, b := range w.sorted() {
		if ca.clientTLS && b.pod && b.serves != "" && !slices.Contains(ca.trust, b.serves) {
			errs = append(errs, fmt.Errorf("the operator trusts %v and %s serves a certificate of CA %s", ca.trust, b.name, b.serves))
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
