package planner

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/plan"
)

func withTLS(c Desired, client, peer bool) Desired {
	c.ClientTLS, c.PeerTLS, c.ConfigHash = client, peer, "cfg-tls"
	return c
}

// TLS switched on for a running cluster is one plan: every member restarts serving TLS
// beside plain text (the leader last), then each member's peer URL moves to TLS, then every
// member restarts without plain text, the first that refuses plain-text clients named as
// such (the executor holds it for approval). The simulated cluster checks after every step
// that each member can dial every other at its peer URL.
func TestTLSIsSwitchedOnWithoutCuttingOffAMember(t *testing.T) {
	c := withTLS(cluster(3, "3.6.16"), true, true)
	w := running(cluster(3, "3.6.16"), 3, "3.6.16")
	p := Plan(c, w.observe())
	require.Equal(t, []string{
		"RestartMember demo-1", "RestartMember demo-2", "TransferLeadership demo-0>demo-1", "RestartMember demo-0",
		"UpdatePeerURL demo-0", "UpdatePeerURL demo-1", "UpdatePeerURL demo-2",
		"RestartMember demo-0", "RestartMember demo-2", "TransferLeadership demo-1>demo-0", "RestartMember demo-1",
	}, summary(p))
	both := plan.Listen{Client: plan.ListenBoth, Peer: plan.ListenBoth}
	for i, want := range map[int]plan.Why{0: plan.WhyTLSBeside, 4: plan.WhyPeerURLToTLS, 7: plan.WhyClientPlainTextOff, 8: plan.WhyPlainTextOff} {
		require.Equal(t, want, p.Steps[i].Why, "step %d", i)
	}
	require.Equal(t, both, p.Steps[0].Listen)
	require.Equal(t, plan.Listen{}, p.Steps[7].Listen, "as the spec says")
	converge(t, c, w)
	for _, m := range w.members {
		require.Equal(t, plan.Listen{Client: plan.ListenTLS, Peer: plan.ListenTLS}, m.listen, m.name)
		require.True(t, m.peerTLS && m.peerAlt, m.name)
	}

	// Converged: members that joined TLS from the start and those switched live differ in
	// their peer port only, and a member that joins now registers TLS on the first port.
	p = Plan(withTLS(cluster(4, "3.6.16"), true, true), w.observe())
	require.Equal(t, []string{"AddLearner demo-3", "StartMember demo-3", "PromoteLearner demo-3"}, summary(p))
	require.Equal(t, plan.Listen{}, p.Steps[0].Listen)
	converge(t, withTLS(cluster(4, "3.6.16"), true, true), w)
	require.True(t, w.members["demo-3"].peerTLS && !w.members["demo-3"].peerAlt)
}

// Peer TLS alone needs no approval: no client notices; client TLS alone moves no peer URL.
func TestTLSIsSwitchedOnOneSideAtATime(t *testing.T) {
	w := running(cluster(3, "3.6.16"), 3, "3.6.16")
	p := Plan(withTLS(cluster(3, "3.6.16"), false, true), w.observe())
	require.Len(t, p.Steps, 11)
	for _, s := range p.Steps {
		require.NotEqual(t, plan.WhyClientPlainTextOff, s.Why)
		if s.Why == plan.WhyTLSBeside {
			require.Equal(t, plan.Listen{Peer: plan.ListenBoth}, s.Listen)
		}
	}
	converge(t, withTLS(cluster(3, "3.6.16"), false, true), w)

	w = running(cluster(3, "3.6.16"), 3, "3.6.16")
	p = Plan(withTLS(cluster(3, "3.6.16"), true, false), w.observe())
	require.Equal(t, []string{
		"RestartMember demo-1", "RestartMember demo-2", "TransferLeadership demo-0>demo-1", "RestartMember demo-0",
		"RestartMember demo-0", "RestartMember demo-2", "TransferLeadership demo-1>demo-0", "RestartMember demo-1",
	}, summary(p))
	require.Equal(t, plan.Listen{Client: plan.ListenBoth}, p.Steps[0].Listen)
	require.Equal(t, plan.WhyClientPlainTextOff, p.Steps[4].Why)
	converge(t, withTLS(cluster(3, "3.6.16"), true, false), w)
}

// Whatever starts a Pod while the switch is under way serves as the switch stands: a
// member whose Pod was lost is started beside plain text (its peers still dial it there),
// and a member that joins registers a plain-text peer URL, moved to TLS like the others.
func TestPodsStartedDuringTheSwitchServeAsItStands(t *testing.T) {
	c := withTLS(cluster(3, "3.6.16"), true, true)
	w := running(cluster(3, "3.6.16"), 3, "3.6.16")
	w.members["demo-1"].pod, w.members["demo-1"].up = false, false
	p := Plan(c, w.observe())
	require.Equal(t, "StartMember demo-1", summary(p)[0])
	require.Equal(t, plan.Listen{Client: plan.ListenBoth, Peer: plan.ListenBoth}, p.Steps[0].Listen)
	converge(t, c, w)

	w = running(cluster(3, "3.6.16"), 3, "3.6.16")
	for _, s := range Plan(c, w.observe()).Steps[:5] { // up to the first peer URL moved
		stuck, err := w.apply(s, c)
		require.NoError(t, err)
		require.False(t, stuck)
		w.settle()
	}
	require.True(t, w.members["demo-0"].peerTLS)
	w.members["demo-2"].pod, w.members["demo-2"].up = false, false // lost halfway
	p = Plan(c, w.observe())
	require.Equal(t, "StartMember demo-2", summary(p)[0])
	require.Equal(t, plan.Listen{Client: plan.ListenBoth, Peer: plan.ListenBoth}, p.Steps[0].Listen)
	converge(t, c, w)
	w = running(cluster(3, "3.6.16"), 3, "3.6.16")
	c5 := withTLS(cluster(5, "3.6.16"), true, true)
	p = Plan(c5, w.observe())
	require.Equal(t, "AddLearner demo-3", summary(p)[0])
	require.Equal(t, plan.ListenBoth, p.Steps[0].Listen.Peer, "its peers do not dial TLS yet")
	converge(t, c5, w)
	for _, m := range w.members {
		require.Equal(t, plan.ListenTLS, m.listen.Peer, m.name)
	}
}

