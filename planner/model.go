package planner

import (
	"sort"

	"github.com/etcdplan/etcdplan/api/plan"
)

// member joins what Kubernetes and etcd know of one member.
type member struct {
	name    string
	ordinal int
	id      string

	inEtcd  bool // in etcd's membership
	learner bool
	started bool // has run at least once
	healthy bool

	pod         bool
	podDeleting bool
	seed        bool
	dataLost    bool
	pvc         bool
	pvcDeleting bool
	version     string // the version the member runs (or will run once its Pod starts)
	configHash  string
	raftIndex   uint64
}

func (m *member) voter() bool { return m.inEtcd && !m.learner }

// model is the planner's working copy of the cluster. Plan derives each step from it and
// then applies the step's expected effect to it, so one pass yields the whole ordered plan.
type model struct {
	cluster      string
	bootstrapped bool // the cluster has formed once: later members join it, never seed anew
	reachable    bool // some member answered
	leader       string
	members      []*member // by ordinal
	nextOrdinal  int
}

func newModel(cluster string, o Observed) *model {
	m := &model{cluster: cluster, nextOrdinal: o.NextOrdinal, reachable: o.Etcd != nil}
	byName := map[string]*member{}
	get := func(name string) *member {
		if mm, ok := byName[name]; ok {
			return mm
		}
		mm := &member{name: name, ordinal: Ordinal(cluster, name)}
		byName[name] = mm
		m.members = append(m.members, mm)
		return mm
	}
	if o.Etcd != nil {
		for _, em := range o.Etcd.Members {
			mm := get(em.MemberName())
			mm.id, mm.inEtcd, mm.learner, mm.started = em.ID, true, em.Learner, em.Started()
			mm.healthy, mm.version, mm.raftIndex = em.Healthy && em.Started(), em.Version, em.RaftIndex
			if em.ID == o.Etcd.LeaderID {
				m.leader = mm.name
			}
		}
	}
	for _, k := range o.Members {
		mm := get(k.Name)
		if k.Pod != nil {
			mm.pod, mm.podDeleting, mm.seed, mm.dataLost = true, k.Pod.Deleting, k.Pod.Seed, k.Pod.DataLost
			mm.configHash = k.Pod.ConfigHash
			if k.Pod.Version != "" {
				mm.version = k.Pod.Version
			}
		}
		if k.PVC != nil {
			mm.pvc, mm.pvcDeleting = true, k.PVC.Deleting
			if mm.id == "" {
				mm.id = k.PVC.MemberID
			}
		}
	}
	recorded := map[string]bool{}
	if o.Etcd == nil {
		for _, r := range o.Recorded {
			mm := get(r.Name)
			if mm.id == "" {
				mm.id = r.ID
			}
			mm.learner, recorded[r.Name] = r.Learner, true
		}
	}
	m.bootstrapped = o.ClusterID != "" || (o.Etcd != nil && len(o.Etcd.Members) > 0)
	for _, mm := range m.members {
		m.bootstrapped = m.bootstrapped || (mm.id != "" && mm.pvc) // volumes of an earlier life
	}
	if o.Etcd == nil {
		m.assumeMembership(recorded)
	}
	sort.Slice(m.members, func(i, j int) bool {
		a, b := m.members[i], m.members[j]
		if a.ordinal != b.ordinal {
			return a.ordinal < b.ordinal
		}
		return a.name < b.name
	})
	for _, mm := range m.members {
		if mm.ordinal >= m.nextOrdinal {
			m.nextOrdinal = mm.ordinal + 1
		}
	}
	return m
}

// assumeMembership fills in membership when no member answers. The membership recorded in
// status is the best record; without one (a cluster re-created on retained volumes), the
// member IDs recorded on volumes are. Before the cluster first answers, its seed is a member.
func (m *model) assumeMembership(recorded map[string]bool) {
	for _, mm := range m.members {
		known := recorded[mm.name] || (len(recorded) == 0 && mm.id != "")
		if known || (mm.seed && !m.bootstrapped) {
			mm.inEtcd, mm.started = true, mm.started || !mm.learner || mm.pod
		}
	}
}

