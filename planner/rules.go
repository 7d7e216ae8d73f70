package planner

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/vocab"
)

// Each rule looks at the model and returns the first step its concern needs, if any.

// step makes a step on member mm, carrying its etcd member ID when it has one, and its
// reason: the code why and the words for people.
func step(a plan.Action, mm *member, pre plan.PreconditionKind, why plan.Why, reason string, args ...any) plan.Step {
	s := plan.Step{Action: a, Member: mm.name, MemberID: mm.id, Why: why, Reason: fmt.Sprintf(reason, args...),
		Precondition: plan.Precondition{Kind: pre}}
	if pre != plan.PreNone && pre != plan.PreClusterHealthy && pre != plan.PreQuorumHealthy {
		s.Precondition.Member = mm.name
	}
	return s
}

// bootstrap seeds a cluster that has never formed. A volume left by an earlier seed is
// re-used, so a seed whose Pod was lost before the cluster formed keeps its name.
func bootstrap(m *model, d Desired) (plan.Step, bool) {
	if m.bootstrapped || d.Replicas == 0 {
		return plan.Step{}, false
	}
	var seed *member
	for _, mm := range m.members {
		if mm.inEtcd {
			return plan.Step{}, false // a seed is starting
		}
		if seed == nil && mm.pvc {
			seed = mm
		}
	}
	if seed == nil {
		seed = &member{name: vocab.MemberName(m.cluster, m.nextOrdinal), ordinal: m.nextOrdinal}
	}
	s := step(plan.CreateSeed, seed, plan.PreNone, plan.WhyBootstrap, "bootstrap: the cluster starts from one seed member")
	if d.Restore != "" {
		s.Why, s.Reason = plan.WhyBootstrapRestore, "bootstrap: the cluster starts from one seed member restored from "+d.Restore
	}
	s.Version = d.Version
	return s, true
}

// needsPod: a member whose Pod is gone, ended or going.
func needsPod(mm *member) bool { return !mm.pod || mm.podDeleting }

// startVoters re-creates the Pods of voters that still hold their data: a repair that
// restores quorum or fault tolerance, so it comes before any membership change. Starting a
// member never costs quorum. A member restarting alone (ForceNewCluster) gets its Pod from
// that step. A member in memory whose Pod is Terminating cannot start again on its data: it
// is down until its Pod is gone, and lost then. After a majority lost its data, a voter
// whose Pod is gone gets one to show whether it kept its own (its preflight check, or its
// answer); one whose Pod starts needs no step: recoverQuorum waits for what it shows. No
// voter starts once a recovery restores the survivor's snapshot (its Pods stop for it),
// and the seeds of a restore under way get their Pods from that step. Voters whose Pods are
// gone start first (this rule), then those whose Pods are still going (startGoing): each
// of those steps waits for the old Pod.
func startVoters(m *model, d Desired) (plan.Step, bool) { return startWhere(m, d, false) }

// startGoing starts the voters whose Pods are still going (startVoters).
func startGoing(m *model, d Desired) (plan.Step, bool) { return startWhere(m, d, true) }

// startWhere starts the first voter that needs a Pod (startVoters) whose old Pod is still
// going, or gone.
func startWhere(m *model, d Desired, going bool) (plan.Step, bool) {
	if d.Replicas == 0 {
		return plan.Step{}, false
	}
	restoring := m.quorumLost(d) && slices.ContainsFunc(m.members, func(x *member) bool { return x.copied && x.voter() })
	for _, mm := range m.members {
		if !mm.voter() || !mm.started || mm.source || m.lost(mm, d) || (mm.forcing && m.quorumLost(d)) || restoring || (mm.restoring != nil && m.restoreSeed() != nil) {
			continue
		}
		if !needsPod(mm) || d.Memory && mm.podDeleting || mm.pod != going {
			continue
		}
		return startStep(m, d, mm), true
	}
	return plan.Step{}, false
}

// startStep starts a voter's Pod (startVoters).
func startStep(m *model, d Desired, mm *member) plan.Step {
	s := step(plan.StartMember, mm, plan.PreNone, plan.WhyPodGone, "member %s needs a new Pod%s", mm.name, preflightFailed(mm))
	if !d.Memory && !mm.holdsData() && m.quorumLost(d) && mm.preflightErr == "" {
		s = step(plan.StartMember, mm, plan.PreNone, plan.WhyShowData,
			"a majority of voters lost their data: %s runs, to show whether it kept its own before a recovery compares the survivors", mm.name)
	}
	s.Version = cmp.Or(mm.version, d.Version)
	return s
}

