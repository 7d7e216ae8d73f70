package planner

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/plan"
)

// A certificate due for renewal is renewed, one step per Secret, every one due first, then
// those that members mount are awaited until the members serve them: nothing restarts. It
// comes right after the repairs that restore quorum: a plan of long rolls must not hold it
// up.
func TestCertificatesAreRenewedWithoutRestarts(t *testing.T) {
	c := cluster(3, "3.6.16")
	w := running(c, 3, c.Version)
	w.renewals = []Renewal{{Secret: "demo-server-tls", Mounted: true}, {Secret: "demo-operator-tls"},
		{Secret: "demo-1-peer-tls", Mounted: true, Unserved: true}}
	p := Plan(c, w.observe())
	var got []string
	for _, s := range p.Steps {
		got = append(got, string(s.Action)+" "+s.Subject())
	}
	require.Equal(t, []string{"RenewCertificate demo-server-tls", "RenewCertificate demo-operator-tls",
		"AwaitCertificate demo-server-tls", "AwaitCertificate demo-1-peer-tls"}, got)
	require.Equal(t, plan.WhyCertificateDue, p.Steps[0].Why)
	require.Equal(t, plan.WhyCertificateUnserved, p.Steps[2].Why)
	require.Contains(t, p.Steps[3].Reason, "demo-1-peer-tls was renewed")
	converge(t, c, w)
	require.Empty(t, w.renewals)

	upgrade := cluster(3, "3.6.17")
	w.renewals = []Renewal{{Secret: "demo-server-tls"}}
	p = Plan(upgrade, w.observe())
	require.Equal(t, plan.RenewCertificate, p.Steps[0].Action, "before a roll")
	require.Equal(t, plan.UpgradeMember, p.Steps[1].Action)

	w.members["demo-1"].pod, w.members["demo-1"].up = false, false
	p = Plan(c, w.observe())
	require.Equal(t, []string{"StartMember demo-1", "RenewCertificate "}, summary(p), "after a voter's repair")

	p = Plan(c, (&world{cluster: name, members: map[string]*wmember{}, renewals: w.renewals}).observe())
	require.Equal(t, []string{"CreateSeed demo-0", "RenewCertificate "}, summary(p)[:2], "a cluster that never formed is seeded first")
}

// A certificate's steps name its Secret, and plans of them differ by it.
func TestCertificateStepsNameTheirSecret(t *testing.T) {
	c := cluster(3, "3.6.16")
	w := running(c, 3, c.Version)
	w.renewals = []Renewal{{Secret: "demo-server-tls"}}
	a := Plan(c, w.observe())
	w.renewals = []Renewal{{Secret: "demo-client-tls"}}
	b := Plan(c, w.observe())
	require.Equal(t, "demo-server-tls", a.Steps[0].Subject())
	require.NotEqual(t, a.ID, b.ID)
}

// Certificates that expired cut members off from the operator, or from each other: the
// renewals come first even when no member answers, since they need no answer from etcd.
func TestExpiredCertificatesAreRenewedWhenNoMemberAnswers(t *testing.T) {
	c := cluster(3, "3.6.16")
	w := running(c, 3, c.Version)
	for _, m := range w.members {
		m.up = false
	}
	w.renewals = []Renewal{{Secret: "demo-server-tls", Mounted: true}, {Secret: "demo-operator-tls"}}
	p := Plan(c, w.observe())
	require.Nil(t, p.Blocked)
	require.Equal(t, plan.RenewCertificate, p.Steps[0].Action)
}
