package planner

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// brief renders a step's risk as "Action member disrupts up/voters budget loses" for
// compact expectations.
func brief(t *testing.T, c Desired, w *world) (Review, []string) {
	t.Helper()
	o := w.observe()
	p := Plan(c, o)
	require.Nil(t, p.Blocked)
	r := ReviewPlan(c, o, p)
	require.Len(t, r.Steps, len(p.Steps))
	out := []string{}
	for i, x := range summary(p) {
		k := r.Steps[i]
		x += " " + map[bool]string{true: "disrupts", false: "-"}[k.Disrupts]
		x += " " + map[bool]string{true: "budget", false: "-"}[k.Budget]
		x += " " + map[bool]string{true: "loses", false: "-"}[k.Loses != ""]
		if k.Disrupts || k.Budget {
			x += " " + string(rune('0'+k.Up)) + "/" + string(rune('0'+k.Voters))
		}
		out = append(out, x)
	}
	return r, out
}

// reconfigured is n healthy voters whose spec's configuration changed: each restarts.
func reconfigured(n int) (Desired, *world) {
	c := cluster(n, "3.6.16")
	w := running(c, n, "3.6.16")
	c.ConfigHash = "cfg-2"
	return c, w
}

func TestReviewSaysWhatEachStepRisks(t *testing.T) {
	t.Run("a rolling restart of three leaves no failure to spare", func(t *testing.T) {
		c, w := reconfigured(3)
		r, got := brief(t, c, w)
		require.Equal(t, []string{
			"RestartMember demo-1 disrupts budget - 2/3",
			"RestartMember demo-2 disrupts budget - 2/3",
			"TransferLeadership demo-0>demo-1 - - -",
			"RestartMember demo-0 disrupts budget - 2/3",
		}, got)
		require.Equal(t, 3, r.VotersBefore)
		require.Equal(t, 3, r.VotersAfter)
	})
	t.Run("five restart with one failure to spare", func(t *testing.T) {
		c, w := reconfigured(5)
		_, got := brief(t, c, w)
		require.Equal(t, "RestartMember demo-1 disrupts - - 4/5", got[0])
	})
	t.Run("scale 5 to 3 deletes the volumes of the members that left", func(t *testing.T) {
		c := cluster(3, "3.6.16")
		r, got := brief(t, c, running(c, 5, "3.6.16"))
		require.Equal(t, []string{
			"RemoveMember demo-4 disrupts - - 4/4",
			"DeleteMember demo-4 - - loses",
			"RemoveMember demo-3 disrupts - - 3/3",
			"DeleteMember demo-3 - - loses",
		}, got)
		require.Equal(t, 5, r.VotersBefore)
		require.Equal(t, 3, r.VotersAfter)
		require.Contains(t, r.Steps[1].Loses, "deletes the Pod and volume of demo-4")
	})
	t.Run("scale 3 to 2 leaves no failure to spare", func(t *testing.T) {
		c := cluster(2, "3.6.16")
		_, got := brief(t, c, running(c, 3, "3.6.16"))
		require.Equal(t, "RemoveMember demo-2 disrupts budget - 2/2", got[0])
	})
	t.Run("one member is unavailable while it restarts", func(t *testing.T) {
		c, w := reconfigured(1)
		r, got := brief(t, c, w)
		require.Equal(t, []string{"RestartMember demo-0 disrupts budget - 0/1"}, got)
		require.Equal(t, -1, r.Steps[0].Spare())
	})
	t.Run("a bootstrap risks nothing", func(t *testing.T) {
		c := cluster(3, "3.6.16")
		r, got := brief(t, c, empty(c))
		for _, s := range got {
			require.Regexp(t, ` - - -$`, s)
		}
		require.Equal(t, 0, r.VotersBefore)
		require.Equal(t, 3, r.VotersAfter)
	})
	t.Run("a recovery from quorum loss may lose writes", func(t *testing.T) {
		c := cluster(3, "3.6.16")
		r, got := brief(t, c, oneSurvivorOfThree(c))
		require.Equal(t, "ForceNewCluster demo-0 - - loses", got[0])
		require.Contains(t, r.Steps[0].Loses, "writes that demo-0 did not receive are lost")
	})
}