// preflightFailed says, for a member whose last Pod's preflight check could not read its
// data directory, that its data is kept and the Pod waits for a person: a new Pod would
// fail the same way, and the data may be intact.
func preflightFailed(mm *member) string {
	if mm.preflightErr == "" {
		return ""
	}
	return fmt.Sprintf("; its last Pod's preflight check could not read its data directory (%s): the member is down, not lost, and nothing of it is deleted; "+
		"once its volume is mended, delete Pod %s and a new one starts (docs/operations.md, PreflightFailed)", mm.preflightErr, mm.name)
}

// finishMembershipChange completes (or undoes) a learner join before any other membership
// change: etcd allows one at a time. Without a linearizable member list nothing can be
// said of a learner (whether it is still a member, whether it ever started), and nothing
// could catch it up: it waits.
func finishMembershipChange(m *model, d Desired) (plan.Step, bool) {
	if !m.linearizable {
		return plan.Step{}, false
	}
	for _, mm := range m.learners() {
		voters, _ := m.ours() // an adopted cluster's source members leave on their own
		switch {
		case mm.source:
			continue
		case m.lost(mm, d):
			return step(plan.RemoveMember, mm, plan.PreNone, plan.WhyLearnerLost, "learner %s lost its data; it is removed and added anew", mm.name), true
		case mm.stalled:
			return step(plan.RemoveMember, mm, plan.PreNone, plan.WhyLearnerStalled,
				"learner %s did not catch up within the progress deadline; it is removed, and a new member joins in its place", mm.name), true
		case len(voters) >= d.Replicas+temporaryVoters(m, d):
			return step(plan.RemoveMember, mm, plan.PreNone, plan.WhyLearnerNotNeeded, "learner %s is not needed: %d voters reach spec.replicas %d", mm.name, len(voters), d.Replicas), true
		case d.Memory && mm.podDeleting && mm.started:
			continue // its data goes with its Pod: once that is gone it is lost, and removed
		case needsPod(mm):
			s := step(plan.StartMember, mm, plan.PreNone, plan.WhyLearnerPodGone,
				"learner %s needs its Pod (spec.replicas %d, %d voters)%s", mm.name, d.Replicas, len(voters), preflightFailed(mm))
			s.Version = d.Version
			return s, true
		default:
			return step(plan.PromoteLearner, mm, plan.PreLearnerCaughtUp, plan.WhyLearnerToVoter, "learner %s becomes a voter (spec.replicas %d, %d voters)", mm.name, d.Replicas, len(voters)), true
		}
	}
	return plan.Step{}, false
}

// replaceLostMember removes a voter whose data is gone; scaleUp then adds a fresh member.
// refuseQuorum has already made sure the others keep quorum without it; the removal waits
// for that quorum to answer (members started just before may still be starting).
func replaceLostMember(m *model, d Desired) (plan.Step, bool) {
	if !(m.reachable || m.quorumExpected()) || len(m.learners()) > 0 {
		return plan.Step{}, false
	}
	for _, mm := range m.members {
		if mm.voter() && m.lost(mm, d) {
			return step(plan.RemoveMember, mm, plan.PreQuorumWithout, plan.WhyMemberLost,
				"member %s lost its data; it is removed so a new member can replace it", mm.name), true
		}
	}
	return plan.Step{}, false
}

// deleteLeftovers deletes the Pods and volumes of members etcd no longer knows. Only a
// linearizable member list can say a member is gone: one member's own view may be stale
// and miss members that joined since. A retained claim (its member left in a forced
// recovery while holding data) is never deleted: only its Pod goes, even an ended one (kept
// while the member was one, for a person to read).
func deleteLeftovers(m *model, d Desired) (plan.Step, bool) {
	if !m.linearizable || !m.bootstrapped {
		return plan.Step{}, false
	}
	for _, mm := range m.members {
		if !mm.inEtcd && ((mm.pod && !mm.podDeleting) || (mm.retained && mm.podEnded) || (mm.pvc && !mm.pvcDeleting && !mm.retained)) {
			s := step(plan.DeleteMember, mm, plan.PreMemberGone, plan.WhyNotAMember, "member %s is not in etcd's membership", mm.name)
			if mm.retained {
				s = step(plan.DeleteMember, mm, plan.PreMemberGone, plan.WhyLeftInRecovery,
					"member %s left etcd's membership in a recovery: its Pod goes, its volume claim is kept (retained)", mm.name)
			}
			s.MemberID = mm.pvcID
			return s, true
		}
	}
	return plan.Step{}, false
}

