package bench

import (
	"fmt"
	"image/color"
	"os/exec"
	"runtime"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// plotScenario draws a scenario's timeline: the probe's write latencies (failed writes on
// top, in red) with a line where each plan step was applied, so a reader sees where an
// operation hurts clients.
func plotScenario(path string, r benchResult) error {
	p := plot.New()
	p.Title.Text = r.Name
	p.X.Label.Text = "seconds since the change"
	p.Y.Label.Text = "write latency (ms)"
	var ok, failed plotter.XYs
	top := 10.0
	for _, s := range r.Samples {
		x := s.At.Sub(r.Start).Seconds()
		if s.OK {
			y := float64(s.Latency.Microseconds()) / 1000
			ok = append(ok, plotter.XY{X: x, Y: y})
			top = max(top, y)
		} else {
			failed = append(failed, plotter.XY{X: x})
		}
	}
	for i := range failed {
		failed[i].Y = top * 1.1
	}
	for _, xy := range []struct {
		pts plotter.XYs
		c   color.RGBA
	}{{ok, color.RGBA{B: 200, A: 255}}, {failed, color.RGBA{R: 220, A: 255}}} {
		if len(xy.pts) == 0 {
			continue
		}
		s, err := plotter.NewScatter(xy.pts)
		if err != nil {
			return err
		}
		s.GlyphStyle.Color, s.GlyphStyle.Radius, s.GlyphStyle.Shape = xy.c, vg.Points(1.2), draw.CircleGlyph{}
		p.Add(s)
	}
	var marks plotter.XYs
	var names []string
	for _, st := range r.Steps {
		at := st.Applied
		if at.IsZero() {
			at = st.Finished
		}
		if at.IsZero() || at.Before(r.Start) {
			continue
		}
		x := at.Sub(r.Start).Seconds()
		line, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top * 1.2}})
		if err != nil {
			return err
		}
		line.Color, line.Dashes = color.RGBA{G: 140, A: 255}, []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(line)
		marks = append(marks, plotter.XY{X: x, Y: top * 1.2 * (0.55 + 0.4*float64(len(marks)%4)/4)})
		names = append(names, st.Action+" "+st.Member)
	}
	if len(marks) > 0 {
		labels, err := plotter.NewLabels(plotter.XYLabels{XYs: marks, Labels: names})
		if err != nil {
			return err
		}
		for i := range labels.TextStyle {
			labels.TextStyle[i].Font.Size = vg.Points(7)
		}
		p.Add(labels)
	}
	p.Y.Min = 0
	return p.Save(10*vg.Inch, 4*vg.Inch, path)
}

// machine describes where the benchmark ran.
func machine() string {
	mem := "?"
	if out, err := exec.Command("free", "-g").Output(); err == nil {
		if f := strings.Fields(strings.Split(string(out), "\n")[1]); len(f) > 1 {
			mem = f[1] + " GiB"
		}
	}
	kernel, _ := exec.Command("uname", "-r").Output()
	return fmt.Sprintf("%d CPUs, %s memory, Linux %s, %s", runtime.NumCPU(), mem, strings.TrimSpace(string(kernel)), runtime.Version())
}

