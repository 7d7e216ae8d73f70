// Package planner turns the desired EtcdCluster spec and the observed cluster into an
// ordered plan. It is pure: no client, no clock, no I/O, no randomness. The same input
// gives the same plan, byte for byte.
package planner

import (
	"fmt"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// Step is the API's type: a plan is recorded in status as the planner makes it.
type Step = v1alpha1.Step

// maxSteps bounds a plan; a longer one means a rule that does not converge.
const maxSteps = 200

type desiredState struct {
	replicas   int
	version    string
	configHash string
	memory     bool // member data lives in memory, so it is gone with the Pod
}

// Plan returns the ordered steps that take the observed cluster to the desired spec.
func Plan(desired *v1alpha1.EtcdCluster, observed Observed) v1alpha1.Plan {
	d := desiredState{
		replicas:   int(desired.Spec.Replicas),
		version:    desired.Spec.Version,
		configHash: ConfigHash(&desired.Spec),
		memory:     desired.Spec.Storage.Medium == v1alpha1.StorageMediumMemory,
	}
	m := newModel(desired.Name, observed)
	p := v1alpha1.Plan{
		FormatVersion: v1alpha1.PlanFormatVersion,
		Generation:    desired.Generation,
		Fingerprint:   observed.Fingerprint(),
	}
	if b := refuse(m, d); b != nil {
		p.Blocked = b
	} else {
		for len(p.Steps) < maxSteps {
			s, ok := next(m, d)
			if !ok {
				break
			}
			p.Steps = append(p.Steps, s)
			m.satisfy(s.Precondition)
			m.apply(s, d)
		}
	}
	p.ID = PlanID(p)
	return p
}

// PlanID hashes what identifies a plan: the generation it was made for, the state it was
// made from, and its steps (without their progress).
func PlanID(p v1alpha1.Plan) string {
	type step struct {
		Action              v1alpha1.Action
		Member, Target, Ver string
		Precondition        v1alpha1.Precondition
		Reason              string
	}
	steps := make([]step, len(p.Steps))
	for i, s := range p.Steps {
		steps[i] = step{s.Action, s.Member, s.Target, s.Version, s.Precondition, s.Reason}
	}
	return hashJSON(struct {
		Generation  int64
		Fingerprint string
		Steps       []step
		Blocked     *v1alpha1.Blocker
	}{p.Generation, p.Fingerprint, steps, p.Blocked})[:12]
}

// refuse returns why no plan can be made, or nil.
func refuse(m *model, d desiredState) *v1alpha1.Blocker {
	if b := refuseVersion(m, d); b != nil {
		return b
	}
	return refuseQuorum(m, d)
}

func refuseVersion(m *model, d desiredState) *v1alpha1.Blocker {
	want, err := ParseVersion(d.version)
	if err != nil {
		return &v1alpha1.Blocker{Reason: v1alpha1.BlockDowngrade, Message: err.Error()}
	}
	for _, mm := range m.members {
		if mm.version == "" || !mm.inEtcd && !mm.pod {
			continue
		}
		have, err := ParseVersion(mm.version)
		if err != nil {
			continue
		}
		switch {
		case want.Compare(have) < 0:
			return &v1alpha1.Blocker{Reason: v1alpha1.BlockDowngrade, Message: fmt.Sprintf(
				"member %s runs %s and spec.version asks for %s: etcd cannot be downgraded; set spec.version to %s or newer",
				mm.name, have, want, have)}
		case want.Major != have.Major || want.Minor > have.Minor+1:
			return &v1alpha1.Blocker{Reason: v1alpha1.BlockSkippedMinor, Message: fmt.Sprintf(
				"member %s runs %s and spec.version asks for %s: etcd upgrades one minor version at a time; set spec.version to a %d.%d.x release first",
				mm.name, have, want, have.Major, have.Minor+1)}
		}
	}
	return nil
}

// refuseQuorum blocks when so many voters lost their data that the rest cannot form a
// quorum: only a restore from a snapshot can bring the cluster back.
func refuseQuorum(m *model, d desiredState) *v1alpha1.Blocker {
	all, lost := 0, 0
	for _, mm := range m.members {
		if mm.voter() {
			all++
			if m.lost(mm, d) {
				lost++
			}
		}
	}
	if all > 0 && all-lost < quorum(all) {
		return &v1alpha1.Blocker{Reason: v1alpha1.BlockQuorumLost, Message: fmt.Sprintf(
			"%d of %d voting members lost their data, so the rest cannot form a quorum: restore the cluster from a backup", lost, all)}
	}
	return nil
}

// next returns the first step towards the desired state, in a fixed order of concerns:
// bootstrap, finish a membership change in flight, repair, stop or start Pods, scale down,
// scale up, upgrade, then configuration.
func next(m *model, d desiredState) (v1alpha1.Step, bool) {
	for _, rule := range []func(*model, desiredState) (v1alpha1.Step, bool){
		bootstrap, finishMembershipChange, replaceLostMember, deleteLeftovers, stopMembers,
		startMissingPods, scaleDown, scaleUp, upgrade, reconfigure,
	} {
		if s, ok := rule(m, d); ok {
			return s, true
		}
	}
	return v1alpha1.Step{}, false
}
