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
	switch m.ca.Stage {
	case CAAsked:
		s.Why, s.Reason = plan.WhyCANew, "a rotation of the cluster's CA is asked (etcdplan.io/rotate-ca): a new CA is made and trusted beside the old one; "+
			"members read it as they restart (pass 1 of 3)"
	case CATrusting:
		s.Why, s.Reason = plan.WhyCAIssues, "every member trusts the old and the new CA: the new one issues from now on, "+
			"and every certificate is issued again from it (pass 2 of 3)"
	case CAIssuing:
		s.Why, s.Reason = plan.WhyCARetired, "every certificate comes from the new CA: the old one leaves the trust bundle; "+
			"members read it as they restart (pass 3 of 3)"
	case CARetiring:
		s.Why, s.Reason = plan.WhyCADropped, "every member trusts the new CA alone: the old one is dropped, and the rotation is done"
	default:
		return plan.Step{}, false
	}
	return s, true
}

// trustWhy says why a member restarts to read its trust bundle, by the rotation's stage.
func (m *model) trustWhy() (plan.Why, string) {
	switch {
	case m.ca != nil && m.ca.Stage == CATrusting:
		return plan.WhyTrustBoth, "%s restarts trusting the old and the new CA (pass 1 of 3 of the CA rotation)"
	case m.ca != nil && m.ca.Stage == CARetiring:
		return plan.WhyTrustNew, "%s restarts trusting the new CA alone (pass 3 of 3 of the CA rotation)"
	}
	return plan.WhyTrustChanged, "%s restarts to read the trust bundle it mounts, which changed since it started"
}

// mistrusts: the member's Pod mounted other trust bundles than a Pod started now would.
// A Pod of an earlier version records none: it restarts for a rotation's passes only. A
// Pod that is going counts until it is gone: its etcd may run on meanwhile (a node cut
// off), and a pass waits for it (rollOne restarts no such Pod).
func (m *model) mistrusts(mm *member) bool {
	if !mm.pod || m.trust == "" || mm.trust == m.trust {
		return false
	}
	return mm.trust != "" || m.ca != nil && (m.ca.Stage == CATrusting || m.ca.Stage == CARetiring)
}

// switching: TLS is being switched on or off; a rotation waits until it is done.
func (m *model) switching(d Desired) bool {
	return anyPod(m, func(mm *member) bool { return mm.serves(d) != final(d) }) || m.peerSwitching(d)
}

// rotated foresees a RotateCA step: the stage it moves to, the trust bundles it changes,
// and, once the new CA issues, every certificate of the old to issue again.
func (m *model) rotated(s plan.Step) {
	switch s.Why {
	case plan.WhyCANew:
		m.ca.Stage, m.trust = CATrusting, m.trust+"+new"
	case plan.WhyCAIssues:
		m.ca.Stage, m.renewals = CAIssuing, reissue(m.renewals, m.ca.Leaves)
	case plan.WhyCARetired:
		m.ca.Stage, m.trust = CARetiring, "new of "+m.trust
	case plan.WhyCADropped:
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
