package controller

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

func steps(actions ...string) []plan.Step {
	out := make([]plan.Step, 0, len(actions))
	for _, a := range actions {
		out = append(out, plan.Step{Action: plan.Action(a), Member: "m", Reason: "r " + a})
	}
	return out
}

func TestDoneUpToFollowsTheRecordedPlan(t *testing.T) {
	rec := newRecord(plan.Plan{ID: "p1", Steps: steps("AddLearner", "StartMember", "PromoteLearner")}, time.Unix(0, 0))
	require.Equal(t, "1/3 AddLearner", rec.Summary)

	k, ok := doneUpTo(rec, plan.Plan{Steps: steps("AddLearner", "StartMember", "PromoteLearner")})
	require.True(t, ok)
	require.Equal(t, 0, k, "nothing done yet")

	fresh := plan.Plan{Steps: steps("PromoteLearner")}
	fresh.Steps[0].MemberID = "8e9e05c52164694d"
	k, ok = doneUpTo(rec, fresh)
	require.True(t, ok)
	require.Equal(t, 2, k, "two steps took effect")
	require.Equal(t, "8e9e05c52164694d", rec.Steps[2].MemberID, "the learner's ID, unknown when the plan was made, is recorded")

	for _, differs := range []func(s *plan.Step){
		func(s *plan.Step) { s.Precondition = plan.Precondition{Kind: plan.PreNone} },
		func(s *plan.Step) { s.MemberID = "91bc3c398fb3c146" },
		func(s *plan.Step) { s.Reason = "another reason" },
	} {
		other := plan.Plan{Steps: steps("PromoteLearner")}
		other.Steps[0].MemberID = "8e9e05c52164694d"
		differs(&other.Steps[0])
		_, ok = doneUpTo(rec, other)
		require.False(t, ok, "a step that differs in any field supersedes the plan: %+v", other.Steps[0])
	}

	k, ok = doneUpTo(rec, plan.Plan{})
	require.True(t, ok)
	require.Equal(t, 3, k, "an empty plan finishes the recorded one")

	_, ok = doneUpTo(rec, plan.Plan{Steps: steps("RemoveMember")})
	require.False(t, ok, "another plan supersedes it")

	rec.Current = 2
	_, ok = doneUpTo(rec, plan.Plan{Steps: steps("StartMember", "PromoteLearner")})
	require.False(t, ok, "a step that took effect cannot come back")
}

// A plan recorded by a version whose steps had no reason code (formatVersion 1) is read and
// followed: its steps take the fresh plan's codes as they are found done, and it keeps its
// ID, so an approval given to it stands.
func TestRecordOfFormatVersion1IsFollowed(t *testing.T) {
	var rec v1alpha1.PlanStatus
	require.NoError(t, json.Unmarshal([]byte(`{"formatVersion":1,"id":"0ld1d0ld1d00","generation":2,"phase":"Running",
		"steps":[{"action":"AddLearner","member":"m","precondition":{"kind":"None"},"reason":"r AddLearner"},
		{"action":"StartMember","member":"m","precondition":{"kind":"None"},"reason":"r StartMember"}]}`), &rec))
	fresh := plan.Plan{Steps: steps("StartMember")}
	fresh.Steps[0].Why, fresh.Steps[0].Precondition = plan.WhyLearnerPodGone, plan.Precondition{Kind: plan.PreNone}
	k, ok := doneUpTo(&rec, fresh)
	require.True(t, ok)
	require.Equal(t, 1, k)
	require.Equal(t, plan.WhyLearnerPodGone, rec.Steps[1].Why)
	require.Equal(t, "0ld1d0ld1d00", rec.ID)
}

func TestFinishKeepsTheLastPlans(t *testing.T) {
	st := &v1alpha1.EtcdClusterStatus{}
	for i := 0; i < historyLimit+3; i++ {
		st.Plan = newRecord(plan.Plan{ID: string(rune('a' + i)), Steps: steps("StopMember")}, time.Unix(int64(i), 0))
		finish(st, st.Plan, v1alpha1.PlanSucceeded, "", time.Unix(int64(i+1), 0))
	}
	require.Nil(t, st.Plan)
	require.Len(t, st.History, historyLimit)
	require.Equal(t, string(rune('a'+historyLimit+2)), st.History[0].ID, "newest first")
	require.Equal(t, "0/1", st.History[0].Steps)
	require.Equal(t, "StopMember m", st.History[0].Actions)
}
