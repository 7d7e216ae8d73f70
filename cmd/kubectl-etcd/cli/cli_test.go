package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/planner"
)

const (
	examples = "../../../examples/"
	basic    = examples + "basic/etcdcluster.yaml"
	healthy  = examples + "observed/three-healthy.json"
)

type result struct {
	code           int
	stdout, stderr string
}

// run runs the command in-process, with stdin when the test gives one.
func run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	c := &CLI{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errOut}
	code := c.Run(context.Background(), args)
	return result{code, out.String(), errOut.String()}
}

func TestExitCodes(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		code     int
		stdout   string // a line the output contains
		stderr   string // a line stderr contains
		noStderr bool
	}{
		{"no changes", []string{"plan", "-f", basic, "--observed", healthy, "--detailed-exitcode"}, ExitOK, "No changes", "", true},
		{"changes, detailed", []string{"plan", "-k", examples + "scale-out", "--observed", healthy, "--detailed-exitcode"}, ExitChanges, "AddLearner", "", true},
		{"changes, not detailed", []string{"plan", "-k", examples + "scale-out", "--observed", healthy}, ExitOK, "PromoteLearner  demo-4", "", true},
		{"TLS from the start", []string{"plan", "-k", examples + "tls", "--observed", examples + "observed/empty.json"}, ExitOK, "CreateSeed", "", true},
		{"long flag names", []string{"plan", "--filename", basic, "--observed", healthy, "--output", "markdown"}, ExitOK, "No changes.", "", true},
		{"blocked plan", []string{"plan", "-f", "testdata/downgrade.yaml", "--observed", healthy, "--detailed-exitcode"}, ExitError,
			"blocked (DowngradeRefused)", "error: EtcdCluster demo: blocked (DowngradeRefused): member demo-0 ran 3.6.16 and etcd's cluster version is 3.6", false},
		{"bad YAML", []string{"plan", "-f", "testdata/bad.yaml", "--observed", healthy}, ExitError, "", "error: testdata/bad.yaml (document 1): ", false},
		{"unknown field", []string{"plan", "-f", "testdata/unknown-field.yaml", "--observed", healthy}, ExitError, "",
			`error: testdata/unknown-field.yaml (document 1): EtcdCluster demo: unknown field "spec.replica"`, false},
		{"invalid spec", []string{"plan", "-f", "testdata/bad-version.yaml", "--observed", healthy}, ExitError, "",
			`spec.version "v3.6.16": version must be an etcd 3.x.y release such as 3.6.16, without a leading v; spec.replicas 12: must be between 0 and 9`, false},
		{"missing file", []string{"plan", "-f", "testdata/nope.yaml", "--observed", healthy}, ExitError, "", "nope.yaml: no such file", false},
		{"missing observed", []string{"plan", "-f", basic, "--observed", "testdata/nope.json"}, ExitError, "", "nope.json: no such file", false},
		{"no manifests", []string{"plan", "--observed", healthy}, ExitError, "", "one of -f or -k is required", false},
		{"-f and -k", []string{"plan", "-f", basic, "-k", examples + "basic", "--observed", healthy}, ExitError, "", "cannot be used together", false},
		{"bad output", []string{"plan", "-f", basic, "--observed", healthy, "-o", "yaml"}, ExitError, "", `-o "yaml"`, false},
		{"unknown flag", []string{"plan", "--frobnicate"}, ExitError, "", "error: flag provided but not defined: -frobnicate", false},
		{"no EtcdCluster", []string{"plan", "-f", "testdata/two-observed.json", "--observed", healthy}, ExitError, "", "no EtcdCluster (apiVersion etcdplan.io/v1alpha1) in the manifests", false},
		{"unknown command", []string{"apply"}, ExitError, "", `unknown command "apply"`, false},
		{"no command", nil, ExitError, "", "Usage:", false},
		{"help", []string{"help"}, ExitOK, "Usage:", "", true},
		{"plan help", []string{"plan", "-h"}, ExitOK, "--detailed-exitcode", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, "", tt.args...)
			require.Equal(t, tt.code, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
			require.Contains(t, r.stdout, tt.stdout)
			require.Contains(t, r.stderr, tt.stderr)
			if tt.noStderr {
				require.Empty(t, r.stderr)
			}
		})
	}
}

