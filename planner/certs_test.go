package planner

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/plan"
)

// A certificate due for renewal is renewed, one step per Secret, right after the repairs
// that restore quorum: nothing restarts, and a plan of long rolls must not hold it up. A
// renewed certificate that members do not serve yet keeps its step, which waits for them.
func TestCertificatesAreRenewedWithoutRestarts(t *testing.T) {
	c := cluster(3, "3.6.16")
	w := running(c, 3, c.Version)
	w.renewals = []Renewal{{Secret: "demo-server-tls"}, {Secret: "demo-1-peer-tls", Unserved: true}}
	p := Plan(c, w.observe())
	require.Equal(t, []string{"RenewCertificate ", "RenewCertificate "}, summary(p))
	require.Equal(t, "demo-server-tls", p.Steps[0].Secret)
	require.Equal(t, plan.WhyCertificateDue, p.Steps[0].Why)
	require.Equal(t, plan.WhyCertificateUnserved, p.Steps[1].Why)
	require.Contains(t, p.Steps[1].Reason, "demo-1-peer-tls was renewed")
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
