package planner

import (
	"slices"
	"strings"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/vocab"
)

// Rotating the cluster's own CA without cutting off a member or a client. etcd checks
// every peer's and client's certificate against the trust bundle it read at start, and
// reads it again only when it restarts. So a rotation goes in three passes, each waiting
// until every member's Pod shows it mounted what the pass needs (Pod.Trust):
//  1. a new CA is made and trusted beside the old one (RotateCA CANew); every member
//     restarts to read that bundle, the leader last;
//  2. the new CA issues (RotateCA CAIssues), and every certificate is issued again from it
//     (RenewCertificate, and AwaitCertificate until the members serve it: no restart);
//  3. the old CA leaves the trust bundle (RotateCA CARetired); every member restarts to read
//     it; then the old CA is dropped (RotateCA CADropped).
// A Pod started meanwhile for another reason mounts the bundle as it stands. A trust bundle
// that changed otherwise (a user's ca.crt, a CA cert-manager renewed) takes the same
// restarts: a member restarts when its Pod shows another bundle than a new Pod would mount.
//
// A change of spec.tls's source (Provided, Auto, CertManager) on a running cluster is the
// same plan (CARotation.Source), the new source's CA for the new CA. Only pass 2 differs:
// the new source's certificates are in other Secrets, which a member mounts only in a Pod
// made anew, so each member restarts onto them (what a Pod mounts, Pod.Trust, names its
// certificates' source too), the leader last, instead of having its certificates issued
// again. The operator dials with the new source's certificate from pass 2 on, when every
// member trusts both.

// rotateCA takes the next step of a rotation, or of restarting members whose trust bundle
// changed.
func rotateCA(m *model, d Desired) (plan.Step, bool) {
	if !m.bootstrapped || m.switching(d) {
		return plan.Step{}, false
	}
	why, words := m.trustWhy()
	if s, ok := rollOne(m, d, plan.WhyLeaderRestartsLast, m.mistrusts, func(mm *member, pre plan.PreconditionKind) plan.Step {
		s := step(plan.RestartMember, mm, pre, why, words, mm.name)
		s.Version = mm.version
		return s
	}); ok || anyPod(m, m.mistrusts) || m.ca == nil {
		return s, ok
	}
	s := plan.Step{Action: plan.RotateCA, Secret: m.ca.Secret, Precondition: plan.Precondition{Kind: plan.PreClusterHealthy}}
	reasons := caWords
	if m.ca.Source != "" {
		reasons = sourceWords
	}
	s.Why = map[CAStage]plan.Why{CAAsked: plan.WhyCANew, CATrusting: plan.WhyCAIssues, CAIssuing: plan.WhyCARetired, CARetiring: plan.WhyCADropped}[m.ca.Stage]
	if s.Why == "" {
		return plan.Step{}, false
	}
	s.Reason = strings.ReplaceAll(reasons[s.Why], "%s", m.ca.Source)
	return s, true
}

// caWords are the reasons of a rotation's RotateCA steps, and of its restarts.
var caWords = map[plan.Why]string{
	plan.WhyCANew: "a rotation of the cluster's CA is asked (etcdplan.io/rotate-ca): a new CA is made and trusted beside the old one; " +
		"members read it as they restart (pass 1 of 3)",
	plan.WhyCAIssues: "every member trusts the old and the new CA: the new one issues from now on, " +
		"and every certificate is issued again from it (pass 2 of 3)",
	plan.WhyCARetired: "every certificate comes from the new CA: the old one leaves the trust bundle; " +
		"members read it as they restart (pass 3 of 3)",
	plan.WhyCADropped:    "every member trusts the new CA alone: the old one is dropped, and the rotation is done",
	plan.WhyTrustBoth:    "%s restarts trusting the old and the new CA (pass 1 of 3 of the CA rotation)",
	plan.WhyTrustNew:     "%s restarts trusting the new CA alone (pass 3 of 3 of the CA rotation)",
	plan.WhyTrustChanged: "%s restarts to read the trust bundle it mounts, which changed since it started",
}

// sourceWords are caWords for a change of source: "%s" is the change (CARotation.Source)
// in a RotateCA step's, the member in a restart's.
var sourceWords = map[plan.Why]string{
	plan.WhyCANew: "spec.tls changes source (%s): the new source's CA is trusted beside the old one's; " +
		"members read it as they restart (pass 1 of 3)",
	plan.WhyCAIssues: "every member trusts the old and the new source's CA: members restart serving the new source's certificates, " +
		"and the operator dials with its own (pass 2 of 3)",
	plan.WhyCARetired: "every member serves the new source's certificates: the old source's CA leaves the trust bundle; " +
		"members read it as they restart (pass 3 of 3)",
	plan.WhyCADropped:    "every member trusts the new source's CA alone: the change of source (%s) is done",
	plan.WhyTrustBoth:    "%s restarts trusting the old and the new source's CA (pass 1 of 3 of the change of TLS source)",
	plan.WhySourceServed: "%s restarts serving the new source's certificates (pass 2 of 3 of the change of TLS source)",
	plan.WhyTrustNew:     "%s restarts trusting the new source's CA alone (pass 3 of 3 of the change of TLS source)",
}