// A kustomization's patch reaches the planner: the overlay asks for 5 members.
func TestKustomizePatch(t *testing.T) {
	r := run(t, "", "plan", "-k", examples+"scale-out", "--observed", healthy, "-o", "json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	p := decodePlans(t, r.stdout)[0]
	var joins []string
	for _, s := range p.Steps {
		if s.Action == plan.PromoteLearner {
			joins = append(joins, s.Member)
		}
	}
	require.Equal(t, []string{"demo-3", "demo-4"}, joins)
}

func TestStdin(t *testing.T) {
	manifest := "apiVersion: etcdplan.io/v1alpha1\nkind: EtcdCluster\nmetadata: {name: demo}\nspec: {version: 3.6.16, replicas: 1}\n"
	r := run(t, manifest, "plan", "-f", "-", "--observed", examples+"observed/empty.json", "--detailed-exitcode")
	require.Equal(t, ExitChanges, r.code, r.stderr)
	require.Contains(t, r.stdout, "CreateSeed")
	require.NotContains(t, r.stdout, "AddLearner")
}

func TestMultiCluster(t *testing.T) {
	r := run(t, "", "plan", "-f", "testdata/two-clusters.yaml", "--observed", "testdata/two-observed.json", "--detailed-exitcode")
	require.Equal(t, ExitChanges, r.code, r.stderr)
	require.Contains(t, r.stdout, "EtcdCluster team-a/demo: No changes.")
	require.Contains(t, r.stdout, "EtcdCluster team-b/demo: plan ")
	require.Contains(t, r.stdout, "CreateSeed")

	r = run(t, "", "plan", "-f", "testdata/two-clusters.yaml", "--observed", "testdata/two-observed.json", "-o", "json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	plans := decodePlans(t, r.stdout)
	require.Len(t, plans, 2)
	require.Empty(t, plans[0].Steps)
	require.Equal(t, plan.CreateSeed, plans[1].Steps[0].Action)
}

// staleObserved is three-healthy.json with its member list read from one member's own view,
// and demo-2's data lost: a linearizable list would have it removed and replaced.
func staleObserved(t *testing.T, formatVersion int) string {
	t.Helper()
	var o map[string]any
	data, err := os.ReadFile(healthy)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &o))
	o["formatVersion"] = formatVersion
	etcd := o["etcd"].(map[string]any)
	delete(etcd, "linearizable")
	for _, m := range etcd["members"].([]any) {
		if formatVersion == 1 {
			m := m.(map[string]any)
			delete(m, "answering")
			delete(m, "leader")
			m["healthy"] = true
		}
	}
	for _, m := range o["members"].([]any) {
		if m := m.(map[string]any); m["name"] == "demo-2" {
			m["pod"].(map[string]any)["dataLost"] = true
		}
	}
	out, err := json.Marshal(o)
	require.NoError(t, err)
	return writeTemp(t, string(out))
}

// On a member list not read through a quorum (a version 2 file that says so, or any version
// 1 file) the plan shows no membership step, never "No changes", says what it cannot know,
// and fails with --detailed-exitcode.
func TestStaleViewIsNotKnown(t *testing.T) {
	for _, v := range []int{2, 1} {
		r := run(t, "", "plan", "-f", basic, "--observed", staleObserved(t, v), "--detailed-exitcode")
		require.Equal(t, ExitError, r.code, "formatVersion %d:\n%s%s", v, r.stdout, r.stderr)
		require.NotContains(t, r.stdout, "No changes")
		require.NotContains(t, r.stdout, "RemoveMember")
		require.NotContains(t, r.stdout, "DeleteMember")
		require.Contains(t, r.stdout, "EtcdCluster demo: not known: etcd's member list was not read through a quorum")
		require.Contains(t, r.stderr, "error: EtcdCluster demo: not known: ")

		r = run(t, "", "plan", "-f", basic, "--observed", staleObserved(t, v), "-o", "markdown")
		require.Equal(t, ExitError, r.code)
		require.Contains(t, r.stdout, "**Not known.**")
		require.NotContains(t, r.stdout, "No changes")
	}
}

