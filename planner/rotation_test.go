package planner

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/plan"
)

// tlsWorld is a running cluster of n members with client and peer TLS from the cluster's
// own CA "A", which issued every certificate and which every member trusts.
func tlsWorld(n int) (Desired, *world) {
	c := withTLS(cluster(n, "3.6.16"), true, true)
	w := running(c, n, "3.6.16")
	w.ca = newCA(w, c)
	return c, w
}

func whys(p plan.Plan) []plan.Why {
	out := []plan.Why{}
	for _, s := range p.Steps {
		out = append(out, s.Why)
	}
	return out
}

// A rotation asked of a running cluster is one plan of three passes: the new CA trusted
// beside the old (a restart per member, the leader last), every certificate issued again
// from the new CA (no restart, each awaited where members serve it), the old CA out of the
// trust bundle (a restart per member). The simulated cluster checks after every step that
// no member, and neither the operator nor an application, is presented a certificate it
// does not trust.
func TestCARotationInThreePasses(t *testing.T) {
	c, w := tlsWorld(3)
	w.ca.asked = true
	p := Plan(c, w.observe())
	require.Equal(t, []string{
		"RotateCA ", "RestartMember demo-1", "RestartMember demo-2", "TransferLeadership demo-0>demo-1", "RestartMember demo-0",
		"RotateCA ",
		"RenewCertificate ", "RenewCertificate ", "RenewCertificate ", "RenewCertificate ", "RenewCertificate ", "RenewCertificate ",
		"AwaitCertificate ", "AwaitCertificate ", "AwaitCertificate ", "AwaitCertificate ",
		"RotateCA ", "RestartMember demo-0", "RestartMember demo-2", "TransferLeadership demo-1>demo-0", "RestartMember demo-1",
		"RotateCA ",
	}, summary(p))
	require.Equal(t, []plan.Why{
		plan.WhyCANew, plan.WhyTrustBoth, plan.WhyTrustBoth, plan.WhyLeaderRestartsLast, plan.WhyTrustBoth,
		plan.WhyCAIssues,
		plan.WhyCARotated, plan.WhyCARotated, plan.WhyCARotated, plan.WhyCARotated, plan.WhyCARotated, plan.WhyCARotated,
		plan.WhyCertificateUnserved, plan.WhyCertificateUnserved, plan.WhyCertificateUnserved, plan.WhyCertificateUnserved,
		plan.WhyCARetired, plan.WhyTrustNew, plan.WhyTrustNew, plan.WhyLeaderRestartsLast, plan.WhyTrustNew,
		plan.WhyCADropped,
	}, whys(p))
	require.Equal(t, "demo-ca", p.Steps[0].Secret)
	require.Equal(t, plan.PreClusterHealthy, p.Steps[0].Precondition.Kind)

	converge(t, c, w)
	require.Nil(t, w.observe().CA)
	for _, m := range w.members {
		require.Equal(t, "B", m.trusts, m.name)
	}
	for secret, issuer := range w.ca.leaves {
		require.Equal(t, "B", issuer, secret)
	}
	require.Empty(t, Plan(c, w.observe()).Steps)
}

// Each pass waits until every member's Pod shows the trust bundle it needs: a member whose
// Pod records another (or, during a pass, none) restarts first; the new CA issues only then.
func TestCARotationWaitsForEveryMemberToTrustTheNewCA(t *testing.T) {
	c, w := tlsWorld(3)
	w.ca.asked = true
	require.NoError(t, w.rotate(plan.Step{Why: plan.WhyCANew}))
	w.members["demo-1"].trusts = "A+B"
	w.members["demo-2"].trusts = "" // a Pod of an earlier operator version
	p := Plan(c, w.observe())
	require.Equal(t, []string{"RestartMember demo-2", "TransferLeadership demo-0>demo-1", "RestartMember demo-0", "RotateCA "}, summary(p)[:4])

	// A member whose Pod is Terminating while its etcd runs on (its node cut off) cannot be
	// restarted, and still trusts the old CA alone: the pass waits until the Pod is gone
	// and the member runs in a new one (members in memory: until it is gone, and replaced).
	for _, m := range w.members {
		m.trusts = "A+B"
	}
	w.members["demo-2"].trusts, w.members["demo-2"].deleting = "A", true
	require.Equal(t, []string{"StartMember demo-2", "RotateCA "}, summary(Plan(c, w.observe()))[:2])
	mem := c
	mem.Memory = true
	w.memory = true
	for _, s := range Plan(mem, w.observe()).Steps {
		require.NotEqual(t, plan.RotateCA, s.Action, "%v", s)
	}
	w.memory = false
	w.members["demo-2"].deleting = false

	// Once all trust both, the next step is the new CA issuing.
	w.members["demo-2"].pod, w.members["demo-2"].trusts = true, "A+B"
	require.Equal(t, plan.WhyCAIssues, Plan(c, w.observe()).Steps[0].Why)

	// A member whose Pod is lost in pass 1 gets one that mounts the bundle as it stands:
	// it is not restarted again.
	w.members["demo-1"].pod, w.members["demo-1"].up = false, false
	p = Plan(c, w.observe())
	require.Equal(t, []string{"StartMember demo-1", "RotateCA "}, summary(p)[:2])
	converge(t, c, w)
}

