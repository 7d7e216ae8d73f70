package planner

import (
	"cmp"
	"net/url"
	"strconv"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/vocab"
)

// Switching TLS on for a running cluster, without cutting off a client or a peer. etcd
// serves plain text and TLS side by side on one client port, but a peer port serves one or
// the other: a member whose peer URL says https while it listens for http is cut off. So:
//  1. each member restarts serving TLS beside plain text (peers on a second port, TLS);
//  2. each member's peer URL moves to that port (no restart: peers dial it from then on);
//  3. each member restarts without plain text, clients' only after approval.
// Every Pod a plan starts meanwhile serves as the switch stands (listenFor), so a member
// replaced or restarted for another reason keeps its peers.

// switchesListen: the step is the switch's own, which sets its Listen itself.
func switchesListen(why plan.Why) bool {
	return why == plan.WhyTLSBeside || why == plan.WhyClientPlainTextOff || why == plan.WhyPlainTextOff
}

// final is how the spec has members serve each side once no switch is under way.
func final(d Desired) plan.Listen {
	l := plan.Listen{Client: plan.ListenPlain, Peer: plan.ListenPlain}
	if d.ClientTLS {
		l.Client = plan.ListenTLS
	}
	if d.PeerTLS {
		l.Peer = plan.ListenTLS
	}
	return l
}

// serves is how the member's Pod serves each side.
func (mm *member) serves(d Desired) plan.Listen {
	f := final(d)
	return plan.Listen{Client: cmp.Or(mm.listen.Client, f.Client), Peer: cmp.Or(mm.listen.Peer, f.Peer)}
}

// listenFor is how the Pod of mm (nil: a member that joins) the plan starts now serves:
// TLS beside plain text on each side the spec switches on and whose switch is not past plain
// text, else as the spec says. Clients: no member refuses plain text yet. Peers: peerBoth.
func (m *model) listenFor(mm *member, d Desired) plan.Listen {
	var l plan.Listen
	plainClient, tlsOnlyClient := false, false
	for _, x := range m.members {
		if x.pod {
			s := x.serves(d)
			plainClient = plainClient || s.Client != plan.ListenTLS
			tlsOnlyClient = tlsOnlyClient || s.Client == plan.ListenTLS
		}
	}
	if d.ClientTLS && plainClient && !tlsOnlyClient {
		l.Client = plan.ListenBoth
	}
	if d.PeerTLS && m.peerBoth(mm, d) {
		l.Peer = plan.ListenBoth
	}
	return l
}

// peerBoth: a Pod of mm serves peers TLS beside plain text, so that every peer URL it can
// have works: its peer URL is plain text; or it is on the second peer port, or not known,
// while some member still takes plain text from its peers. A peer URL with TLS on the first
// port (a member that joined with TLS) is served by TLS alone.
func (m *model) peerBoth(mm *member, d Desired) bool {
	switch {
	case mm != nil && mm.peerURLKnown && !mm.peerURLTLS:
		return true
	case mm != nil && mm.peerURLKnown && !mm.peerURLAlt:
		return false
	}
	for _, x := range m.members {
		if x.pod && x.serves(d).Peer != plan.ListenTLS || x.peerURLKnown && !x.peerURLTLS {
			return true
		}
	}
	return false
}

// withListen gives a step that starts a Pod the Listen of the switch as it stands.
func (m *model) withListen(s plan.Step, d Desired) plan.Step {
	if s.Action.StartsPod() && !switchesListen(s.Why) {
		s.Listen = m.listenFor(m.get(s.Member), d)
	}
	return s
}

// switchTLS takes the next step of switching TLS on (see above).
func switchTLS(m *model, d Desired) (plan.Step, bool) {
	if !m.bootstrapped || !d.ClientTLS && !d.PeerTLS {
		return plan.Step{}, false
	}
	beside := func(mm *member) bool {
		s := mm.serves(d)
		return d.ClientTLS && s.Client == plan.ListenPlain || d.PeerTLS && s.Peer == plan.ListenPlain
	}
	if s, ok := rollOne(m, d, plan.WhyLeaderRestartsLast, beside, func(mm *member, pre plan.PreconditionKind) plan.Step {
		s := step(plan.RestartMember, mm, pre, plan.WhyTLSBeside, "spec.tls switches TLS on: %s restarts serving TLS beside plain text", mm.name)
		s.Version, s.Listen = mm.version, m.listenFor(mm, d)
		return s
	}); ok || anyPod(m, beside) {
		return s, ok
	}
	if s, ok := peerURLsToTLS(m, d); ok {
		return s, true
	}
	return rollOne(m, d, plan.WhyLeaderRestartsLast, func(mm *member) bool { return plainLeft(mm, d) }, func(mm *member, pre plan.PreconditionKind) plan.Step {
		why, words := plan.WhyPlainTextOff, "%s serves TLS alone from now on"
		if d.ClientTLS && mm.serves(d).Client == plan.ListenBoth && !m.clientTLSOnly(d) {
			why, words = plan.WhyClientPlainTextOff, "%s is the first member to refuse plain-text clients: every client must speak TLS from now on"
		}
		s := step(plan.RestartMember, mm, pre, why, words, mm.name)
		s.Version = mm.version
		return s
	})
}

// anyPod: a member with a Pod needs it.
func anyPod(m *model, needs func(*member) bool) bool {
	for _, mm := range m.members {
		if mm.pod && needs(mm) {
			return true
		}
	}
	return false
}

// peerURLsToTLS moves peer URLs to TLS one member at a time, once every member serves
// peer TLS.
func peerURLsToTLS(m *model, d Desired) (plan.Step, bool) {
	if !d.PeerTLS {
		return plan.Step{}, false
	}
	for _, mm := range m.members {
		if mm.inEtcd && mm.peerURLKnown && !mm.peerURLTLS {
			return step(plan.UpdatePeerURL, mm, plan.PreClusterHealthy, plan.WhyPeerURLToTLS,
				"every member serves peer TLS: the peer URL of %s moves to it", mm.name), true
		}
	}
	return plan.Step{}, false
}

// plainLeft: the member still serves plain text on a side the spec switched to TLS, and
// no peer dials it there any more.
func plainLeft(mm *member, d Desired) bool {
	s := mm.serves(d)
	return d.ClientTLS && s.Client == plan.ListenBoth || d.PeerTLS && s.Peer == plan.ListenBoth && mm.peerURLTLS
}

// clientTLSOnly: a member already refuses plain-text clients.
func (m *model) clientTLSOnly(d Desired) bool {
	for _, mm := range m.members {
		if mm.pod && mm.serves(d).Client == plan.ListenTLS {
			return true
		}
	}
	return false
}

// knowPeerURL takes the member's peer URL: whether it is TLS, on the second peer port.
func (mm *member) knowPeerURL(peerURLs []string) {
	if len(peerURLs) == 0 {
		return
	}
	u, err := url.Parse(peerURLs[0])
	mm.peerURLKnown = err == nil
	mm.peerURLTLS = err == nil && u.Scheme == "https"
	mm.peerURLAlt = err == nil && u.Port() == strconv.Itoa(vocab.PeerTLSPort)
}

// registersTLS: the member a step adds (or seeds) registers a TLS peer URL: the spec asks
// for peer TLS, and the member does not serve plain text beside it.
func registersTLS(s plan.Step, d Desired) bool {
	return d.PeerTLS && s.Listen.Peer != plan.ListenBoth
}