// trustWhy says why a member restarts to read what it mounts, by the rotation's stage.
func (m *model) trustWhy() (plan.Why, string) {
	why := plan.WhyTrustChanged
	switch {
	case m.ca == nil:
	case m.ca.Stage == CATrusting:
		why = plan.WhyTrustBoth
	case m.ca.Stage == CARetiring:
		why = plan.WhyTrustNew
	case m.ca.Stage == CAIssuing && m.ca.Source != "":
		why = plan.WhySourceServed
	}
	if words, ok := sourceWords[why]; ok && m.ca != nil && m.ca.Source != "" {
		return why, words
	}
	return why, caWords[why]
}

// mistrusts: the member's Pod mounted other trust bundles than a Pod started now would.
// A Pod of an earlier version records none: it restarts for a rotation's passes only. A
// Pod that is going counts until it is gone: its etcd may run on meanwhile (a node cut
// off), and a pass waits for it (rollOne restarts no such Pod).
func (m *model) mistrusts(mm *member) bool {
	if !mm.pod || m.trust == "" || mm.trust == m.trust {
		return false
	}
	return mm.trust != "" || m.ca != nil && (m.ca.Stage == CATrusting || m.ca.Stage == CARetiring || m.ca.Stage == CAIssuing && m.ca.Source != "")
}

// switching: TLS is being switched on or off; a rotation waits until it is done.
func (m *model) switching(d Desired) bool {
	return anyPod(m, func(mm *member) bool { return mm.serves(d) != final(d) }) || m.peerSwitching(d)
}

// rotated foresees a RotateCA step: the stage it moves to, the trust bundles it changes,
// and, once the new CA issues, every certificate of the old to issue again.
func (m *model) rotated(s plan.Step) {
	switch {
	case s.Why == plan.WhyCANew:
		m.ca.Stage, m.trust = CATrusting, m.trust+"+new"
	case s.Why == plan.WhyCAIssues && m.ca.Source != "":
		m.ca.Stage, m.trust = CAIssuing, m.trust+" served from new" // Pods made now mount the new source's Secrets
	case s.Why == plan.WhyCAIssues:
		m.ca.Stage, m.renewals = CAIssuing, reissue(m.renewals, m.ca.Leaves)
	case s.Why == plan.WhyCARetired:
		m.ca.Stage, m.trust = CARetiring, "new of "+m.trust
	case s.Why == plan.WhyCADropped:
		m.ca = nil
	}
}

// peerLeaf foresees the CA's leaves after a step: a member's peer certificate is issued
// with its first Pod, and is no longer the cluster's once the member is deleted.
func (m *model) peerLeaf(s plan.Step) {
	if m.ca == nil || !m.ca.PeerLeaves {
		return
	}
	secret := vocab.PeerSecret(s.Member)
	has := slices.ContainsFunc(m.ca.Leaves, func(r Renewal) bool { return r.Secret == secret })
	switch {
	case s.Action == plan.DeleteMember:
		m.ca.Leaves = slices.DeleteFunc(slices.Clone(m.ca.Leaves), func(r Renewal) bool { return r.Secret == secret })
	case s.Action.StartsPod() && s.Action != plan.AddLearner && !has:
		// Among the peers' in the executor's order: after the client side's, by name.
		i := slices.IndexFunc(m.ca.Leaves, func(r Renewal) bool { return strings.HasSuffix(r.Secret, "-peer-tls") && r.Secret > secret })
		if i < 0 {
			i = len(m.ca.Leaves)
		}
		m.ca.Leaves = slices.Insert(slices.Clone(m.ca.Leaves), i, Renewal{Secret: secret, Mounted: true})
	}
}

// reissue adds every leaf to the renewals, as the executor lists them once the new CA
// issues: in the leaves' order, each due because the old CA issued it.
func reissue(renewals, leaves []Renewal) []Renewal {
	out := make([]Renewal, 0, len(leaves)+len(renewals))
	for _, l := range leaves {
		l.Rotated, l.Unserved = true, false
		for _, r := range renewals {
			if r.Secret == l.Secret && r.Unserved {
				l = r
			}
		}
		out = append(out, l)
	}
	for _, r := range renewals {
		if !slices.ContainsFunc(out, func(x Renewal) bool { return x.Secret == r.Secret }) {
			out = append(out, r)
		}
	}
	return out
}
