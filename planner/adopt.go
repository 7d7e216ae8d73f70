package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/vocab"
)

// Adopting a running cluster (spec.bootstrap.join). The source's members are etcd members
// the operator does not run: no Pod, no claim. While any is in the membership the plan is
// the adoption's alone: the operator's members join one at a time (a learner, started,
// promoted), and after each a source member leaves, followers first, once leadership
// moved to one of the operator's. The cluster never has more than one voter beyond
// spec.replicas (or the source's size) so the source alone keeps its quorum until one of
// its members left. Removing spec.bootstrap.join before then rolls it back.

// sourceName names a source member: its own name, or its ID until it started.
func sourceName(em EtcdMember) string {
	if em.Name != "" {
		return em.Name
	}
	return "source-" + em.ID
}

// identifySource names a source member, blocking when its name is one the cluster's own
// members take, or another member's.
func (m *model) identifySource(d Desired, em EtcdMember) (string, *plan.Blocker) {
	name := sourceName(em)
	if vocab.Ordinal(d.Name, name) >= 0 || m.get(name) != nil {
		return "", &plan.Blocker{Reason: plan.BlockAdoptionPreflight, Message: fmt.Sprintf(
			"source member %s (ID %s) has a name of this cluster's members (%s-<ordinal>) or another member's: adopt it into an EtcdCluster of another name",
			name, em.ID, d.Name)}
	}
	return name, nil
}

// adopting: a source member is in the membership.
func (m *model) adopting() bool {
	return slices.ContainsFunc(m.members, func(mm *member) bool { return mm.source && mm.inEtcd })
}

// rollingBack: spec.bootstrap.join was removed while no source member had left.
func (m *model) rollingBack(d Desired) bool {
	return !d.Join && m.join != nil && !m.join.SourceLeft
}

// ours returns the cluster's own members in etcd, voters and learners apart.
func (m *model) ours() (voters, learners []*member) {
	for _, mm := range m.members {
		switch {
		case mm.source || !mm.inEtcd:
		case mm.learner:
			learners = append(learners, mm)
		default:
			voters = append(voters, mm)
		}
	}
	return voters, learners
}

// sourceLearner is a learner of the source's, if any (one added by hand mid-adoption).
func (m *model) sourceLearner() *member {
	for _, mm := range m.learners() {
		if mm.source {
			return mm
		}
	}
	return nil
}

// sourceVoters are the source's voters in etcd, the leader last.
func (m *model) sourceVoters() []*member {
	var out []*member
	for _, mm := range leaderLast(m) {
		if mm.source && mm.voter() {
			out = append(out, mm)
		}
	}
	return out
}

