package controller

import (
	"fmt"
	"strings"
	"time"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/planner"
	"github.com/etcdplan/etcdplan/planner/render"
)

// historyLimit is how many finished plans status.history keeps.
const historyLimit = 10

// doneUpTo returns k when the fresh plan is exactly the recorded plan's steps from k on
// (planner.DoneUpTo): a recorded step whose precondition, member ID or reason a fresh plan
// would not give is superseded, never run. Member IDs the recorded plan could not know yet
// (a learner's, before it was added) are filled in.
func doneUpTo(rec *v1alpha1.PlanStatus, fresh plan.Plan) (int, bool) {
	k, ok := planner.DoneUpTo(rec.Steps, int(rec.Current), fresh)
	if ok {
		copy(rec.Steps[k:], fresh.Steps)
	}
	return k, ok
}

// shownUpTo returns k when the look shows the recorded steps before k done, and whether
// the fresh plan is the recorded steps from k on. Done are the steps before the fresh
// plan's exact rest (doneUpTo), else the leading space steps whose effects show on their
// own (planner.SpaceStepsShown): the plan is then superseded after them.
func shownUpTo(rec *v1alpha1.PlanStatus, o *observation, fresh plan.Plan) (int, bool) {
	if k, ok := doneUpTo(rec, fresh); ok {
		return k, true
	}
	// The planner is entered again: the fresh plan says what is left to do, not which
	// recorded steps this look shows done when it differs from them.
	k := int(rec.Current) + planner.SpaceStepsShown(o.desired, rec.Steps[rec.Current:], o.Observed)
	return k, k == len(rec.Steps)
}

// newRecord turns a fresh plan into the plan recorded in status.
func newRecord(p plan.Plan, now time.Time) *v1alpha1.PlanStatus {
	rec := &v1alpha1.PlanStatus{Plan: p, Phase: v1alpha1.PlanRunning, CreatedAt: v1alpha1.At(now)}
	if p.Blocked != nil {
		rec.Phase = v1alpha1.PlanBlocked
	}
	rec.Summary = summary(rec)
	return rec
}

// summary is "k/n Action" for kubectl get, marked while the plan awaits approval.
func summary(rec *v1alpha1.PlanStatus) string {
	s := render.Summary(rec.Plan, int(rec.Current))
	if rec.Phase == v1alpha1.PlanAwaitingApproval {
		s += " (awaiting approval)"
	}
	return s
}

// progress returns the record of step i, growing the list as steps start.
func progress(rec *v1alpha1.PlanStatus, i int) *v1alpha1.StepProgress {
	for len(rec.Progress) <= i {
		rec.Progress = append(rec.Progress, v1alpha1.StepProgress{State: v1alpha1.StepPending})
	}
	return &rec.Progress[i]
}

// finish moves a plan into the history with its outcome, newest first.
func finish(st *v1alpha1.EtcdClusterStatus, rec *v1alpha1.PlanStatus, phase v1alpha1.PlanPhase, msg string, now time.Time) {
	actions := make([]string, 0, len(rec.Steps))
	for _, s := range rec.Steps {
		actions = append(actions, strings.TrimSpace(string(s.Action)+" "+s.Member))
	}
	r := v1alpha1.PlanRecord{
		ID: rec.ID, Phase: phase, Steps: fmt.Sprintf("%d/%d", rec.Current, len(rec.Steps)),
		Actions: shorten(strings.Join(actions, ", "), 300), Message: msg,
		StartedAt: rec.CreatedAt, FinishedAt: v1alpha1.At(now),
	}
	if rec.Blocked != nil {
		r.Message = rec.Blocked.Message
	}
	st.History = append([]v1alpha1.PlanRecord{r}, st.History...)
	if len(st.History) > historyLimit {
		st.History = st.History[:historyLimit]
	}
	st.Plan = nil
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// supersededWhy says why a plan was superseded, and names the step it stopped at when that
// step's effect was applied but not shown done by the plan: it may have happened, and the
// next plan starts from what the cluster shows (a recovery's outcome is in
// status.lastRecovery). A recovery the plan waited for says how it ended.
func supersededWhy(c *v1alpha1.EtcdCluster, rec *v1alpha1.PlanStatus) string {
	why := "the cluster or its spec changed"
	i := int(rec.Current)
	if l := c.Status.LastRecovery; i > 0 && l != nil && l.FinishedAt != nil && isRecovery(rec.Steps[i-1], l) {
		s := rec.Steps[i-1]
		return why + fmt.Sprintf(" after step %d/%d %s %s took effect: cluster %s answers through a quorum", i, len(rec.Steps), s.Action, s.Subject(), l.ClusterID)
	}
	if i < len(rec.Steps) && i < len(rec.Progress) && rec.Progress[i].AppliedAt != nil {
		s := rec.Steps[i]
		why += fmt.Sprintf(" after step %d/%d %s %s was applied; whether it took effect, the cluster shows", i+1, len(rec.Steps), s.Action, s.Subject())
	}
	return why
}