func gitCommit(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

const benchDoc = `# Benchmarks

Written by ` + "`make bench`" + `: every figure below comes from one run on the local stack (a real
kube-apiserver, the local kubelet, etcd in Pods). Each scenario runs twice: once by the
operator, and once by the *floor*, a small program that drives the same Pod and etcd
operations directly (the same Pods, rendered by the same code, each joining member named
by the next ordinal as the operator names its), each as soon as the one
before took effect, polling every 10 ms. The floor is what etcd and Kubernetes allow; the
ratio operator / floor is what the operator costs on top. On a shared two-core machine the
figures of both swing by up to twice between runs; compare the ratios within one run.

- Machine: %s. etcd 3.6.16 (3.5.35 before the upgrade), Kubernetes 1.36.
- Date: %s; commit %s.
- A run ends when the same check holds for both: as many member Pods and claims as the
  spec asks, all Pods ready at the spec's version, and etcd listing that many voters, each
  answering with a leader.
- **Reaction**: from the moment a step could run (the step before showed its effect and
  the step's precondition held, as seen by an independent sampler every 50 ms that runs the
  operator's own planner on its own look at the cluster) to the moment the operator applied
  it, by the operator's clock (the step records in status, to the microsecond). The
  sampler's period bounds its resolution. A learner's promotion is etcd's to allow: it
  could run once the learner answered with a log within a tenth of the leader's (etcd's
  rule); while the learner does not answer (its publish wait) the step is timed from the
  last look that saw it pending.
- **Noticed**: from the moment a step's effect showed (same sampler) to the moment the
  operator recorded it done.
- **Waiting on Pods / etcd**: the operator's step records, summed: waits for members to
  start or go (Pod operations, MemberHealthy, ClusterHealthy and QuorumHealthy preconditions) and waits on
  etcd (a learner catching up, membership calls, leadership).
- **Client impact**: a writer puts a key every 20 ms, each with a 2 s timeout, for 6 s
  before the change (idle), throughout the operator's run (during) and throughout the
  floor's run (in parentheses: the floor works under the same load). The plots show each
  write's latency during the operator's run (red: failed) with a line where each step was
  applied.
- Both runs start 6 s after their cluster's last membership change: etcd refuses a new one
  until its leader has been connected to a quorum of the voters, the new one counted, for
  5 s, and neither run is charged for the one before.
- **Timed** steps: those the sampler saw pending before they were done; a step that became
  possible, was applied and showed its effect between two looks is faster than 50 ms and
  not timed.
- **TLS**: the bootstrap of 3 and the scaling 3 -> 5 and back run again on clusters with
  ` + "`spec.tls: {mode: Auto}`" + `, the floor's with the same Secrets, flags and client
  certificate (rows ending in *TLS*); the section TLS sets them beside the plain runs and
  gives the write latency of both. TLS switched on for a running cluster, the CA rotated
  and certificates renewed run by the operator and the naive way only (no floor run: the
  floor column says -); the section TLS says how.
- The bootstraps and scaling 3 -> 5 and back run several times (` + "`BENCH_REPEAT`" + `, 3 by default): each run has its row,
  and a second table gives the medians. Joins swing most, by etcd itself: etcd 3.6 keeps
  only a short raft log, so once a cluster has taken a few hundred writes a joining member
  is sent a snapshot of the leader's database; when that database already holds the
  member's own publish request, the member skips applying it and waits its request timeout
  (7 s) before it publishes again and serves clients, while it already takes part in raft.
  The operator and the floor both wait for a new member to answer before the next join,
  so either run loses those 7 s whenever it happens to it: the column *publish waits*
  counts them in each run (etcd logs "failed to publish local member"). A fresh cluster
  with no writes has a full log, and its joins never wait.
- **bootstrap 3, operator started with it**: the operator process (with leader election, as
  deployed) starts at the moment the cluster is created, as after an install or during a
  rollout; the floor's row is a plain bootstrap. **a member's Pod deleted**: its claim is
  kept; the floor waits for the old Pod to go and creates it again. **operator restart**: the
  old operator stops (releasing its lease) and one member Pod of each cluster is deleted;
  the time runs from the new operator's start until every cluster is whole; the floor
  re-creates the same Pods itself.
- **Quorum loss** (a cluster of 3 whose ` + "`spec.recovery`" + ` lets a recovery run without approval,
  with a suspended backup schedule to a volume claim as its destination; each scenario runs
  ` + "`BENCH_REPEAT`" + ` times): the volumes of two members (**2 of 3 wiped**) or of all three
  (**all 3 wiped**, after a backup to that claim) are wiped and their Pods deleted, and the
  run ends when the cluster has three voters again, none of the wiped members nor the
  survivor. The operator must first show that the data is gone: while a wiped member's old
  Pod goes, a check Pod beside it mounts its claim read-only and finds no data (` + "`CheckData`" + `),
  which counts once the old Pod is gone; a member whose old Pod went before that starts again
  and its preflight check finds no data. No survivor is named, nor a restore chosen, before
  every voter has shown what it holds. Then it stores the survivor's snapshot (an EtcdBackup of it,
  taken by a Pod that mounts the claim), stops the survivor, and restores that snapshot (or,
  all 3 wiped, the backup) on three new members at once; the wiped members' Pods and claims
  go. The floor knows what it wiped: it deletes the wiped claims, streams the survivor's
  snapshot to the claim itself, stops the survivor, and creates three members whose Pods
  restore it with the same init containers and etcdutl (all 3 wiped: a snapshot of the
  floor's own cluster taken as the backup was). No member joins in either run, so neither
  waits out etcd's publish timeout. The table of recoveries gives the moments of both runs in
  seconds after the fault (the operator's from its step records), and when the operator's
  status first said Ready. Writes fail while no quorum answers (each after its 2 s timeout),
  in both runs.
- **Where a recovery's time goes**: while no quorum answers, a look asks every member's
  status first (250 ms at most) and skips the read through a quorum when no member that
  answers knows a leader; a wiped member's preflight check ending, or a member's etcd
  starting, brings a look at once (a Pod event), and a cluster with no plan that is not Ready
  is looked at again every 500 ms. The floor spends nothing there. Once the survivor or seed
  answers, looks are fast again, except while a member does not answer its status (a new
  member starting, or waiting etcd's 7 s to publish itself): then each look waits its 1 s
  timeout. An old Pod's etcd takes from half a second to 7 s to stop (a leader that still
  sees a peer tries for up to 7 s to hand its leadership over first): the operator waits for
  it, to start each member again on its volume; the floor, which knows, does not, except for
  the survivor's own Pod. Joins wait for etcd's own rule in both runs: it refuses a new
  member until its leader has been connected to a quorum of the voters, the new one counted
  (with two voters: both), for 5 s; the operator asks from the moment the last new voter runs,
  while it still publishes itself, and again every 200 ms while etcd refuses.
- **Against a naive rollout**: the upgrade and the defragmentation (each member's database
  holding 64 MiB of keys and 32 MiB free) run a third time on the floor's side, the way a
  tool that knows nothing of etcd's leader does them: a StatefulSet's rolling update (Pods
  re-created highest ordinal first, leadership never moved by hand) and
  ` + "`etcdctl defrag --cluster`" + ` (every member in turn, the leader in place). The last table
  sets what clients saw beside the operator's run. etcd itself hands leadership over when its
  leader stops gracefully (SIGTERM), so a rolling restart without a transfer first costs no
  election either; the operator's transfer is what keeps a leader's restart cheap when its
  Pod is not stopped gracefully. A defragmentation holds the requests of the member it
  rewrites, follower or leader: with clients spread over every member, the slowest write of
  either rollout is about one member's defragmentation. The sampler runs only during the
  operator's run, and takes a share of the two cores.

%s
## Steps
%s`