// adopt is the adoption's rule: roll back, or add a member (finishMembershipChange starts
// and promotes it), or move leadership, or take a source member out.
func adopt(m *model, d Desired) (plan.Step, bool) {
	if !m.linearizable {
		return plan.Step{}, false
	}
	if m.rollingBack(d) {
		return rollBack(m)
	}
	voters, learners := m.ours()
	if len(learners) > 0 {
		return plan.Step{}, false // finishMembershipChange starts and promotes it
	}
	if m.auth != nil && *m.auth && !m.join.UsersMade {
		return plan.Step{Action: plan.EnableAuth, Precondition: plan.Precondition{Kind: plan.PreNone}, Why: plan.WhyAuthAdopted,
			Reason: "the source has authentication on: the operator's users (its client certificates' common names) get the root role in it before any member joins"}, true
	}
	if l := m.sourceLearner(); l != nil {
		return step(plan.RemoveMember, l, plan.PreNone, plan.WhySourceLeaves, "source learner %s leaves: a learner holds no vote, and no data the voters lack", l.name), true
	}
	sources := m.sourceVoters()
	if len(voters) < d.Replicas && len(voters)+len(sources) <= max(d.Replicas, len(sources)) {
		mm := &member{name: vocab.MemberName(m.cluster, m.nextOrdinal), ordinal: m.nextOrdinal}
		return step(plan.AddLearner, mm, plan.PreQuorumHealthy, plan.WhyAdoptJoin,
			"member %s joins the adopted cluster as a learner (%d of spec.replicas %d joined, %d source voters)", mm.name, len(voters), d.Replicas, len(sources)), true
	}
	if len(sources) == 0 || len(voters) == 0 {
		return plan.Step{}, false
	}
	if l := m.get(m.leader); l != nil && l.source {
		s := handOver(l, voters[0], plan.WhyAdoptLeader, "leadership moves to %s before source members leave", voters[0].name)
		s.Precondition.Kind = plan.PrePeersConnected // the new leader must reach every source member
		return s, true
	}
	if s, ok := snapshotSource(m, voters[0]); ok {
		return s, true
	}
	victim := sources[0] // the leader last
	if len(sources) == 1 {
		return step(plan.RemoveMember, victim, plan.PreQuorumWithout, plan.WhySourceLast,
			"the last source member %s leaves: clients of the source's endpoints must have moved to the cluster's own Service first; "+
				"a later plan asks to acknowledge that the removed members' processes are stopped and their data wiped", victim.name), true
	}
	return step(plan.RemoveMember, victim, plan.PreQuorumWithout, plan.WhySourceLeaves,
		"source member %s leaves (%d of the cluster's members joined)", victim.name, len(voters)), true
}

// SourceSnapshotName names the EtcdBackup an adoption stores before the first source
// member leaves.
func SourceSnapshotName(cluster string) string { return cluster + "-adopted" }

// snapshotSource stores a snapshot of the adopted cluster, read from one of its own voters
// (the leader, once leadership moved), before the first source member leaves: when a
// backup destination is known and no such snapshot succeeded yet.
func snapshotSource(m *model, from *member) (plan.Step, bool) {
	name := SourceSnapshotName(m.cluster)
	done := slices.ContainsFunc(m.snapshots, func(s MemberSnapshot) bool { return s.Name == name && s.Phase == SnapshotSucceeded })
	if m.join == nil || m.join.SourceLeft || m.snapshotTo == "" || done {
		return plan.Step{}, false
	}
	s := step(plan.SnapshotSource, from, plan.PreMemberHealthy, plan.WhySourceSnapshot,
		"a snapshot of the adopted cluster, read from %s, is stored as EtcdBackup %s at %s before the first source member leaves", from.name, name, m.snapshotTo)
	s.Backup = name
	return s, true
}

// acknowledgeSource asks, once every source member left, for the user's word that their
// processes are stopped and their data directories wiped: a removed member that restarts
// keeps dialling its old peers, and only whoever runs it can stop it.
func acknowledgeSource(m *model, _ Desired) (plan.Step, bool) {
	if m.join == nil || !m.join.AllLeft {
		return plan.Step{}, false
	}
	var names []string
	for _, r := range m.join.Source {
		names = append(names, r.Name)
	}
	return plan.Step{Action: plan.Acknowledge, Precondition: plan.Precondition{Kind: plan.PreNone}, Why: plan.WhySourceStopped,
		Reason: fmt.Sprintf("every source member left (%s): whoever runs them stops their processes and wipes their data directories "+
			"(a removed member that restarts keeps dialling its old peers); approve once that is done", strings.Join(names, ", "))}, true
}

