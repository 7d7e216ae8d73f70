package planner

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/plan"
)

// What a change of spec.tls's source (Auto to Provided, say) on a running cluster gave
// before it was a plan of its own: the Pod's configuration and its trust bundle both change
// at once, so each member restarts straight into the new source, trusting its CA "S" alone
// and presenting S's peer certificate, while the members not yet restarted trust "A" alone.
// The first restart cuts that member off from its peers; the operator, dialing with the new
// source's certificate, is refused by every member that has not restarted.
func TestSourceChangeWasRestartsStraightIntoTheNewSource(t *testing.T) {
	c, w := tlsWorld(3)
	c.ConfigHash = "cfg-tls-provided"
	o := w.observe()
	o.Trust = "S"
	p := Plan(c, o)
	require.Equal(t, []string{"RestartMember demo-1", "RestartMember demo-2", "TransferLeadership demo-0>demo-1", "RestartMember demo-0"}, summary(p))
	require.Equal(t, []plan.Why{plan.WhyTrustChanged, plan.WhyTrustChanged, plan.WhyLeaderRestartsLast, plan.WhyTrustChanged}, whys(p))
}