// stopMembers parks a cluster at replicas 0: Pods go, volumes and membership stay. The
// leader goes last so the cluster answers for as long as it can.
func stopMembers(m *model, d Desired) (plan.Step, bool) {
	if d.Replicas != 0 {
		return plan.Step{}, false
	}
	for _, mm := range leaderLast(m) {
		if mm.pod && !mm.podDeleting {
			return step(plan.StopMember, mm, plan.PreNone, plan.WhyParked, "spec.replicas is 0: the cluster is parked on its volumes"), true
		}
	}
	return plan.Step{}, false
}

// scaleDown removes one voter: one that is down first, else one to be replaced (its new
// member has joined), else the newest. A member whose Pod is still starting is not down: it
// was just started or restarted, and will be up. Leadership moves away first when the victim
// leads.
func scaleDown(m *model, d Desired) (plan.Step, bool) {
	voters := m.countVoters()
	old := m.replacing(d)
	keep := d.Replicas + temporaryVoters(m, d)
	if old != nil {
		keep = d.Replicas // the replacement has joined: the old member goes
	}
	if d.Replicas == 0 || voters <= keep || len(m.learners()) > 0 {
		return plan.Step{}, false
	}
	var victim, down *member
	for _, mm := range m.members {
		if mm.voter() {
			victim = mm
			if !mm.up && (!mm.pod || mm.running) {
				down = mm
			}
		}
	}
	switch {
	case down != nil:
		victim = down
	case old != nil:
		victim = old
	}
	if s, ok := transferFrom(m, victim, plan.WhyLeaderLeaves, "scale down removes the leader %s", victim.name); ok {
		return s, true
	}
	if victim == old {
		return step(plan.RemoveMember, victim, plan.PreQuorumWithout, plan.WhyReplaced,
			"member %s leaves, replaced by a new member: %s", old.name, replacement(old, d)), true
	}
	return step(plan.RemoveMember, victim, plan.PreQuorumWithout, plan.WhyScaleDown,
		"member %s leaves (spec.replicas %d, %d voters)", victim.name, d.Replicas, voters), true
}

// scaleUp adds a learner; finishMembershipChange starts and promotes it. Two voters cannot
// restart or defragment one of theirs without losing quorum (a member being defragmented
// stalls its raft loop, and with it every write), so a rolling change or defragmentation of
// a two-member cluster first adds a temporary third member, which scaleDown removes once
// the roll is done.
func scaleUp(m *model, d Desired) (plan.Step, bool) {
	voters := m.countVoters()
	want := d.Replicas + temporaryVoters(m, d)
	old := m.replacing(d)
	if voters == 0 || voters >= want || len(m.learners()) > 0 { // no voter yet: bootstrap seeds first
		return plan.Step{}, false
	}
	mm := &member{name: vocab.MemberName(m.cluster, m.nextOrdinal), ordinal: m.nextOrdinal}
	switch {
	case voters < d.Replicas:
		return step(plan.AddLearner, mm, plan.PreQuorumHealthy, plan.WhyScaleUp,
			"member %s joins as a learner (spec.replicas %d, %d voters)", mm.name, d.Replicas, voters), true
	case old != nil:
		return step(plan.AddLearner, mm, plan.PreQuorumHealthy, plan.WhyReplacement,
			"member %s joins to replace %s: %s", mm.name, old.name, replacement(old, d)), true
	}
	return step(plan.AddLearner, mm, plan.PreQuorumHealthy, plan.WhyTemporaryMember,
		"member %s joins as a temporary third member, so two voters keep quorum while each restarts or is defragmented (spec.replicas %d, %d voters)",
		mm.name, d.Replicas, voters), true
}