// peersConnected: every source voter counts the member an active peer, and the member each
// of them, as their metrics say: leadership moving to it needs raft messages to pass both
// ways, and a member the source cannot reach at its peer URL would lead no one.
func peersConnected(m *model, name string) (bool, string) {
	to := m.get(name)
	if to == nil || m.join == nil {
		return false, fmt.Sprintf("waiting for member %s", name)
	}
	var missing []string
	for _, sv := range m.sourceVoters() {
		for _, pair := range [][2]*member{{sv, to}, {to, sv}} {
			peers, read := m.join.Peers[pair[0].id]
			switch {
			case !read:
				missing = append(missing, fmt.Sprintf("%s's metrics not read", pair[0].name))
			case !slices.Contains(peers, pair[1].id):
				missing = append(missing, fmt.Sprintf("%s does not count %s an active peer", pair[0].name, pair[1].name))
			}
		}
	}
	if len(missing) > 0 {
		return false, fmt.Sprintf("waiting for raft messages to pass between %s and every source member (%s): "+
			"each must reach the other's peer URL (DNS, network policy, firewalls, peer certificates)", name, strings.Join(missing, "; "))
	}
	return true, ""
}

// rollBack takes the cluster's own members out of the source again: learners first (no
// quorum check needed), then voters, after leadership moved back to a source voter.
func rollBack(m *model) (plan.Step, bool) {
	voters, learners := m.ours()
	reason := "spec.bootstrap.join was removed before a source member left: %s leaves the source again"
	if len(learners) > 0 {
		return step(plan.RemoveMember, learners[0], plan.PreNone, plan.WhyAdoptRollback, reason, learners[0].name), true
	}
	if len(voters) == 0 {
		return plan.Step{}, false
	}
	if l, to := m.get(m.leader), m.sourceVoters(); l != nil && !l.source && len(to) > 0 {
		return handOver(l, to[0], plan.WhyAdoptRollback, "leadership moves back to the source's %s before the cluster's own members leave", to[0].name), true
	}
	return step(plan.RemoveMember, voters[len(voters)-1], plan.PreQuorumWithout, plan.WhyAdoptRollback, reason, voters[len(voters)-1].name), true
}

// refuseJoin blocks an adoption that cannot start: the source does not answer, or is not
// as an adoption needs it (the preflight, read from its view and the executor's checks),
// and a rollback that is done.
func refuseJoin(m *model, d Desired, o Observed) *plan.Blocker {
	joined := slices.ContainsFunc(m.members, func(mm *member) bool { return !mm.source && (mm.inEtcd || mm.pod || mm.pvc) })
	switch {
	case m.rollingBack(d) && !joined:
		return &plan.Blocker{Reason: plan.BlockAdoptionRolledBack, Message: "the adoption was rolled back (spec.bootstrap.join removed before a source member left): " +
			"the source runs as it did, without the cluster's members; delete this EtcdCluster"}
	case m.adopting() && d.Replicas == 0:
		return &plan.Blocker{Reason: plan.BlockAdoptionPreflight, Message: "spec.replicas is 0: an adoption needs members of the cluster's own to join the source; set spec.replicas"}
	case m.adopting() && !m.rollingBack(d) && (joined || m.join.SourceLeft) && m.auth != nil && *m.auth && !m.join.UsersMade && !d.Auth:
		// Past the preflight, authentication went on in the source: the operator's users
		// are made in it only under spec.auth (with client TLS, whose certificates name them).
		return &plan.Blocker{Reason: plan.BlockAdoptionPreflight, Message: "the source's authentication is on, and the operator has no user in it: set spec.auth.enabled, and " +
			"spec.bootstrap.join.credentialsSecretName to a Secret with the username and password of a source user with the root role"}
	case !d.Join || joined || m.join != nil && m.join.SourceLeft:
		return nil
	}
	problems := slices.Clone(o.Join.problems())
	if o.Etcd == nil {
		problems = append(problems, "no member of the source answers at spec.bootstrap.join.endpoints")
	} else {
		problems = append(problems, sourceProblems(d, o.Etcd)...)
	}
	if len(problems) == 0 {
		return nil
	}
	return &plan.Blocker{Reason: plan.BlockAdoptionPreflight, Message: "spec.bootstrap.join: the source cannot be adopted as it is: " + strings.Join(problems, "; ")}
}

func (j *Join) problems() []string {
	if j == nil {
		return nil
	}
	return j.Problems
}

