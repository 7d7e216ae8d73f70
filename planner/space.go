package planner

import (
	"fmt"
	"slices"
	"strings"

	"github.com/etcdplan/etcdplan/api/plan"
)

// The alarms etcd raises, as Alarm.Type names them.
const (
	AlarmNoSpace = "NOSPACE"
	AlarmCorrupt = "CORRUPT"
)

// defaultQuota is etcd's backend quota when spec.options.quotaBackendBytes is not set.
const defaultQuota = 2 << 30

// nospacePercent is the free share of a member's database that a NOSPACE alarm has it
// defragmented for, and minReclaim the least free space worth a defragmentation: a member
// serves nothing while it runs.
const (
	nospacePercent = 10
	minReclaim     = 1 << 20
)

// alarmed lists the members (IDs) with an alarm of the type.
func (m *model) alarmed(kind string) []string {
	var ids []string
	for _, a := range m.alarms {
		if a.Type == kind {
			ids = append(ids, a.MemberID)
		}
	}
	return ids
}

// fragmented: at least pct percent of the member's database, and at least minReclaim, is
// free space that defragmentation gives back.
func fragmented(mm *member, pct int) bool { return fragmentedBy(mm.dbSize, mm.dbInUse, pct) }

func fragmentedBy(size, inUse int64, pct int) bool {
	free := size - inUse
	return pct > 0 && free >= minReclaim && free*100 >= int64(pct)*size
}

// quotaOf is the backend quota a member runs with.
func quotaOf(mm *member, d Desired) int64 {
	switch {
	case mm.quota > 0:
		return mm.quota
	case d.QuotaBytes > 0:
		return d.QuotaBytes
	}
	return defaultQuota
}

// recoverSpace answers a NOSPACE alarm as etcd's maintenance guide does: compact the
// history, defragment the members that then hold free space (followers first, the leader
// last after leadership moved, one at a time), and disarm the alarm once every voter's
// database is under its quota.
func recoverSpace(m *model, d Desired) (plan.Step, bool) {
	ids := m.alarmed(AlarmNoSpace)
	if len(ids) == 0 || !m.bootstrapped {
		return plan.Step{}, false
	}
	if !m.historyCompacted {
		return plan.Step{Action: plan.Compact, Precondition: plan.Precondition{Kind: plan.PreClusterHealthy}, Why: plan.WhyNoSpaceCompact,
			Reason: "NOSPACE alarm: compact the history so that its space can be reclaimed"}, true
	}
	if s, ok := rollOne(m, d, plan.WhyLeaderDefragmentedLast, m.noSpaceDefrag, func(mm *member, pre plan.PreconditionKind) plan.Step {
		return step(plan.Defragment, mm, pre, plan.WhyNoSpaceDefragment, "NOSPACE alarm: the database of %s holds free space to give back", mm.name)
	}); ok {
		return s, true
	}
	if overQuota(m, d) != nil {
		return plan.Step{}, false // noSpaceLeft says what to do
	}
	s := plan.Step{Action: plan.DisarmAlarm, MemberID: ids[0], Precondition: plan.Precondition{Kind: plan.PreClusterHealthy}, Why: plan.WhyNoSpaceDisarm,
		Reason: "NOSPACE alarm: every member's database is under its quota again"}
	for _, mm := range m.members {
		if mm.id == ids[0] {
			s.Member = mm.name
		}
	}
	return s, true
}

// noSpaceDefrag: under a NOSPACE alarm, once the history is compacted, a member whose
// database then holds free space is defragmented.
func (m *model) noSpaceDefrag(mm *member) bool {
	return len(m.alarmed(AlarmNoSpace)) > 0 && m.bootstrapped && m.historyCompacted && fragmented(mm, nospacePercent)
}

// disarmPending: under a NOSPACE alarm, the history is compacted and every voter's
// database is under its quota, so the alarm is to be disarmed.
func (m *model) disarmPending(d Desired) bool {
	return len(m.alarmed(AlarmNoSpace)) > 0 && m.bootstrapped && m.historyCompacted && overQuota(m, d) == nil
}

// defragWanted: spec.maintenance.defrag asks for the member's defragmentation: its free
// space reached the threshold, or the schedule is due for it. A due member is
// defragmented once it shows free space: one that has not answered yet may hold none.
func (m *model) defragWanted(mm *member, d Desired) bool {
	return mm.up && (fragmented(mm, d.DefragPercent) || m.defragDue[mm.id] && fragmented(mm, 1))
}

// defragNeeded: a voter that can be defragmented is to be, for a NOSPACE alarm or for
// spec.maintenance.defrag.
func defragNeeded(m *model, d Desired) bool {
	for _, mm := range m.members {
		if mm.voter() && mm.pod && !mm.podDeleting && replacement(mm, d) == "" && (m.noSpaceDefrag(mm) || m.defragWanted(mm, d)) {
			return true
		}
	}
	return false
}

// overQuota returns a voter whose database leaves less than a tenth of its quota free, or
// nil: etcd raises NOSPACE before a write would pass the quota, so a database just under it
// would raise the alarm again with the next writes.
func overQuota(m *model, d Desired) *member {
	for _, mm := range m.members {
		if mm.voter() && mm.dbSize*10 > quotaOf(mm, d)*9 {
			return mm
		}
	}
	return nil
}

