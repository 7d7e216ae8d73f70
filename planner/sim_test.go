package planner

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/etcdplan/etcdplan/api/plan"
)

// world is a small simulation of an etcd cluster and its Pods, independent of the planner's
// model: tests apply plans to it step by step and check etcd's safety rules as they go.
type world struct {
	cluster   string
	clusterID string
	leader    string
	members   map[string]*wmember
	nextID    int
	memory    bool
}

type wmember struct {
	name, id                     string
	inEtcd, learner, started     bool
	pod, seed, dataLost, healthy bool
	pvc                          bool
	version, hash                string
}

func (w *world) sorted() []*wmember {
	out := make([]*wmember, 0, len(w.members))
	for _, m := range w.members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		return Ordinal(w.cluster, out[i].name) < Ordinal(w.cluster, out[j].name)
	})
	return out
}

func (w *world) voters() (all, healthy int) {
	for _, m := range w.members {
		if m.inEtcd && !m.learner {
			all++
			if m.live() {
				healthy++
			}
		}
	}
	return all, healthy
}

func (m *wmember) live() bool { return m.pod && m.started && m.healthy && !m.dataLost }

// observe renders the world as the executor would observe it.
func (w *world) observe() Observed {
	o := Observed{FormatVersion: ObservedFormatVersion, ClusterID: w.clusterID}
	all, healthy := w.voters()
	reachable := w.clusterID != "" && all > 0 && healthy >= quorum(all)
	if reachable {
		o.Etcd = &EtcdView{ClusterID: w.clusterID}
	}
	for _, m := range w.sorted() {
		if m.inEtcd {
			o.Recorded = append(o.Recorded, RecordedMember{Name: m.name, ID: m.id, Learner: m.learner})
		}
	}
	for _, m := range w.sorted() {
		km := Member{Name: m.name}
		if m.pod {
			km.Pod = &Pod{Running: true, Ready: m.live(), Seed: m.seed, DataLost: m.dataLost, Version: m.version, ConfigHash: m.hash}
		}
		if m.pvc {
			km.PVC = &PVC{Bound: true}
			if m.started {
				km.PVC.MemberID = m.id
			}
		}
		if km.Pod != nil || km.PVC != nil {
			o.Members = append(o.Members, km)
		}
		if reachable && m.inEtcd {
			em := EtcdMember{ID: m.id, PeerURLs: []string{"http://" + m.name + "." + w.cluster + ".default.svc:2380"},
				Learner: m.learner, Healthy: m.live(), RaftIndex: 100}
			if m.started {
				em.Name, em.Version = m.name, m.version
			}
			o.Etcd.Members = append(o.Etcd.Members, em)
			if m.name == w.leader && m.live() {
				o.Etcd.LeaderID = m.id
			}
		}
	}
	return o
}

// heal makes a member healthy when waiting could: its Pod exists and its data is intact.
func (w *world) heal(name string) {
	if m := w.members[name]; m != nil && m.inEtcd && m.pod && !m.dataLost {
		m.healthy, m.started = true, true
		if m.seed && w.clusterID == "" {
			w.clusterID = "c1" // the seed formed the cluster
		}
	}
}

func (w *world) satisfy(p plan.Precondition) {
	switch p.Kind {
	case plan.PreMemberHealthy, plan.PreLearnerCaughtUp:
		w.heal(p.Member)
	case plan.PreClusterHealthy, plan.PreQuorumWithout:
		for _, m := range w.members {
			if m.inEtcd && !m.learner && m.name != p.Member {
				w.heal(m.name)
			}
		}
	}
	if l := w.members[w.leader]; l == nil || !l.live() || l.learner {
		w.leader = ""
		for _, m := range w.sorted() {
			if m.inEtcd && !m.learner && m.live() {
				w.leader = m.name
				break
			}
		}
	}
}

