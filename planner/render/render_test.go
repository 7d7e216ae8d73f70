package render

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/planner"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

func pre(k plan.PreconditionKind, member string) plan.Precondition {
	return plan.Precondition{Kind: k, Member: member}
}

// fixtures cover each way a plan is shown: steps of every column, a transfer of
// leadership, an empty plan, a refusal, and text that needs escaping in Markdown.
func fixtures() []Cluster {
	scale := plan.Plan{FormatVersion: plan.FormatVersion, ID: "3f0c9a1b2d4e", Generation: 2, Fingerprint: "0123456789abcdef",
		Steps: []plan.Step{
			{Action: plan.AddLearner, Member: "demo-3", Precondition: pre(plan.PreClusterHealthy, ""), Why: plan.WhyScaleUp, Reason: "spec.replicas 3 -> 4: member demo-3 joins as a learner"},
			{Action: plan.StartMember, Member: "demo-3", Version: "3.6.16", Precondition: pre(plan.PreNone, ""), Why: plan.WhyLearnerPodGone, Reason: "learner demo-3 needs its Pod (spec.replicas 5, 3 voters)"},
			{Action: plan.PromoteLearner, Member: "demo-3", Precondition: pre(plan.PreLearnerCaughtUp, "demo-3"), Why: plan.WhyLearnerToVoter, Reason: "learner demo-3 becomes a voter (spec.replicas 5, 3 voters)"},
		}}
	upgrade := plan.Plan{FormatVersion: plan.FormatVersion, ID: "a1b2c3d4e5f6", Generation: 7, Fingerprint: "fedcba9876543210",
		Steps: []plan.Step{
			{Action: plan.UpgradeMember, Member: "prod-1", Version: "3.6.16", Precondition: pre(plan.PreClusterHealthy, ""), Why: plan.WhyVersionChanged, Reason: "spec.version 3.5.35 -> 3.6.16"},
			{Action: plan.TransferLeadership, Member: "prod-0", Target: "prod-1", Precondition: pre(plan.PreMemberHealthy, "prod-1"), Why: plan.WhyLeaderRestartsLast, Reason: "prod-0 leads and is restarted last"},
			{Action: plan.RemoveMember, Member: "prod-2", Precondition: pre(plan.PreQuorumWithout, "prod-2"), Why: plan.WhyScaleDown, Reason: "a | pipe, a <tag>\nand a line break"},
		}}
	blocked := plan.Plan{FormatVersion: plan.FormatVersion, ID: "0badc0ffee00", Generation: 1, Fingerprint: "1111111111111111",
		Blocked: &plan.Blocker{Reason: plan.BlockQuorumLost, Message: "2 of 3 voting members lost their data, so the rest cannot form a quorum: restore the cluster from a backup"}}
	empty := plan.Plan{FormatVersion: plan.FormatVersion, ID: "e3b0c44298fc", Generation: 1, Fingerprint: "2222222222222222"}
	scaleReview := &planner.Review{VotersBefore: 3, VotersAfter: 4, Steps: []planner.Risk{{Voters: 3, Up: 3}, {Voters: 3, Up: 3}, {Voters: 4, Up: 4}}}
	upgradeReview := &planner.Review{VotersBefore: 3, VotersAfter: 2, Steps: []planner.Risk{
		{Disrupts: true, Budget: true, Voters: 3, Up: 2},
		{Voters: 3, Up: 3},
		{Disrupts: true, Budget: true, Voters: 2, Up: 1, Loses: "deletes a | pipe"},
	}}
	manual := &Approval{Needed: true, Annotation: `etcdplan.io/approve: "a1b2c3d4e5f6"`, Command: "kubectl etcd approve prod -n team-a --plan a1b2c3d4e5f6"}
	return []Cluster{{Name: "demo", Plan: scale, Review: scaleReview, Approval: &Approval{}}, {Name: "team-a/prod", Plan: upgrade, Review: upgradeReview, Approval: manual},
		{Name: "broken", Plan: blocked}, {Name: "quiet", Plan: empty}}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.WriteFile(path, got, 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./planner/render -update to create it")
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs from the golden file (-want +got; -update rewrites it):\n%s", path, diff)
	}
}

func TestGolden(t *testing.T) {
	for name, fn := range map[string]func(io.Writer, ...Cluster) error{"table": Table, "markdown": Markdown, "json": JSON} {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			require.NoError(t, fn(&b, fixtures()...))
			golden(t, name, b.Bytes())
		})
	}
}

// The JSON documents decode back into the plans they came from, cluster name aside.
func TestJSONRoundTrip(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, JSON(&b, fixtures()...))
	dec := json.NewDecoder(&b)
	for _, want := range fixtures() {
		var got plan.Plan
		require.NoError(t, dec.Decode(&got))
		require.Equal(t, want.Plan, got)
		require.Equal(t, plan.FormatVersion, got.FormatVersion)
	}
	require.False(t, dec.More())
}

func TestSummary(t *testing.T) {
	c := fixtures()
	tests := []struct {
		p       plan.Plan
		current int
		want    string
	}{
		{c[0].Plan, 0, "1/3 AddLearner"},
		{c[0].Plan, 2, "3/3 PromoteLearner"},
		{c[0].Plan, 3, "3/3 Done"},
		{c[0].Plan, -1, "1/3 AddLearner"},
		{c[1].Plan, 1, "2/3 TransferLeadership"},
		{c[2].Plan, 0, "Blocked: QuorumLost"},
		{c[3].Plan, 0, "No changes"},
	}
	for _, tt := range tests {
		require.Equal(t, tt.want, Summary(tt.p, tt.current))
	}
}

// A plan that waits for approval at a later step says so, and that the steps before it run.
func TestApprovalAtAStep(t *testing.T) {
	var b strings.Builder
	approval(&b, Approval{Needed: true, Annotation: "etcdplan.io/approve: \"x\"", Command: "kubectl etcd approve demo --plan x", At: "step 8, the first after which members refuse plain-text clients"})
	require.Contains(t, b.String(), "the plan runs up to step 8, the first after which members refuse plain-text clients, which waits for approval")
	b.Reset()
	approval(&b, Approval{Needed: true, Annotation: "etcdplan.io/approve: \"x\"", Command: "kubectl etcd approve demo --plan x"})
	require.Contains(t, b.String(), "the plan runs only once approved")
}
