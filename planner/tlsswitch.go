package planner

import (
	"cmp"
	"net/url"
	"strconv"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/vocab"
)

// Switching TLS on or off for a running cluster, without cutting off a client or a peer.
// etcd serves plain text and TLS side by side on one client port, but a peer port serves
// one or the other: a member whose peer URL says https while it listens for http is cut
// off. So, for each side the spec switches:
//  1. each member restarts serving both ways (peers on two ports, one each way);
//  2. each member's peer URL moves to the new way, on the port that serves it (no restart:
//     peers dial it there from then on);
//  3. each member restarts serving the new way alone.
// Switching waits for approval before the first member refuses clients the old way; a
// switch of peers alone, off, before its first step. Every Pod a plan starts meanwhile serves as the
// switch stands (listenFor), so a member replaced or restarted for another reason keeps its
// peers.

// switchesListen: the step is the switch's own, which sets its Listen itself.
func switchesListen(why plan.Why) bool {
	switch why {
	case plan.WhyTLSBeside, plan.WhyClientPlainTextOff, plan.WhyPlainTextOff, plan.WhyTLSOff, plan.WhyPlainBeside, plan.WhyTLSGone:
		return true
	}
	return false
}

// final is how the spec has members serve each side once no switch is under way.
func final(d Desired) plan.Listen {
	return plan.Listen{Client: plan.OneWay(d.ClientTLS), Peer: plan.OneWay(d.PeerTLS)}
}

// serves is how the member's Pod serves each side.
func (mm *member) serves(d Desired) plan.Listen {
	f := final(d)
	return plan.Listen{Client: cmp.Or(mm.listen.Client, f.Client), Peer: cmp.Or(mm.listen.Peer, f.Peer)}
}

// old: the member's Pod serves a side only the way the spec switches it from.
func (mm *member) old(d Desired) bool {
	s, f := mm.serves(d), final(d)
	return !plan.BothWays(s.Client) && s.Client != f.Client || !plan.BothWays(s.Peer) && s.Peer != f.Peer
}

// listenFor is how the Pod of mm (nil: a member that joins) the plan starts now serves:
// both ways on each side under a switch, else as the spec says. Clients are served both ways
// until a member serves the new way alone; peers, while a member serves them the old way
// or has a peer URL of it (peerLayout).
func (m *model) listenFor(mm *member, d Desired) plan.Listen {
	var l plan.Listen
	oldClient := anyPod(m, func(x *member) bool { return x.serves(d).Client != plan.OneWay(d.ClientTLS) })
	if oldClient && !m.clientsServedOneWay(d) {
		l.Client = plan.ListenBoth
	}
	if m.peerSwitching(d) {
		l.Peer = peerLayout(mm)
	}
	return l
}

// peerSwitching: a member serves peers other than as the spec says, or has a peer URL of
// the other way.
func (m *model) peerSwitching(d Desired) bool {
	for _, x := range m.members {
		if x.pod && x.serves(d).Peer != plan.OneWay(d.PeerTLS) || x.peerURLKnown && x.peerURLTLS != d.PeerTLS {
			return true
		}
	}
	return false
}

// peerLayout is how a member serves peers both ways so that every peer URL it has or gets
// in the switch works: TLS on the first port and plain text on the second when its peer URL
// is TLS on the first port or plain text on the second; else the other way round (a member
// that joins registers plain text on the first port).
func peerLayout(mm *member) string {
	if mm != nil && mm.peerURLKnown && mm.peerURLTLS != mm.peerURLAlt {
		return plan.ListenTLSFirst
	}
	return plan.ListenBoth
}

// withListen gives a step that starts a Pod the Listen of the switch as it stands.
func (m *model) withListen(s plan.Step, d Desired) plan.Step {
	if s.Action.StartsPod() && !switchesListen(s.Why) {
		s.Listen = m.listenFor(m.get(s.Member), d)
	}
	return s
}