// apply waits for the step's precondition, checks the safety rules and applies the step.
// It returns an error when a rule is broken, and stuck when the precondition cannot be met.
func (w *world) apply(s plan.Step, d Desired) (stuck bool, err error) {
	w.satisfy(s.Precondition)
	if ok, _ := Check(w.cluster, s, w.observe()); !ok {
		return true, nil
	}
	m := w.members[s.Member]
	all, healthy := w.voters()
	isVoter := m != nil && m.inEtcd && !m.learner
	switch s.Action {
	case plan.CreateSeed:
		if w.clusterID != "" {
			return false, fmt.Errorf("CreateSeed %s in a formed cluster", s.Member)
		}
		w.nextID++
		w.members[s.Member] = &wmember{name: s.Member, id: strconv.Itoa(w.nextID), inEtcd: true, started: true,
			pod: true, seed: true, healthy: true, pvc: !w.memory, version: s.Version, hash: d.ConfigHash}
		w.clusterID, w.leader = "c1", s.Member
	case plan.AddLearner:
		for _, x := range w.members {
			if x.inEtcd && (x.learner || !x.started) {
				return false, fmt.Errorf("AddLearner %s while %s has not finished joining", s.Member, x.name)
			}
		}
		if m != nil {
			return false, fmt.Errorf("AddLearner %s re-uses a member name", s.Member)
		}
		w.nextID++
		w.members[s.Member] = &wmember{name: s.Member, id: strconv.Itoa(w.nextID), inEtcd: true, learner: true}
	case plan.StartMember:
		if m == nil || !m.inEtcd {
			return false, fmt.Errorf("StartMember %s, which is not in the membership", s.Member)
		}
		if m.dataLost {
			return false, fmt.Errorf("StartMember %s on lost data", s.Member)
		}
		m.pod, m.pvc, m.started, m.healthy = true, !w.memory, true, true
		m.version, m.hash = s.Version, d.ConfigHash
	case plan.PromoteLearner:
		m.learner = false
	case plan.TransferLeadership:
		if t := w.members[s.Target]; t == nil || !t.live() || t.learner {
			return false, fmt.Errorf("TransferLeadership to %s, which cannot lead", s.Target)
		}
		w.leader = s.Target
	case plan.RemoveMember:
		if w.leader == s.Member && m.live() && healthy >= quorum(all) && all > 1 { // a leader needs a quorum
			return false, fmt.Errorf("RemoveMember %s while it leads", s.Member)
		}
		if isVoter {
			left := healthy
			if m.live() {
				left--
			}
			if healthy >= quorum(all) && left < quorum(all-1) {
				return false, fmt.Errorf("RemoveMember %s loses quorum: %d healthy of %d left", s.Member, left, all-1)
			}
		}
		m.inEtcd, m.learner = false, false
	case plan.DeleteMember:
		if m.inEtcd {
			return false, fmt.Errorf("DeleteMember %s, which is still in the membership", s.Member)
		}
		delete(w.members, s.Member)
	case plan.StopMember:
		if d.Replicas != 0 {
			return false, fmt.Errorf("StopMember %s with replicas %d", s.Member, d.Replicas)
		}
		m.pod, m.healthy = false, false
		if w.memory {
			m.dataLost = true
		}
	case plan.UpgradeMember, plan.RestartMember:
		if w.leader == s.Member && m.live() && healthy >= quorum(all) && all > 1 { // a leader needs a quorum
			return false, fmt.Errorf("%s %s while it leads", s.Action, s.Member)
		}
		// With one or two voters any restart costs quorum for a moment: nothing can avoid it.
		left := healthy
		if m.live() {
			left--
		}
		if all > 2 && healthy >= quorum(all) && left < quorum(all) {
			return false, fmt.Errorf("%s %s loses quorum while it restarts", s.Action, s.Member)
		}
		if s.Action == plan.UpgradeMember {
			from, _ := ParseVersion(m.version)
			to, _ := ParseVersion(s.Version)
			if to.Compare(from) < 0 || to.Minor > from.Minor+1 {
				return false, fmt.Errorf("UpgradeMember %s %s -> %s", s.Member, from, to)
			}
		}
		m.version, m.hash = s.Version, d.ConfigHash
	default:
		return false, fmt.Errorf("unknown action %q", s.Action)
	}
	for k, x := range w.members {
		if !x.inEtcd && !x.pod && !x.pvc {
			delete(w.members, k) // nothing left of it anywhere
		}
	}
	return false, nil
}