// A trust bundle that changed otherwise (a user's ca.crt with a second CA, or without the
// old one) restarts each member to read it, the leader last; Pods of an earlier version,
// which record no bundle, are left as they are.
func TestMembersRestartToReadATrustBundleThatChanged(t *testing.T) {
	c := withTLS(cluster(3, "3.6.16"), true, true)
	w := running(c, 3, "3.6.16")
	o := w.observe()
	o.Trust = "new"
	require.Empty(t, Plan(c, o).Steps, "no Pod records its bundle")
	for i := range o.Members {
		o.Members[i].Pod.Trust = "old"
	}
	p := Plan(c, o)
	require.Equal(t, []string{"RestartMember demo-1", "RestartMember demo-2", "TransferLeadership demo-0>demo-1", "RestartMember demo-0"}, summary(p))
	require.Equal(t, plan.WhyTrustChanged, p.Steps[0].Why)

	// Two voters cannot restart one of theirs: a third joins first.
	c2 := withTLS(cluster(2, "3.6.16"), true, true)
	w2 := running(c2, 2, "3.6.16")
	o2 := w2.observe()
	o2.Trust = "new"
	for i := range o2.Members {
		o2.Members[i].Pod.Trust = "old"
	}
	require.Equal(t, []string{"AddLearner demo-2"}, summary(Plan(c2, o2))[:1])
}

// A rotation waits while TLS is switched on or off: members restart for the switch first.
func TestCARotationWaitsForATLSSwitch(t *testing.T) {
	c, w := tlsWorld(3)
	w.ca.asked = true
	w.members["demo-1"].listen = plan.Listen{Client: plan.ListenBoth, Peer: plan.ListenBoth}
	w.members["demo-1"].peerAlt = true
	p := Plan(c, w.observe())
	require.NotEqual(t, plan.RotateCA, p.Steps[0].Action)
	require.Equal(t, plan.WhyPlainTextOff, p.Steps[0].Why)
}

// A member that joins during a rotation mounts the trust bundle as it stands and gets its
// peer certificate from the CA that issues then: every member trusts it at every stage.
func TestMembersJoinDuringARotation(t *testing.T) {
	for _, stage := range []plan.Why{plan.WhyCANew, plan.WhyCAIssues, plan.WhyCARetired} {
		c, w := tlsWorld(3)
		w.ca.asked = true
		for _, why := range []plan.Why{plan.WhyCANew, plan.WhyCAIssues, plan.WhyCARetired} {
			require.NoError(t, w.rotate(plan.Step{Why: why}))
			for _, m := range w.members {
				m.trusts = strings.Join(w.ca.trust, "+") // as the pass's restarts leave them
			}
			if why == plan.WhyCAIssues {
				for l := range w.ca.leaves {
					w.ca.leaves[l] = w.ca.issuing // pass 2 done
				}
			}
			if why == stage {
				break
			}
		}
		c.Replicas = 4
		converge(t, c, w)
		require.Equal(t, strings.Join(w.ca.trust, "+"), w.members["demo-3"].trusts, "joined at %s", stage)
		require.Nil(t, w.observe().CA)
	}
}