// switchTLS takes the next step of switching TLS on or off (see above).
func switchTLS(m *model, d Desired) (plan.Step, bool) {
	if !m.bootstrapped {
		return plan.Step{}, false
	}
	old := func(mm *member) bool { return mm.old(d) }
	if s, ok := rollOne(m, d, plan.WhyLeaderRestartsLast, old, func(mm *member, pre plan.PreconditionKind) plan.Step {
		s := step(plan.RestartMember, mm, pre, plan.WhyTLSBeside, "spec.tls switches TLS on: %s restarts serving TLS beside plain text", mm.name)
		if m.switchesOff(d) {
			s = step(plan.RestartMember, mm, pre, plan.WhyPlainBeside, "spec.tls switches TLS off: %s restarts serving plain text beside TLS", mm.name)
			if !m.clientsOff(d) && !m.offBegun(d) { // no client notices: the approval is asked here
				s.Why, s.Reason = plan.WhyTLSOff, s.Reason+"; the first member to: peers' traffic is no longer authenticated by certificates from here"
			}
		}
		s.Version, s.Listen = mm.version, m.listenFor(mm, d)
		return s
	}); ok || anyPod(m, old) {
		return s, ok
	}
	if s, ok := movePeerURLs(m, d); ok {
		return s, true
	}
	return rollOne(m, d, plan.WhyLeaderRestartsLast, func(mm *member) bool { return oneWayLeft(mm, d) }, func(mm *member, pre plan.PreconditionKind) plan.Step {
		why, words := plan.WhyPlainTextOff, "%s serves TLS alone from now on"
		first := plan.BothWays(mm.serves(d).Client) && !m.clientsServedOneWay(d)
		switch {
		case !d.ClientTLS && first:
			why, words = plan.WhyTLSOff, "%s is the first member to refuse TLS clients: every client must speak plain text from now on"
		case d.ClientTLS && first:
			why, words = plan.WhyClientPlainTextOff, "%s is the first member to refuse plain-text clients: every client must speak TLS from now on"
		case m.switchesOff(d):
			why, words = plan.WhyTLSGone, "%s serves plain text alone from now on"
		}
		s := step(plan.RestartMember, mm, pre, why, words, mm.name)
		s.Version = mm.version
		return s
	})
}

// switchesOff: the spec switches a side off that a member serves TLS on.
func (m *model) switchesOff(d Desired) bool {
	return anyPod(m, func(mm *member) bool {
		s := mm.serves(d)
		return !d.ClientTLS && s.Client != plan.ListenPlain || !d.PeerTLS && s.Peer != plan.ListenPlain
	})
}

// offBegun: a member already serves plain text on a side the spec switches off.
func (m *model) offBegun(d Desired) bool {
	return anyPod(m, func(mm *member) bool {
		s := mm.serves(d)
		return !d.ClientTLS && s.Client != plan.ListenTLS || !d.PeerTLS && s.Peer != plan.ListenTLS
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

// movePeerURLs moves peer URLs to the spec's way one member at a time, once every member
// serves peers both ways. The step says how the member serves them, which tells the port.
func movePeerURLs(m *model, d Desired) (plan.Step, bool) {
	why, words := plan.WhyPeerURLToTLS, "every member serves peer TLS: the peer URL of %s moves to it"
	if !d.PeerTLS {
		why, words = plan.WhyPeerURLToPlain, "every member serves peers plain text: the peer URL of %s moves to it"
	}
	for _, mm := range m.members {
		if mm.inEtcd && mm.peerURLKnown && mm.peerURLTLS != d.PeerTLS {
			s := step(plan.UpdatePeerURL, mm, plan.PreClusterHealthy, why, words, mm.name)
			s.Listen.Peer = mm.serves(d).Peer
			return s, true
		}
	}
	return plan.Step{}, false
}

// MovedPeerURLPort is the port a member's peer URL moves to: the one that serves peers the
// way the step's reason moves it to, as the member serves them (the step's Listen).
func MovedPeerURLPort(s plan.Step) int {
	tlsFirst := s.Listen.Peer == plan.ListenTLSFirst
	if (s.Why == plan.WhyPeerURLToTLS) == tlsFirst {
		return vocab.PeerPort
	}
	return vocab.PeerTLSPort
}

// oneWayLeft: the member still serves a side both ways, and no peer dials it the old way
// any more.
func oneWayLeft(mm *member, d Desired) bool {
	s := mm.serves(d)
	return plan.BothWays(s.Client) || plan.BothWays(s.Peer) && mm.peerURLTLS == d.PeerTLS
}

// clientsServedOneWay: a member already serves clients the spec's way alone.
func (m *model) clientsServedOneWay(d Desired) bool {
	return anyPod(m, func(mm *member) bool { return mm.serves(d).Client == plan.OneWay(d.ClientTLS) })
}

// clientsOff: the spec switches clients' TLS off, which a member serves.
func (m *model) clientsOff(d Desired) bool {
	return !d.ClientTLS && anyPod(m, func(mm *member) bool { return mm.serves(d).Client != plan.ListenPlain })
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
	return d.PeerTLS && !plan.BothWays(s.Listen.Peer)
}