func (m *model) get(name string) *member {
	for _, mm := range m.members {
		if mm.name == name {
			return mm
		}
	}
	return nil
}

func (m *model) voters() (all, healthy int) {
	for _, mm := range m.members {
		if mm.voter() {
			all++
			if mm.healthy {
				healthy++
			}
		}
	}
	return all, healthy
}

func (m *model) learners() []*member {
	var out []*member
	for _, mm := range m.members {
		if mm.inEtcd && mm.learner {
			out = append(out, mm)
		}
	}
	return out
}

// lost reports whether a member's data is gone: its volume was wiped or deleted, or it
// lived in memory and its Pod is gone.
func (m *model) lost(mm *member, d Desired) bool {
	if mm.dataLost {
		return true
	}
	return m.bootstrapped && mm.started && !mm.pod && (d.Memory || !mm.pvc)
}

func quorum(n int) int { return n/2 + 1 }

// apply changes the model as the step will change the cluster once it has succeeded.
// Every step waits for its precondition first, so the members it relies on are healthy.
func (m *model) apply(s plan.Step, desired Desired) {
	mm := m.get(s.Member)
	switch s.Action {
	case plan.CreateSeed:
		if mm == nil {
			mm = &member{name: s.Member, ordinal: Ordinal(m.cluster, s.Member)}
			m.members = append(m.members, mm)
		}
		*mm = member{name: mm.name, ordinal: mm.ordinal, inEtcd: true, started: true, healthy: true,
			pod: true, seed: true, pvc: true, version: s.Version, configHash: desired.ConfigHash}
		m.leader, m.bootstrapped, m.reachable = mm.name, true, true
	case plan.AddLearner:
		m.members = append(m.members, &member{name: s.Member, ordinal: Ordinal(m.cluster, s.Member), inEtcd: true, learner: true})
	case plan.StartMember:
		mm.pod, mm.pvc, mm.started, mm.healthy, mm.dataLost, mm.podDeleting = true, true, true, true, false, false
		mm.version, mm.configHash = s.Version, desired.ConfigHash
	case plan.PromoteLearner:
		mm.learner = false
	case plan.TransferLeadership:
		m.leader = s.Target
	case plan.RemoveMember:
		mm.inEtcd, mm.learner, mm.healthy = false, false, false
	case plan.DeleteMember:
		for i, x := range m.members {
			if x == mm {
				m.members = append(m.members[:i], m.members[i+1:]...)
				break
			}
		}
	case plan.StopMember:
		mm.pod, mm.healthy = false, false
		if m.leader == mm.name {
			m.leader = ""
		}
	case plan.UpgradeMember, plan.RestartMember:
		mm.version, mm.configHash, mm.healthy = s.Version, desired.ConfigHash, true
	}
	for _, x := range m.members {
		if x.ordinal >= m.nextOrdinal {
			m.nextOrdinal = x.ordinal + 1
		}
	}
}

// satisfy makes the step's precondition true in the model, as waiting for it does in the
// cluster. Only members that can recover (running, data intact) become healthy.
func (m *model) satisfy(p plan.Precondition) {
	heal := func(mm *member) {
		if mm != nil && mm.inEtcd && mm.pod && !mm.dataLost {
			mm.healthy, mm.started = true, true
		}
	}
	switch p.Kind {
	case plan.PreMemberHealthy, plan.PreLearnerCaughtUp:
		heal(m.get(p.Member))
	case plan.PreClusterHealthy, plan.PreQuorumWithout:
		for _, mm := range m.members {
			if mm.voter() && mm.name != p.Member {
				heal(mm)
			}
		}
	}
	if m.leader == "" {
		for _, mm := range m.members {
			if mm.voter() && mm.healthy {
				m.leader = mm.name
				break
			}
		}
	}
}