// spec.bootstrap.restore over volumes retained from an earlier cluster of the name: the
// plan is blocked, names the claims and both ways out.
func TestRestoreOverRetainedVolumes(t *testing.T) {
	r := run(t, "", "plan", "-f", "testdata/restore.yaml", "--observed", "testdata/retained.json", "--detailed-exitcode")
	require.Equal(t, ExitError, r.code, r.stdout)
	require.Contains(t, r.stderr, "blocked (RestoreOverRetainedVolumes)")
	require.Contains(t, r.stderr, "demo-0 (member 8e9e05c52164694d), demo-1 (member 91bc3c398fb3c146)")
	require.Contains(t, r.stderr, "delete those claims")
	require.Contains(t, r.stderr, "remove spec.bootstrap.restore")
}

func TestMultiClusterNeedsAMap(t *testing.T) {
	r := run(t, "", "plan", "-f", "testdata/two-clusters.yaml", "--observed", healthy)
	require.Equal(t, ExitError, r.code)
	require.Contains(t, r.stderr, "holds the observed state of one cluster and 2 clusters are planned")
}

func TestObservedMapWithoutTheCluster(t *testing.T) {
	r := run(t, "", "plan", "-f", basic, "--observed", "testdata/two-observed.json")
	require.Equal(t, ExitOK, r.code, r.stderr) // "demo" matches a namespace-less cluster

	r = run(t, "", "plan", "-f", "testdata/two-clusters.yaml", "--observed", writeTemp(t, `{"team-a/demo": {"formatVersion": 1}}`))
	require.Equal(t, ExitError, r.code)
	require.Contains(t, r.stderr, `has no observed state for EtcdCluster team-b/demo (it has "team-a/demo")`)
}

func TestObservedFileIsStrict(t *testing.T) {
	for content, want := range map[string]string{
		`{"formatVersion": 1, "member": []}`: `unknown field "member"`,
		`{"formatVersion": 3}`:               "formatVersion 3 is not supported",
		`{}`:                                 "neither an observed state",
		`[1]`:                                "not an observed state",
	} {
		r := run(t, "", "plan", "-f", basic, "--observed", writeTemp(t, content))
		require.Equal(t, ExitError, r.code, content)
		require.Contains(t, r.stderr, want, content)
	}
}

// -o json is the plan itself: it decodes into plan.Plan equal to the planner's own.
func TestJSONIsThePlan(t *testing.T) {
	r := run(t, "", "plan", "-f", basic, "--observed", examples+"observed/three-on-3.5.json", "-o", "json")
	require.Equal(t, ExitOK, r.code, r.stderr)
	var got plan.Plan
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Equal(t, plan.FormatVersion, got.FormatVersion)

	c := exampleCluster(t)
	o, err := OpenObservedFile(examples+"observed/three-on-3.5.json", []*v1alpha1.EtcdCluster{c})
	require.NoError(t, err)
	obs, generation, err := o.Observed(context.Background(), c)
	require.NoError(t, err)
	require.Zero(t, generation, "offline plans are for generation 0")
	want := planner.Plan(planner.Desired{Name: "demo", Replicas: 3, Version: "3.6.16", ConfigHash: c.Spec.ConfigHash()}, obs)
	require.Equal(t, want, got)
}

// Without --observed the plan is made against the live cluster; a kubeconfig that cannot
// be read fails the run and says how to plan offline.
func TestLiveNeedsAKubeconfig(t *testing.T) {
	r := run(t, "", "plan", "-f", basic, "--kubeconfig", "testdata/nope.kubeconfig")
	require.Equal(t, ExitError, r.code)
	require.Contains(t, r.stderr, "error: reading the kubeconfig: ")
	require.Contains(t, r.stderr, "pass --observed FILE")
}