// temporaryVoters is 1 while a voter is to be replaced (its replacement joins before it
// leaves), and while a two-member cluster has members to restart or defragment (the third
// member keeps quorum during the roll), or, with the third member in, a NOSPACE alarm to
// disarm: clients write again before the third member goes.
func temporaryVoters(m *model, d Desired) int {
	voters := m.countVoters()
	roll := rollNeeded(m, d) || defragNeeded(m, d) || (voters > 2 && m.disarmPending(d))
	if m.replacing(d) != nil || (d.Replicas == 2 && voters >= 2 && roll) {
		return 1
	}
	return 0
}

// rollNeeded reports whether a voter must be restarted for the spec (in place: a member
// to be replaced is not restarted).
func rollNeeded(m *model, d Desired) bool {
	for _, mm := range m.members {
		if mm.voter() && mm.pod && (mm.version != d.Version || mm.configHash != d.ConfigHash || mm.serves(d) != final(d) || m.mistrusts(mm)) && replacement(mm, d) == "" {
			return true
		}
	}
	return false
}

// upgrade moves one member at a time to spec.version: followers first, the leader last
// after leadership has moved to an upgraded member.
func upgrade(m *model, d Desired) (plan.Step, bool) {
	return rollOne(m, d, plan.WhyLeaderRestartsLast, func(mm *member) bool { return mm.version != d.Version }, func(mm *member, pre plan.PreconditionKind) plan.Step {
		s := step(plan.UpgradeMember, mm, pre, plan.WhyVersionChanged, "spec.version %s -> %s", mm.version, d.Version)
		s.Version = d.Version
		return s
	})
}

// reconfigure re-creates, one at a time, the Pods whose configuration differs from the spec.
func reconfigure(m *model, d Desired) (plan.Step, bool) {
	return rollOne(m, d, plan.WhyLeaderRestartsLast, func(mm *member) bool { return mm.configHash != d.ConfigHash }, func(mm *member, pre plan.PreconditionKind) plan.Step {
		s := step(plan.RestartMember, mm, pre, plan.WhyConfigChanged, "%s", configReason(mm, d))
		s.Version = mm.version
		return s
	})
}

// rollDown upgrades or reconfigures a voter that does not answer, before anything else but
// starting Pods: the new spec may be what mends it. One that is down goes first: restarting
// it takes nothing more down. A silent one may be up (or hung): it goes only when the others
// keep quorum without it and another member is known to lead (a silent one may lead).
func rollDown(m *model, d Desired) (plan.Step, bool) {
	if d.Replicas == 0 {
		return plan.Step{}, false
	}
	for _, silent := range []bool{false, true} {
		for _, mm := range m.members {
			if !mm.voter() || !mm.pod || mm.podDeleting || mm.up || mm.silent != silent || m.lost(mm, d) {
				continue
			}
			code, why := plan.WhyMemberDown, "%s is down, so restarting it costs nothing"
			if silent {
				if ok, _ := withinBudget(m, mm, plan.RestartMember); !ok || m.leader == "" || m.leader == mm.name {
					continue
				}
				code, why = plan.WhyMemberSilent, "%s does not answer, and the others keep quorum without it"
			}
			if mm.version != d.Version {
				s := step(plan.UpgradeMember, mm, plan.PreNone, code, "spec.version %s -> %s; "+why, mm.version, d.Version, mm.name)
				s.Version = d.Version
				return s, true
			}
			if mm.configHash != d.ConfigHash {
				s := step(plan.RestartMember, mm, plan.PreNone, code, "%s; "+why, configReason(mm, d), mm.name)
				s.Version = mm.version
				return s, true
			}
		}
	}
	return plan.Step{}, false
}

// configReason says which spec fields a member's Pod differs in, when its Pod records
// them (Pods of earlier versions do not).
func configReason(mm *member, d Desired) string {
	have, want := fieldHashes(mm.configFields), fieldHashes(d.ConfigFields)
	var changed []string
	for _, f := range slices.Sorted(maps.Keys(want)) {
		if have[f] != want[f] {
			changed = append(changed, "spec."+f)
		}
	}
	if len(have) == 0 || len(changed) == 0 {
		return fmt.Sprintf("the Pod of %s differs from the spec", mm.name)
	}
	return fmt.Sprintf("%s changed", strings.Join(changed, ", "))
}

// fieldHashes reads "field=hash,..." (EtcdClusterSpec.ConfigFields).
func fieldHashes(s string) map[string]string {
	out := map[string]string{}
	for _, pair := range strings.Split(s, ",") {
		if f, h, ok := strings.Cut(pair, "="); ok {
			out[f] = h
		}
	}
	return out
}

