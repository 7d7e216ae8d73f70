package planner

import (
	"fmt"
	"strings"

	"github.com/etcdplan/etcdplan/api/plan"
)

// Review is what a plan puts at risk, for the people who approve it: the voters before and
// after, and for each step what it disrupts, deletes or may lose.
type Review struct {
	VotersBefore, VotersAfter int
	Steps                     []Risk
}

// Risk is one step's share of a plan's risk.
type Risk struct {
	// Disrupts: a member stops serving while the step runs (it restarts, is defragmented,
	// stops, or leaves etcd).
	Disrupts bool
	// Voters and Up are the voters and those that answer at the step's worst moment: while
	// it runs, or once it is done when it changes the membership.
	Voters, Up int
	// Budget: the step lowers how many voters may fail before quorum is lost, to none or
	// below (Spare), in a cluster that holds data.
	Budget bool
	// Loses says what data the step deletes or may lose; empty when none.
	Loses string
}

// Spare is how many more voters may fail at the step's worst moment before quorum is
// lost; below 0, the cluster does not answer writes then.
func (r Risk) Spare() int { return r.Up - quorum(r.Voters) }

// ReviewPlan replays a plan on the state it was made from, step by step as Plan made it.
func ReviewPlan(d Desired, o Observed, p plan.Plan) Review {
	m := newModel(d, o)
	r := Review{VotersBefore: m.countVoters(), Steps: make([]Risk, 0, len(p.Steps))}
	for _, s := range p.Steps {
		all, up, _ := m.voters()
		risk := m.during(s, o, all, up)
		if mm := m.get(s.Member); mm != nil {
			risk.Loses = m.retains(d, s, mm, risk.Loses)
		}
		m.satisfy(s.Precondition)
		m.apply(s, d)
		if a, u, _ := m.voters(); s.Action.ChangesVoters() && u-quorum(a) < risk.Spare() {
			risk.Voters, risk.Up = a, u
		}
		risk.Budget = all > 0 && risk.Spare() <= 0 && risk.Spare() < up-quorum(all)
		r.Steps = append(r.Steps, risk)
	}
	r.VotersAfter = m.countVoters()
	return r
}

// during assesses a step while it runs, on the model before it is applied (all voters, up
// of them answering).
func (m *model) during(s plan.Step, o Observed, all, up int) Risk {
	r := Risk{Voters: all, Up: up, Loses: loses(s, o)}
	mm := m.get(s.Member)
	if mm == nil || !s.Action.Disrupts() {
		return r
	}
	r.Disrupts = mm.up || mm.silent
	if mm.voter() && mm.up {
		r.Up--
	}
	if mm.voter() && s.Action == plan.RemoveMember {
		r.Voters--
	}
	return r
}

// retains adds to what a step loses the claims it keeps: a recovery keeps those of the other
// members that held data, and a retained member's leftover step deletes its Pod alone.
func (m *model) retains(d Desired, s plan.Step, mm *member, loses string) string {
	switch {
	case s.Action == plan.ForceNewCluster || s.Action == plan.RestoreFromBackup:
		var kept []string
		for _, x := range m.keptBy(d, mm) {
			kept = append(kept, fmt.Sprintf("%s (member %s)", x.name, x.pvcID))
		}
		if len(kept) > 0 {
			loses += fmt.Sprintf("; the volume claims of %s, which held data too, are kept (retained) and never deleted by the operator: "+
				"writes only they received can be recovered from them by hand (docs/operations.md)", strings.Join(kept, ", "))
		}
	case s.Action == plan.DeleteMember && mm.retained:
		loses = fmt.Sprintf("deletes the Pod of %s, which left etcd's membership in a recovery; its volume claim is kept (retained)", s.Member)
	}
	return loses
}

// loses says what data a step deletes or may lose.
func loses(s plan.Step, o Observed) string {
	switch s.Action {
	case plan.DeleteMember:
		return fmt.Sprintf("deletes the Pod and volume of %s, which is out of etcd's membership (the members that stay hold the data)", s.Member)
	case plan.Compact:
		return "drops the revisions before the current one: reads and watches of older revisions fail; every key keeps its value"
	case plan.ForceNewCluster:
		return fmt.Sprintf("writes that %s did not receive are lost, and every other member leaves etcd's membership", s.Member)
	case plan.RestoreFromBackup:
		return "the cluster starts anew from " + o.DescribeBackup(s.Backup) + ": writes after it are lost"
	}
	return ""
}
