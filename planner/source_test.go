package planner

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/plan"
)

// sourceWorld is tlsWorld(3) whose spec.tls changed source on a running cluster, as the
// executor reports it: a rotation asked, of kind Source, the new source's CA "B".
func sourceWorld() (Desired, *world) {
	c, w := tlsWorld(3)
	c.ConfigHash = "cfg-tls-provided"
	w.ca.asked, w.ca.source = true, "Auto to Provided"
	for _, m := range w.members {
		m.serves = "A"
	}
	return c, w
}

// Before a change of source was a plan of its own, the Pod's configuration and its trust
// bundle both changed at once, and each member restarted straight into the new source,
// trusting its CA "B" alone and presenting B's peer certificate, while the members not yet
// restarted trusted "A" alone: the first restart cut that member off from its peers, and
// the operator, dialing with the new source's certificate, was refused by the others.
// That is still what a trust bundle that changed without a change of source gives; the
// simulated cluster refuses it for a change of source.
func TestSourceChangeStraightIntoTheNewSourceCutsMembersOff(t *testing.T) {
	c, w := sourceWorld()
	w.ca.asked, w.ca.source = false, ""
	o := w.observe()
	o.Trust = "B"
	p := Plan(c, o)
	require.Equal(t, []string{"RestartMember demo-1", "RestartMember demo-2", "TransferLeadership demo-0>demo-1", "RestartMember demo-0"}, summary(p))
	require.Equal(t, []plan.Why{plan.WhyTrustChanged, plan.WhyTrustChanged, plan.WhyLeaderRestartsLast, plan.WhyTrustChanged}, whys(p))

	w.ca.trust, w.ca.issuing = []string{"B"}, "B" // what the new source gives a Pod made now
	w.ca.source = "Auto to Provided"              // so its Pod mounts B's certificates
	_, err := w.apply(p.Steps[0], c)
	require.ErrorContains(t, err, "demo-0 trusts A and may be presented Secret demo-1-peer-tls's certificate of CA B")
}

// A change of source is the CA rotation's plan: the new source's CA trusted beside the old
// (a restart per member, the leader last), each member restarted onto the new source's
// certificates (its Pod mounts other Secrets; the operator dials with the new source's
// certificate once every member trusts both), the old CA out of the trust bundle (a restart
// per member). The simulated cluster checks after every step that no member, nor the
// operator, is presented a certificate it does not trust.
func TestSourceChangeInThreePasses(t *testing.T) {
	c, w := sourceWorld()
	p := Plan(c, w.observe())
	require.Equal(t, []string{
		"RotateCA ", "RestartMember demo-1", "RestartMember demo-2", "TransferLeadership demo-0>demo-1", "RestartMember demo-0",
		"RotateCA ", "RestartMember demo-0", "RestartMember demo-2", "TransferLeadership demo-1>demo-0", "RestartMember demo-1",
		"RotateCA ", "RestartMember demo-1", "RestartMember demo-2", "TransferLeadership demo-0>demo-1", "RestartMember demo-0",
		"RotateCA ",
	}, summary(p))
	require.Equal(t, []plan.Why{
		plan.WhyCANew, plan.WhyTrustBoth, plan.WhyTrustBoth, plan.WhyLeaderRestartsLast, plan.WhyTrustBoth,
		plan.WhyCAIssues, plan.WhySourceServed, plan.WhySourceServed, plan.WhyLeaderRestartsLast, plan.WhySourceServed,
		plan.WhyCARetired, plan.WhyTrustNew, plan.WhyTrustNew, plan.WhyLeaderRestartsLast, plan.WhyTrustNew,
		plan.WhyCADropped,
	}, whys(p))
	require.Contains(t, p.Steps[0].Reason, "spec.tls changes source (Auto to Provided)")
	require.Equal(t, "demo-0 restarts serving the new source's certificates (pass 2 of 3 of the change of TLS source)", p.Steps[6].Reason)
	for _, s := range p.Steps {
		require.NotContains(t, s.Reason, "%", "%v", s)
	}

	converge(t, c, w)
	require.Nil(t, w.observe().CA)
	for _, m := range w.members {
		require.Equal(t, "B@B", m.trust(), m.name)
	}
	require.Empty(t, Plan(c, w.observe()).Steps)
}

// Pass 2 waits until every member's Pod mounts the new source's certificates: the old CA
// leaves the trust bundle only then. A member whose Pod records nothing (an earlier
// operator version) restarts for it too, and one whose Pod is lost gets one that mounts
// what the pass needs and is not restarted again.
func TestSourceChangeWaitsForEveryMemberToServeTheNewSource(t *testing.T) {
	c, w := sourceWorld()
	require.NoError(t, w.rotate(plan.Step{Why: plan.WhyCANew}))
	for _, m := range w.members {
		m.trusts = "A+B"
	}
	require.NoError(t, w.rotate(plan.Step{Why: plan.WhyCAIssues}))
	w.members["demo-0"].serves = "B"
	o := w.observe()
	for i := range o.Members {
		if o.Members[i].Name == "demo-1" {
			o.Members[i].Pod.Trust = "" // a Pod of an earlier operator version records nothing
		}
	}
	p := Plan(c, o)
	require.Equal(t, []string{"RestartMember demo-1", "RestartMember demo-2", "RotateCA "}, summary(p)[:3])
	require.Equal(t, plan.WhySourceServed, p.Steps[0].Why)
	require.Equal(t, plan.WhyCARetired, p.Steps[2].Why)

	w.members["demo-2"].pod, w.members["demo-2"].up = false, false
	p = Plan(c, w.observe())
	require.Equal(t, []string{"StartMember demo-2", "RestartMember demo-1", "RotateCA "}, summary(p)[:3])
	converge(t, c, w)
	require.Nil(t, w.observe().CA)
}

// Members that join during a change of source mount what the source that issues then
// gives, and are trusted at every stage.
func TestMembersJoinDuringASourceChange(t *testing.T) {
	for _, stage := range []plan.Why{plan.WhyCANew, plan.WhyCAIssues, plan.WhyCARetired} {
		c, w := sourceWorld()
		for _, why := range []plan.Why{plan.WhyCANew, plan.WhyCAIssues, plan.WhyCARetired} {
			require.NoError(t, w.rotate(plan.Step{Why: why}))
			for _, m := range w.members {
				w.mount(m) // as the pass's restarts leave them
			}
			if why == stage {
				break
			}
		}
		c.Replicas = 4
		converge(t, c, w)
		require.Equal(t, "B@B", w.members["demo-3"].trust(), "joined at %s", stage)
		require.Nil(t, w.observe().CA)
	}
}