// noSpaceLeft blocks a plan with nothing left to do while a NOSPACE alarm stays: the data
// itself does not fit under the quota.
func noSpaceLeft(m *model, d Desired) *plan.Blocker {
	mm := overQuota(m, d)
	if len(m.alarmed(AlarmNoSpace)) == 0 || mm == nil || !m.historyCompacted {
		return nil
	}
	return &plan.Blocker{Reason: plan.BlockQuotaTooSmall, Message: fmt.Sprintf(
		"NOSPACE alarm: the database of %s is %s (%s of it in use) against a quota of %s, and compaction and defragmentation give back too little: "+
			"etcd raises the alarm again while a database is within a tenth of its quota; raise spec.options.quotaBackendBytes (members restart one at a time with it) "+
			"or delete keys (the history is then compacted and the members defragmented), and the alarm is disarmed once the database fits",
		mm.name, mib(mm.dbSize), mib(mm.dbInUse), mib(quotaOf(mm, d)))}
}

// defragFragmented defragments, one at a time and the leader last, the members whose
// free space reached spec.maintenance.defrag's threshold, and those its schedule is due
// for.
func defragFragmented(m *model, d Desired) (plan.Step, bool) {
	return rollOne(m, d, plan.WhyLeaderDefragmentedLast, func(mm *member) bool { return m.defragWanted(mm, d) }, func(mm *member, pre plan.PreconditionKind) plan.Step {
		if m.defragDue[mm.id] && fragmented(mm, 1) {
			return step(plan.Defragment, mm, pre, plan.WhyDefragScheduled, "spec.maintenance.defrag.schedule came while the database of %s held %s free", mm.name, mib(mm.dbSize-mm.dbInUse))
		}
		return step(plan.Defragment, mm, pre, plan.WhyDefragThreshold, "free space in the database of %s reached spec.maintenance.defrag.thresholdPercent %d",
			mm.name, d.DefragPercent)
	})
}

// DefragStillDue keeps, of the member IDs a scheduled defragmentation has to do, those
// still to do: a member gone from a membership read through a quorum is done, and so is
// one that answers with less than pct percent (or 1 MiB) of its database free, whatever
// defragmented it. A member that does not answer stays due.
func DefragStillDue(o Observed, ids []string, pct int) []string {
	if o.Etcd == nil {
		return ids
	}
	var due []string
	for _, id := range ids {
		i := slices.IndexFunc(o.Etcd.Members, func(em EtcdMember) bool { return em.ID == id })
		switch {
		case i < 0 && o.Etcd.Linearizable:
		case i >= 0 && o.Etcd.Members[i].Answering && !fragmentedBy(o.Etcd.Members[i].DBSize, o.Etcd.Members[i].DBInUse, pct):
		default:
			due = append(due, id)
		}
	}
	return due
}

// refuseCorrupt blocks everything while etcd reports corrupt data: which member holds the
// right data is for a person to find out.
func refuseCorrupt(m *model) *plan.Blocker {
	ids := m.alarmed(AlarmCorrupt)
	if len(ids) == 0 {
		return nil
	}
	return &plan.Blocker{Reason: plan.BlockCorrupt, Message: fmt.Sprintf(
		"CORRUPT alarm on member %s: members hold different data, and the operator changes nothing until the alarm is cleared; "+
			"compare the members (etcdctl endpoint hashkv --cluster), take a snapshot of a member whose data is right, "+
			"replace the others (delete their volume claims: they rejoin as new members), then etcdctl alarm disarm (docs/operations.md)",
		strings.Join(ids, ", "))}
}

// SpaceStepsShown counts the leading steps that are space steps whose effects show on
// their own in the observation, whatever a fresh plan goes on with: the history compacted,
// the member no longer fragmented, the alarm gone. What a compaction frees shows only after
// it, so the plan that compacted cannot foresee the next steps: the executor records the
// steps shown as done, though the plan's rest may be superseded. A survivor's snapshot is
// shown alike once its EtcdBackup succeeded, a voter started to show whether it kept its
// data once its Pod is there, and a check of a voter's data once its check Pod is there: the plans that took them stop there.
func SpaceStepsShown(d Desired, steps []plan.Step, o Observed) int {
	m := newModel(d, o)
	for i, s := range steps {
		mm := m.get(s.Member)
		switch {
		case s.Action == plan.Compact && m.historyCompacted:
		case s.Action == plan.Defragment && mm != nil && mm.id == s.MemberID && mm.up && !fragmented(mm, nospacePercent):
		case s.Action == plan.DisarmAlarm && !slices.Contains(m.alarmed(AlarmNoSpace), s.MemberID):
		case s.Action == plan.SnapshotSurvivor && mm != nil && mm.id == s.MemberID && m.snapshotShown(mm, s.Why):
		case s.Action == plan.CheckData && mm != nil && mm.id == s.MemberID && mm.check != nil:
		case s.Why == plan.WhyShowData && mm != nil && mm.id == s.MemberID && (mm.pod && !mm.podDeleting || mm.dataLost):
		default:
			return i
		}
	}
	return len(steps)
}

// snapshotShown: a survivor's snapshot step shows done: an early one once its EtcdBackup
// is there, a recovery's once it succeeded on the claim the step marked, one in memory once
// it succeeded.
func (m *model) snapshotShown(mm *member, why plan.Why) bool {
	s := m.snapshotOf(mm)
	switch {
	case s == nil:
		return false
	case why == plan.WhySurvivorSnapshotEarly:
		return true
	}
	return s.Phase == SnapshotSucceeded && (why != plan.WhySurvivorSnapshot || mm.snapshotted)
}

// mib renders a size in MiB.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