// sourceProblems is the preflight of the source's own view: every member started, a
// voter, healthy, on spec.version's minor (3.5 from 3.5.26: earlier ones can let the v2
// and v3 membership drift apart on exactly the adds and removes an adoption makes), its
// peers talking TLS exactly when the spec's do (the executor checks that the spec's peer
// certificates are the user's, which the source can trust), no alarm, and authentication
// only when the spec keeps it.
func sourceProblems(d Desired, v *EtcdView) []string {
	var out, tlsPeers, plainPeers []string
	want, _ := ParseVersion(d.Version)
	for _, em := range v.Members {
		name := sourceName(em)
		have, err := ParseVersion(em.Version)
		switch {
		case em.Learner || !em.Started():
			out = append(out, fmt.Sprintf("member %s is a learner or never started: finish that membership change in the source first", name))
		case !em.Answering || em.Leader == "":
			out = append(out, fmt.Sprintf("member %s does not answer or knows no leader: every source member must be healthy", name))
		case err != nil || have.Major != want.Major || have.Minor != want.Minor:
			out = append(out, fmt.Sprintf("member %s runs etcd %s: set spec.version to a release of the same minor (%s)", name, em.Version, d.Version))
		case have.Minor == 5 && have.Patch < 26:
			out = append(out, fmt.Sprintf("member %s runs etcd %s: upgrade the source to 3.5.26 or later first (earlier 3.5 releases can let etcd's two records of membership drift apart on adds and removes)", name, em.Version))
		}
		if slices.ContainsFunc(em.PeerURLs, vocab.TLSURL) {
			tlsPeers = append(tlsPeers, name)
		}
		if slices.ContainsFunc(em.PeerURLs, func(u string) bool { return !vocab.TLSURL(u) }) {
			plainPeers = append(plainPeers, name)
		}
	}
	switch {
	case len(tlsPeers) > 0 && len(plainPeers) > 0:
		out = append(out, fmt.Sprintf("the source's peers talk TLS (%s) and plain text (%s): finish the source's switch of peer TLS first",
			strings.Join(tlsPeers, ", "), strings.Join(plainPeers, ", ")))
	case len(tlsPeers) > 0 && !d.PeerTLS:
		out = append(out, "the source's peers talk TLS, and spec.tls's peers plain text: set tls.peer.mode Provided, with peerSecretName a Secret "+
			"whose certificate the source's peer CA issued, naming this cluster's members' peer DNS names, and whose ca.crt is the source's peer CA")
	case len(plainPeers) > 0 && d.PeerTLS:
		out = append(out, "spec.tls asks for peer TLS, and the source's peers talk plain text: adopt with peer TLS off (tls.peer.mode Disabled), then switch it on")
	}
	for _, a := range v.Alarms {
		out = append(out, fmt.Sprintf("alarm %s is raised on member %s: disarm it first", a.Type, a.MemberID))
	}
	if v.Auth != nil && *v.Auth && !d.Auth {
		out = append(out, "the source has authentication on, and spec.auth.enabled is not set: the cluster keeps it on; set spec.auth.enabled, and "+
			"spec.bootstrap.join.credentialsSecretName to a Secret with the username and password of a source user with the root role")
	}
	return out
}

// joinWarnings say what an adoption under way does not do for the user.
func joinWarnings(d Desired, o Observed) []string {
	if o.Join == nil || len(o.Join.Source) == 0 {
		return nil
	}
	var out []string
	if !d.Join && o.Join.SourceLeft {
		out = append(out, "spec.bootstrap.join was removed after a source member left: the adoption can no longer be rolled back, and goes on")
	}
	if !o.Join.SourceLeft && o.SnapshotTo == "" {
		out = append(out, "no snapshot of the source is stored before its members leave: the cluster has no backup destination yet "+
			"(create an EtcdBackupSchedule for it first), or take one by hand (etcdctl snapshot save)")
	}
	return out
}