// A cluster made with TLS plans nothing for it, and nothing is planned for a cluster
// without TLS.
func TestNoSwitchWithoutAChange(t *testing.T) {
	c := withTLS(cluster(3, "3.6.16"), true, true)
	w := running(c, 3, "3.6.16")
	for _, m := range w.members {
		m.listen, m.peerTLS = plan.Listen{Client: plan.ListenTLS, Peer: plan.ListenTLS}, true
	}
	require.Empty(t, Plan(c, w.observe()).Steps)
	require.Empty(t, Plan(cluster(3, "3.6.16"), running(cluster(3, "3.6.16"), 3, "3.6.16").observe()).Steps)
}

// With no Pod and no member answering (a parked cluster, an outage), a member's claim
// records its peer URL: a member whose peers dial it in plain text starts serving TLS beside
// it, one that joined with TLS serves TLS alone.
func TestPeerURLsRecordedOnClaimsDecideHowAMemberStarts(t *testing.T) {
	c := withTLS(cluster(3, "3.6.16"), false, true)
	w := running(cluster(3, "3.6.16"), 3, "3.6.16")
	for _, m := range w.members {
		m.pod, m.up = false, false
	}
	p := Plan(c, w.observe())
	require.Equal(t, "StartMember demo-0", summary(p)[0])
	require.Equal(t, plan.Listen{Peer: plan.ListenBoth}, p.Steps[0].Listen)
	settle(t, c, w)

	w = running(c, 3, "3.6.16")
	for _, m := range w.members {
		m.listen, m.peerTLS, m.pod, m.up = final(c), true, false, false
	}
	p = Plan(c, w.observe())
	require.Equal(t, "StartMember demo-0", summary(p)[0])
	require.Equal(t, plan.Listen{}, p.Steps[0].Listen, "as the spec says")
	settle(t, c, w)
}

// settle applies the first step of a fresh plan until the plan is empty: whoever the
// members elect, no step cuts a member off (the world checks after each).
func settle(t *testing.T, c Desired, w *world) {
	t.Helper()
	for i := 0; ; i++ {
		require.Less(t, i, 100, "plan does not converge")
		p := Plan(c, w.observe())
		if len(p.Steps) == 0 {
			require.Nil(t, p.Blocked)
			return
		}
		stuck, err := w.apply(p.Steps[0], c)
		require.NoError(t, err)
		if stuck {
			require.True(t, w.settle(), "step %v cannot start", p.Steps[0])
		}
	}
}

// TLS switched off is the same plan the other way, waiting for approval before the first
// member refuses TLS clients (a switch of peers alone, before its first step):
// members serve plain text beside TLS (peers plain on the second port, since their TLS peer
// URLs are on the first), the peer URLs move to plain text, members drop TLS. Switched on
// again, the members whose plain-text URLs are on the second port serve TLS on the first.
func TestTLSIsSwitchedOffAndOnAgain(t *testing.T) {
	on := withTLS(cluster(3, "3.6.16"), true, true)
	w := running(on, 3, "3.6.16")
	off := cluster(3, "3.6.16")
	p := Plan(off, w.observe())
	require.Equal(t, []string{
		"RestartMember demo-1", "RestartMember demo-2", "TransferLeadership demo-0>demo-1", "RestartMember demo-0",
		"UpdatePeerURL demo-0", "UpdatePeerURL demo-1", "UpdatePeerURL demo-2",
		"RestartMember demo-0", "RestartMember demo-2", "TransferLeadership demo-1>demo-0", "RestartMember demo-1",
	}, summary(p))
	for i, want := range map[int]plan.Why{0: plan.WhyPlainBeside, 1: plan.WhyPlainBeside, 4: plan.WhyPeerURLToPlain, 7: plan.WhyTLSOff, 8: plan.WhyTLSGone, 10: plan.WhyTLSGone} {
		require.Equal(t, want, p.Steps[i].Why, "step %d", i)
	}
	require.Equal(t, plan.Listen{Client: plan.ListenBoth, Peer: plan.ListenTLSFirst}, p.Steps[0].Listen)
	require.Equal(t, 2382, MovedPeerURLPort(p.Steps[4]), "plain text on the second port")
	converge(t, off, w)
	for _, m := range w.members {
		require.Equal(t, plan.Listen{Client: plan.ListenPlain, Peer: plan.ListenPlain}, m.serving(), m.name)
		require.True(t, !m.peerTLS && m.peerAlt, m.name)
	}

	peersOff := withTLS(cluster(3, "3.6.16"), true, false)
	w2 := running(on, 3, "3.6.16")
	p = Plan(peersOff, w2.observe())
	require.Equal(t, plan.WhyTLSOff, p.Steps[0].Why, "peers alone: the approval is asked at the first step")
	converge(t, peersOff, w2)

	p = Plan(on, w.observe())
	require.Equal(t, plan.Listen{Client: plan.ListenBoth, Peer: plan.ListenTLSFirst}, p.Steps[0].Listen, "TLS on the first port")
	require.Equal(t, 2380, MovedPeerURLPort(p.Steps[4]))
	converge(t, on, w)
	for _, m := range w.members {
		require.True(t, m.peerTLS && !m.peerAlt, m.name)
	}
}