// rollOne returns the step for the first voter that is up and needs it, while the whole
// cluster is healthy, the leader last, after leadership moved (the transfer's reason is
// last). Two voters never restart or defragment one of theirs: scaleUp adds a third first.
func rollOne(m *model, d Desired, last plan.Why, needs func(*member) bool, do func(*member, plan.PreconditionKind) plan.Step) (plan.Step, bool) {
	if voters := m.countVoters(); voters == 2 {
		return plan.Step{}, false
	}
	for _, mm := range leaderLast(m) {
		if !mm.voter() || !mm.pod || mm.podDeleting || !needs(mm) || replacement(mm, d) != "" {
			continue
		}
		if s, ok := transferFrom(m, mm, last, "%s leads and is %s last", mm.name, lastWords[last]); ok {
			return s, true
		}
		return do(mm, plan.PreClusterHealthy), true
	}
	return plan.Step{}, false
}

// lastWords says what a roll does to the leader last, by the transfer's reason.
var lastWords = map[plan.Why]string{plan.WhyLeaderRestartsLast: "restarted", plan.WhyLeaderDefragmentedLast: "defragmented"}

// transferFrom moves leadership away from mm when it leads and another voter can take it.
func transferFrom(m *model, mm *member, why plan.Why, reason string, args ...any) (plan.Step, bool) {
	if m.leader != mm.name {
		return plan.Step{}, false
	}
	// The first voter by ordinal that can run, whether or not it answers this moment: a
	// member restarted by the step before is still starting, and the plan must not change
	// its mind (and its ID) when it does. The precondition waits for the target's health.
	var target *member
	for _, x := range m.members {
		if x != mm && x.voter() && x.pod && !x.podDeleting && !x.noData() {
			target = x
			break
		}
	}
	if target == nil {
		return plan.Step{}, false // a single voter has nobody to hand over to
	}
	return handOver(mm, target, why, reason, args...), true
}

// handOver is the step that moves leadership from mm to target once target is healthy.
func handOver(mm, target *member, why plan.Why, reason string, args ...any) plan.Step {
	s := step(plan.TransferLeadership, mm, plan.PreMemberHealthy, why, reason, args...)
	s.Target, s.TargetID, s.Precondition.Member = target.name, target.id, target.name
	return s
}

// leaderLast returns the members in ordinal order with the leader moved to the end.
func leaderLast(m *model) []*member {
	out := make([]*member, 0, len(m.members))
	var leader *member
	for _, mm := range m.members {
		if mm.name == m.leader {
			leader = mm
			continue
		}
		out = append(out, mm)
	}
	if leader != nil {
		out = append(out, leader)
	}
	return out
}

// renewCertificates renews the certificates the operator issued at two thirds of their
// life, every one due first, then waits for the members to serve those they mount. Nothing
// restarts, so it comes right after the repairs: a plan of long rolls must not hold it up
// while the certificates' last third runs out.
func renewCertificates(m *model, d Desired) (plan.Step, bool) {
	if !m.bootstrapped {
		return plan.Step{}, false
	}
	pre := plan.Precondition{Kind: plan.PreNone}
	for _, r := range m.renewals {
		switch {
		case r.Rotated && !r.Unserved:
			return plan.Step{Action: plan.RenewCertificate, Secret: r.Secret, Precondition: pre, Why: plan.WhyCARotated,
				Reason: fmt.Sprintf("the certificate in Secret %s comes from the old CA: it is issued again from the new one (pass 2 of 3 of the CA rotation)", r.Secret)}, true
		case !r.Unserved:
			return plan.Step{Action: plan.RenewCertificate, Secret: r.Secret, Precondition: pre, Why: plan.WhyCertificateDue,
				Reason: fmt.Sprintf("the certificate in Secret %s reached two thirds of its life", r.Secret)}, true
		}
	}
	if len(m.renewals) == 0 {
		return plan.Step{}, false
	}
	r := m.renewals[0] // every one left was renewed
	return plan.Step{Action: plan.AwaitCertificate, Secret: r.Secret, Precondition: pre, Why: plan.WhyCertificateUnserved,
		Reason: fmt.Sprintf("the certificate in Secret %s was renewed; the members that mount it serve it within a minute or so", r.Secret)}, true
}