// --save-observed writes what was planned against in the form --observed reads: the same
// plans come out of it.
func TestSaveObservedRoundTrip(t *testing.T) {
	saved := t.TempDir() + "/saved.json"
	first := run(t, "", "plan", "-f", "testdata/two-clusters.yaml", "--observed", "testdata/two-observed.json", "-o", "json", "--save-observed", saved)
	require.Equal(t, ExitOK, first.code, first.stderr)
	again := run(t, "", "plan", "-f", "testdata/two-clusters.yaml", "--observed", saved, "-o", "json")
	require.Equal(t, ExitOK, again.code, again.stderr)
	require.Equal(t, first.stdout, again.stdout)
	require.Len(t, decodePlans(t, again.stdout), 2)
}

func TestRunUsesStreams(t *testing.T) {
	var out, errOut bytes.Buffer
	require.Equal(t, ExitOK, Run([]string{"plan", "-f", basic, "--observed", healthy}, &out, &errOut))
	require.Contains(t, out.String(), "No changes")
	require.Empty(t, errOut.String())
}

func decodePlans(t *testing.T, s string) []plan.Plan {
	t.Helper()
	var out []plan.Plan
	dec := json.NewDecoder(strings.NewReader(s))
	for {
		var p plan.Plan
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			return out
		}
		require.NoError(t, err)
		out = append(out, p)
	}
}

func writeTemp(t *testing.T, content string) string {
	t.Helper()
	path := t.TempDir() + "/observed.json"
	require.NoError(t, writeFile(path, content))
	return path
}

// The comment says whether the plan waits for approval, by the operator's rules, and
// whether the manifest already approves it.
func TestApprovalInTheComment(t *testing.T) {
	recovery := plan.Plan{ID: "0badc0ffee00", Steps: []plan.Step{{Action: plan.ForceNewCluster, Member: "demo-0"}}}
	scale := plan.Plan{ID: "3f0c9a1b2d4e", Steps: []plan.Step{{Action: plan.AddLearner, Member: "demo-3"}}}
	tlsOn := plan.Plan{ID: "a1b2c3d4e5f6", Steps: []plan.Step{{Action: plan.UpdatePeerURL, Member: "demo-0", Why: plan.WhyPeerURLToTLS},
		{Action: plan.RestartMember, Member: "demo-0", Why: plan.WhyClientPlainTextOff}}}
	ec := func(approval v1alpha1.Approval, rec *v1alpha1.RecoverySpec, approved string) *v1alpha1.EtcdCluster {
		c := &v1alpha1.EtcdCluster{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: "team-a"}}
		c.Spec.UpdateStrategy.Approval, c.Spec.Recovery = approval, rec
		if approved != "" {
			c.Annotations = map[string]string{"etcdplan.io/approve": approved}
		}
		return c
	}
	auto := &v1alpha1.RecoverySpec{QuorumLoss: v1alpha1.QuorumLossAutomatic, AutoApproveDataLoss: true}
	for _, tc := range []struct {
		name          string
		c             *v1alpha1.EtcdCluster
		p             plan.Plan
		needed, given bool
	}{
		{"automatic", ec(v1alpha1.ApprovalAutomatic, nil, ""), scale, false, false},
		{"manual", ec(v1alpha1.ApprovalManual, nil, ""), scale, true, false},
		{"manual, approved in the manifest", ec(v1alpha1.ApprovalManual, nil, scale.ID), scale, true, true},
		{"manual, another plan approved", ec(v1alpha1.ApprovalManual, nil, recovery.ID), scale, true, false},
		{"a recovery waits whatever the approval", ec(v1alpha1.ApprovalAutomatic, nil, ""), recovery, true, false},
		{"unless spec.recovery lets it run", ec(v1alpha1.ApprovalAutomatic, auto, ""), recovery, false, false},
		{"a TLS switch waits before members refuse plain text", ec(v1alpha1.ApprovalAutomatic, nil, ""), tlsOn, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := approval(tc.c, tc.p)
			require.Equal(t, tc.needed, a.Needed)
			require.Equal(t, tc.given, a.Given)
			require.Equal(t, fmt.Sprintf("etcdplan.io/approve: %q", tc.p.ID), a.Annotation)
			require.Equal(t, "kubectl etcd approve demo -n team-a --plan "+tc.p.ID, a.Command)
			if tc.p.ID == tlsOn.ID {
				require.Equal(t, "step 2, the first after which members refuse plain-text clients", a.At)
			}
		})
	}
}
