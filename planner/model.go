package planner

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/vocab"
)

// member joins what Kubernetes and etcd know of one member. Health is kept as facts: the
// member answers (it runs and replied to a status request) and knows a leader. Alarms are
// the cluster's, never a member's health.
type member struct {
	name    string
	ordinal int
	id      string // etcd member ID: from etcd, else from the volume or status
	pvcID   string // the member ID recorded on the volume claim once the member joined
	source  bool   // a member of an adopted cluster's source: no Pod, no claim, never acted on but to leave

	inEtcd    bool // in etcd's membership
	learner   bool
	stalled   bool // a learner whose promotion passed its deadline
	started   bool // has run at least once
	up        bool // runs and answers: it counts towards quorum
	silent    bool // accepts connections but did not answer: it may be up
	hasLeader bool // knows a leader

	pod          bool // a Pod that has not ended
	running      bool // its etcd container runs (a Pod just created or restarted does not yet)
	podDeleting  bool
	seed         bool
	dataLost     bool
	preflightErr string     // its last Pod's preflight check could not read its data: down, not lost
	check        *DataCheck // what a check Pod read beside its going Pod (CheckData); nil: none
	goesAtOnce   bool       // as observed, its Pod goes while no quorum can form (stopsAtOnce)
	podEnded     bool       // its Pod ended and is still there (kept for its logs, or for a person)
	pvc          bool
	pvcDeleting  bool
	forcing      bool    // chosen to restart alone with --force-new-cluster (marked on its claim)
	snapshotted  bool    // chosen to have its snapshot taken in a recovery under way (marked on its claim)
	copied       bool    // and that snapshot succeeded: the recovery restores it
	retained     bool    // left in a recovery while holding data: its claim is kept (marked)
	restoring    *Backup // the new seed of a recovery from this backup (marked on its claim)
	version      string  // the version the member runs (or will run once its Pod starts)
	ran          string  // the version it last answered with: its data's, for the version rules
	configHash   string
	configFields string
	listen       plan.Listen // how its Pod serves, when not as the spec says
	trust        string      // the trust bundles its Pod mounted ("": not known)
	// Its peer URL in etcd's membership is known (from etcd, else its claim's record), is
	// TLS, and is on the second peer port.
	peerURLKnown, peerURLTLS, peerURLAlt bool
	raftIndex                            uint64
	raftTerm                             uint64
	// The member's database file, the part of it in use, and its quota (0: not known).
	dbSize, dbInUse, quota int64
	// Its volume claim's class and requested size (0: not known), and whether the class
	// can grow it (nil: not known).
	class      string
	bytes      int64
	expandable *bool
}

func (mm *member) voter() bool { return mm.inEtcd && !mm.learner }

// healthy: up and knows a leader, so it can serve and take part in a membership change.
func (mm *member) healthy() bool { return mm.up && mm.hasLeader }

// model is the planner's working copy of the cluster. Plan derives each step from it and
// then applies the step's expected effect to it, so one pass yields the whole ordered plan.
type model struct {
	cluster      string
	bootstrapped bool // the cluster has formed once: later members join it, never seed anew
	reachable    bool // some member answered
	linearizable bool // the member list was read through a quorum
	// clusterVersion is etcd's cluster version: the lowest minor its members run, once
	// raised never lowered but by etcd's downgrade procedure.
	clusterVersion string
	leader         string
	members        []*member // by ordinal
	alarms         []Alarm
	// historyCompacted: etcd's revisions before the current one are compacted.
	historyCompacted bool
	// defragDue are the member IDs scheduled defragmentation has still to do.
	defragDue map[string]bool
	// renewals are the certificates to renew.
	renewals []Renewal
	// trust is the trust bundles a Pod started now mounts; ca a rotation of the cluster's
	// CA (nil: none), the model's own copy.
	trust string
	ca    *CARotation
	// auth: etcd's authentication is on (nil: not known); authFromCreation: the cluster
	// was created asking for it.
	auth             *bool
	authFromCreation bool
	// users identifies the users of spec.auth.users made in etcd.
	users string
	// backup is the newest successful backup of the cluster, if any.
	backup *Backup
	// snapshotTo is where a survivor's snapshot is stored ("": not known); snapshots are
	// the EtcdBackups of named members.
	snapshotTo string
	snapshots  []MemberSnapshot
	// halt: the plan goes no further (what comes next depends on a snapshot's revision,
	// or on what the voters in awaiting show of their data).
	halt        bool
	awaiting    []string
	nextOrdinal int
	// blocked says why the membership cannot be trusted to act on (a foreign or duplicate
	// member); nothing is planned then.
	blocked *plan.Blocker
	// join is the adoption of a running cluster, as status records it (nil: none).
	join *Join
}

// newModel joins what each source knows of the cluster, in phases: etcd's view names its
// members and says how they are; Kubernetes' objects add their Pods and volume claims; the
// record in status fills in what a view that is not linearizable cannot show; finish checks
// and orders the whole.
func newModel(d Desired, o Observed) *model {
	m := &model{cluster: d.Name, nextOrdinal: o.NextOrdinal, reachable: o.Etcd != nil, defragDue: map[string]bool{}, backup: o.Backup,
		snapshotTo: o.SnapshotTo, snapshots: o.Snapshots, renewals: o.Renewals, trust: o.Trust}
	if o.CA != nil {
		ca := *o.CA
		m.ca = &ca
	}
	if o.Etcd != nil && o.Etcd.Auth != nil {
		on := *o.Etcd.Auth
		m.auth = &on
	}
	m.authFromCreation, m.users, m.join = o.AuthFromCreation, o.Users, o.Join
	for _, id := range o.DefragDue {
		m.defragDue[id] = true
	}
	m.fromEtcd(d, o)
	m.fromObjects(o)
	m.fromRecord(o)
	m.finish(d, o)
	for _, mm := range m.members {
		mm.goesAtOnce = mm.pod && mm.podDeleting && m.stopsAtOnce(d, mm.name)
	}
	return m
}

// add returns the member of that name, new if the model has none yet.
func (m *model) add(name string) *member {
	if mm := m.get(name); mm != nil {
		return mm
	}
	mm := &member{name: name, ordinal: vocab.Ordinal(m.cluster, name)}
	m.members = append(m.members, mm)
	return mm
}

// fromEtcd takes etcd's view: the membership, each member's health, version, raft position
// and database, the leader and the alarms. A member the operator must not act on blocks.
func (m *model) fromEtcd(d Desired, o Observed) {
	if o.Etcd == nil {
		return
	}
	m.linearizable, m.clusterVersion = o.Etcd.Linearizable, o.Etcd.ClusterVersion
	m.alarms, m.historyCompacted = slices.SortedFunc(slices.Values(o.Etcd.Alarms), Alarm.Compare), o.Etcd.HistoryCompacted
	joined := joinedIDs(o)
	for _, em := range o.Etcd.Members {
		name, problem := m.identify(d, em, joined)
		if o.Join.sourceID(em.ID) {
			name, problem = m.identifySource(d, em)
		}
		if problem != nil {
			m.block(problem)
			continue
		}
		mm := m.add(name)
		mm.id, mm.inEtcd, mm.learner, mm.started = em.ID, true, em.Learner, em.Started()
		mm.up, mm.hasLeader = em.Answering && em.Started(), em.Leader != ""
		mm.silent = em.Silent && !mm.up && em.Started()
		mm.version, mm.raftIndex, mm.raftTerm = em.Version, em.RaftIndex, em.RaftTerm
		mm.dbSize, mm.dbInUse, mm.quota = em.DBSize, em.DBInUse, em.Quota
		mm.knowPeerURL(em.PeerURLs)
		if em.Answering && em.Leader != "" {
			mm.ran = em.Version
		}
		if em.ID == o.Etcd.LeaderID {
			m.leader = mm.name
		}
	}
}

// fromObjects takes what Kubernetes shows of each member: its Pod and its volume claim.
func (m *model) fromObjects(o Observed) {
	for _, k := range o.Members {
		mm := m.add(k.Name)
		if k.Pod != nil {
			mm.fromPod(k.Pod)
		}
		if k.PVC != nil {
			m.fromClaim(mm, k.PVC)
		}
		if k.Check != nil {
			mm.check = k.Check
		}
	}
}

// fromPod takes the member's Pod. An ended Pod is replaced, as if it were gone; what its
// preflight check found is kept.
func (mm *member) fromPod(p *Pod) {
	mm.dataLost, mm.preflightErr, mm.podEnded = p.DataLost, p.PreflightError, p.Failed
	if p.Failed {
		return
	}
	mm.pod, mm.running, mm.podDeleting, mm.seed = true, p.Running, p.Deleting, p.Seed
	mm.configHash, mm.configFields, mm.restoring, mm.listen, mm.trust = p.ConfigHash, p.ConfigFields, p.Restoring, p.Listen, p.Trust
	if p.Version != "" {
		mm.version = p.Version
	}
}

// fromClaim takes the member's volume claim: the member ID it records once the member
// joined, a recovery's marks, its class and size. A claim that records another ID than etcd
// gives the name holds another member's data, and blocks.
func (m *model) fromClaim(mm *member, c *PVC) {
	mm.pvc, mm.pvcDeleting, mm.pvcID, mm.forcing, mm.snapshotted = true, c.Deleting, c.MemberID, c.ForceNewCluster, c.SurvivorSnapshot
	mm.restoring, mm.retained = cmp.Or(c.Restoring, mm.restoring), c.Retained
	mm.class, mm.bytes, mm.expandable = c.StorageClass, c.Bytes, c.Expandable
	if mm.ran == "" {
		mm.ran = c.Version
	}
	if !mm.peerURLKnown && c.PeerURL != "" {
		mm.knowPeerURL([]string{c.PeerURL})
	}
	if mm.inEtcd && mm.pvcID != "" && mm.pvcID != mm.id {
		m.block(&plan.Blocker{Reason: plan.BlockDuplicateMember, Message: fmt.Sprintf(
			"volume claim %s records member ID %s, but etcd lists member %s under that name: the volume holds another member's data; "+
				"find out which member the volume belongs to, then remove the wrong member (etcdctl member remove) or move the claim away",
			mm.name, mm.pvcID, mm.id)})
	}
	if mm.id == "" {
		mm.id = mm.pvcID
	}
}

// fromRecord takes what status recorded: learners whose promotion passed its deadline and,
// without a linearizable member list, the membership. A stale view misses members that
// joined after it, so the members recorded in status that it does not show are assumed to
// be members still, and nothing may treat them as leftovers.
func (m *model) fromRecord(o Observed) {
	recorded := map[string]bool{}
	stale := !m.linearizable && !m.restoredAnswers()
	if stale {
		for _, r := range o.Recorded {
			mm := m.add(r.Name)
			if mm.inEtcd {
				continue
			}
			if mm.id == "" {
				mm.id = r.ID
			}
			mm.learner, recorded[r.Name] = r.Learner, true
		}
	}
	for _, id := range o.StalledLearners {
		for _, mm := range m.members {
			mm.stalled = mm.stalled || (mm.learner && mm.id == id)
		}
	}
	m.bootstrapped = m.formed(o)
	if stale {
		m.assumeMembership(recorded, len(o.Recorded) > 0, o.Etcd == nil)
	}
}

// formed: the cluster has formed once, by what any source shows. A recorded membership
// outlives the cluster ID while a recovery starts the cluster anew from a backup; volumes
// recording member IDs are of an earlier life, or of a cluster starting anew from a backup.
func (m *model) formed(o Observed) bool {
	if o.ClusterID != "" || len(o.Recorded) > 0 || (o.Etcd != nil && len(o.Etcd.Members) > 0) {
		return true
	}
	return slices.ContainsFunc(m.members, func(mm *member) bool { return (mm.id != "" && mm.pvc) || mm.restoring != nil })
}

// finish blocks a restore over volumes of an earlier cluster, orders the members by
// ordinal, and takes the next ordinal past every name in use or once used: a name is never
// used again.
func (m *model) finish(d Desired, o Observed) {
	if b := restoreOverRetained(d, o); b != nil {
		m.block(b)
	}
	sort.Slice(m.members, func(i, j int) bool {
		a, b := m.members[i], m.members[j]
		if a.ordinal != b.ordinal {
			return a.ordinal < b.ordinal
		}
		return a.name < b.name
	})
	m.bumpOrdinal()
	for _, mm := range m.members {
		mm.source = o.Join.sourceID(mm.id)
		mm.copied = mm.snapshotted && !d.Memory && m.snapshotOf(mm) != nil && m.snapshotOf(mm).Phase == SnapshotSucceeded
	}
	for _, r := range o.Recorded {
		if n := vocab.Ordinal(d.Name, r.Name); n >= m.nextOrdinal {
			m.nextOrdinal = n + 1
		}
	}
}

// joinedIDs are the member IDs, by ID, of the members the operator knows joined: recorded in
// status or on their claims.
func joinedIDs(o Observed) map[string]string {
	out := map[string]string{}
	for _, r := range o.Recorded {
		out[r.ID] = r.Name
	}
	for _, k := range o.Members {
		if k.PVC != nil && k.PVC.MemberID != "" {
			out[k.PVC.MemberID] = k.Name
		}
	}
	return out
}

// identify names an etcd member by its peer URL. It returns a blocker for a member the
// operator must not act on: one whose peer URL is not of this cluster's form, one whose
// name does not match its peer URL, one that claims a name another member has, and a voter
// that never started (the operator adds members as learners only). A learner the operator
// added and promoted can be a voter before it publishes its name (a restored cluster's log
// is short, so a learner is in sync at once): its ID, joined under its name, makes it ours.
func (m *model) identify(d Desired, em EtcdMember, joined map[string]string) (string, *plan.Blocker) {
	name := vocab.ManagedName(d.Name, d.Namespace, em.PeerURLs)
	what := fmt.Sprintf("etcd member %s (name %q, peer URLs %s)", em.ID, em.Name, strings.Join(em.PeerURLs, ","))
	seen := m.get(name)
	switch {
	case name == "" || (em.Name != "" && em.Name != name):
		return "", &plan.Blocker{Reason: plan.BlockForeignMember, Message: fmt.Sprintf(
			"%s is not a member of this cluster's form (<scheme>://%s.%s.%s.svc:%d named after its host): the operator does not act on members it does not manage; "+
				"remove it with `etcdctl member remove %s` if it does not belong, or move it to the cluster it belongs to",
			what, vocab.MemberName(d.Name, 0), d.Name, orAny(d.Namespace), vocab.PeerPort, em.ID)}
	case seen != nil && seen.inEtcd:
		return "", &plan.Blocker{Reason: plan.BlockDuplicateMember, Message: fmt.Sprintf(
			"%s and etcd member %s both claim the name %s: the operator acts on one member per name; remove the one that does not belong with `etcdctl member remove ID`",
			what, seen.id, name)}
	case !em.Learner && !em.Started() && joined[em.ID] != name:
		return "", &plan.Blocker{Reason: plan.BlockForeignMember, Message: fmt.Sprintf(
			"%s was added as a voter and never started; the operator adds members as learners only: "+
				"remove it with `etcdctl member remove %s` (it holds no data), and the operator adds it back as a learner if the spec wants it", what, em.ID)}
	}
	return name, nil
}

func orAny(ns string) string {
	if ns == "" {
		return "<namespace>"
	}
	return ns
}

func (m *model) block(b *plan.Blocker) {
	if m.blocked == nil {
		m.blocked = b
	}
}

// assumeMembership fills in membership that no linearizable list shows. The membership
// recorded in status is the best record; without one (a cluster re-created on retained
// volumes), the member IDs recorded on volumes are. Before the cluster first answers, its
// seed is a member.
func (m *model) assumeMembership(recorded map[string]bool, hasRecord, silent bool) {
	for _, mm := range m.members {
		if mm.inEtcd {
			continue
		}
		// A retained claim's member left the cluster: its ID is no evidence of membership.
		known := recorded[mm.name] || (!hasRecord && mm.id != "" && !mm.retained)
		if known || (silent && mm.seed && !m.bootstrapped) {
			mm.inEtcd, mm.started = true, mm.started || !mm.learner || mm.pod
		}
	}
}

// restoredAnswers: the seed of a restore from a backup answered as the restored cluster: it
// is in etcd's view (only the seed's answer is taken as that cluster's first), or its claim
// records its new member ID. From then on the members recorded in status, and the IDs on the
// old members' claims, are the old cluster's: none is a member of the restored one, which
// has the seed alone until others join it.
func (m *model) restoredAnswers() bool {
	return slices.ContainsFunc(m.members, func(mm *member) bool { return mm.restoring != nil && (mm.inEtcd || mm.pvcID != "") })
}

func (m *model) get(name string) *member {
	for _, mm := range m.members {
		if mm.name == name {
			return mm
		}
	}
	return nil
}

// voters counts the voters, those that are up, and those that are healthy.
func (m *model) voters() (all, up, healthy int) {
	for _, mm := range m.members {
		if mm.voter() {
			all++
			if mm.up {
				up++
			}
			if mm.healthy() {
				healthy++
			}
		}
	}
	return all, up, healthy
}

func (m *model) countVoters() int {
	all, _, _ := m.voters()
	return all
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

// lost reports whether a member's data is shown gone (noData), its volume is gone, or it
// lived in memory and its Pod is gone. A member that answers holds its data whatever else
// is said of it, and one whose Pod is Terminating (a node cut off keeps it so while etcd
// runs and votes) is down, not lost.
func (m *model) lost(mm *member, d Desired) bool {
	switch {
	case mm.up || mm.source:
		return false
	case mm.noData():
		return true
	}
	return m.bootstrapped && mm.started && !mm.pod && (d.Memory || !mm.pvc)
}

// noData: the member's preflight check found its data directory empty, or a check Pod did
// and the Pod it was made beside is gone since (no etcd of it can write the directory
// again), and no Pod of the member runs etcd.
func (mm *member) noData() bool {
	return mm.dataLost || mm.check != nil && mm.check.DataLost && mm.check.PodGone && !mm.running
}

// holdsData: the member is shown to hold its data: it answers, its etcd runs (its
// preflight check found the data), or it was chosen, on that evidence, to restart alone or
// to be restored from its snapshot.
func (mm *member) holdsData() bool {
	return mm.up || mm.running || mm.silent || mm.forcing || mm.copied
}

func quorum(n int) int { return n/2 + 1 }

// settle updates what the model expects of etcd after a step: once a quorum of voters runs
// (or is starting on its data) it answers, and its member list can be read through the
// quorum. Steps that need the quorum wait for it in their preconditions.
func (m *model) settle() {
	if m.quorumExpected() {
		m.reachable, m.linearizable = true, true
	}
}

// quorumExpected: a quorum of voters is up, or runs or is starting on its data.
func (m *model) quorumExpected() bool {
	all, runs := 0, 0
	for _, mm := range m.members {
		if mm.voter() {
			all++
			if mm.up || (mm.pod && !mm.podDeleting && !mm.noData()) {
				runs++
			}
		}
	}
	return all > 0 && runs >= quorum(all)
}

func (m *model) bumpOrdinal() {
	for _, x := range m.members {
		if x.ordinal >= m.nextOrdinal {
			m.nextOrdinal = x.ordinal + 1
		}
	}
}

// apply changes the model as the step will change the cluster once it has succeeded.
// Every step waits for its precondition first, so the members it relies on are healthy.
func (m *model) apply(s plan.Step, desired Desired) {
	mm := m.get(s.Member)
	switch s.Action {
	case plan.CreateSeed:
		m.seed(s, desired)
		m.auth = new(false) // a new cluster starts without auth; a restored one as its snapshot was
	case plan.RestoreFromBackup:
		seeds := m.restoreSeeds(desired, s.Member)
		m.restartOn(m.seed(s, desired), desired)
		for _, name := range seeds[1:] {
			peer := s
			peer.Member = name
			m.seed(peer, desired).trust = m.trust
		}
		m.leader = s.Member
	case plan.SnapshotSurvivor:
		if s.Why != plan.WhySurvivorSnapshotEarly {
			m.halt = true
			break
		}
		m.snapshots = append(slices.Clone(m.snapshots), MemberSnapshot{Backup: Backup{Name: s.Backup}, MemberID: s.MemberID, Member: s.Member})
	case plan.SnapshotSource:
		m.snapshots = append(slices.Clone(m.snapshots), MemberSnapshot{Backup: Backup{Name: s.Backup}, MemberID: s.MemberID, Member: s.Member, Phase: SnapshotSucceeded})
	case plan.Acknowledge:
		j := *m.join
		j.AllLeft = false
		m.join = &j
	case plan.AddLearner:
		m.members = append(m.members, &member{name: s.Member, ordinal: vocab.Ordinal(m.cluster, s.Member), inEtcd: true, learner: true,
			peerURLKnown: true, peerURLTLS: registersTLS(s, desired)})
		m.linearizable, m.reachable = true, true // a membership change commits through a quorum
	case plan.CheckData:
		mm.check = &DataCheck{} // made; what it reads comes later
	case plan.StartMember:
		if s.Why == plan.WhyShowData {
			mm.starting(s, desired)
			break
		}
		mm.start(s, desired)
	case plan.PromoteLearner:
		mm.learner = false
	case plan.TransferLeadership:
		m.leader = s.Target
	case plan.RemoveMember:
		mm.inEtcd, mm.learner, mm.up, mm.hasLeader = false, false, false, false
		m.unlead(mm)
	case plan.DeleteMember:
		m.members = slices.DeleteFunc(m.members, func(x *member) bool { return x == mm })
	case plan.StopMember:
		mm.pod, mm.running, mm.up, mm.silent, mm.hasLeader = false, false, false, false, false
		m.unlead(mm)
	case plan.Compact:
		m.historyCompacted = true
	case plan.Defragment:
		mm.dbSize = mm.dbInUse
		delete(m.defragDue, mm.id)
	case plan.ExpandVolume:
		mm.bytes = desired.StorageBytes
	case plan.DisarmAlarm:
		m.alarms = slices.DeleteFunc(slices.Clone(m.alarms), func(a Alarm) bool { return a.MemberID == s.MemberID && a.Type == AlarmNoSpace })
	case plan.ForceNewCluster:
		m.restartOn(mm, desired)
		mm.listen = s.Listen
		mm.pod, mm.running, mm.podDeleting, mm.up, mm.hasLeader, mm.forcing = true, true, false, true, true, false
		m.leader, m.linearizable, m.reachable = mm.name, true, true
	case plan.UpgradeMember, plan.RestartMember:
		mm.restart(s, desired)
	case plan.RenewCertificate, plan.AwaitCertificate:
		m.renewed(s)
	case plan.UpdatePeerURL:
		mm.peerURLTLS, mm.peerURLAlt = s.Why == plan.WhyPeerURLToTLS, MovedPeerURLPort(s) == vocab.PeerTLSPort
	case plan.RotateCA:
		m.rotated(s)
	case plan.EnableAuth, plan.DisableAuth:
		on := s.Action == plan.EnableAuth
		m.auth = &on
		if s.Why == plan.WhyAuthAdopted {
			j := *m.join
			j.UsersMade = true
			m.join = &j
		}
	case plan.UpdateUsers:
		m.users = desired.Users
	}
	if mm := m.get(s.Member); mm != nil && s.Action.StartsPod() {
		mm.trust = m.trust // a new Pod mounts the trust bundles as they are
	}
	m.peerLeaf(s)
	m.settle()
	m.bumpOrdinal()
}

// renewed foresees a certificate step: a renewed certificate that members mount is then
// awaited; one awaited, or that no member mounts, is done.
func (m *model) renewed(s plan.Step) {
	out := []Renewal{}
	for _, r := range m.renewals {
		switch {
		case r.Secret != s.Secret:
			out = append(out, r)
		case s.Action == plan.RenewCertificate && r.Mounted:
			r.Unserved = true
			out = append(out, r)
		}
	}
	m.renewals = out
}

// start gives the member its Pod, on a claim it has or a new one of the spec's class and
// size; it runs and answers.
func (mm *member) start(s plan.Step, desired Desired) {
	if !mm.pvc {
		mm.class, mm.bytes = desired.StorageClass, desired.StorageBytes
	}
	mm.pod, mm.running, mm.pvc, mm.started, mm.up, mm.hasLeader, mm.dataLost, mm.podDeleting = true, true, true, true, true, true, false, false
	mm.version, mm.configHash, mm.configFields, mm.listen = s.Version, desired.ConfigHash, desired.ConfigFields, s.Listen
}

// starting gives the member a Pod whose preflight check has not reported: whether it kept
// its data is not known yet, so it is neither up nor a survivor.
func (mm *member) starting(s plan.Step, desired Desired) {
	mm.start(s, desired)
	mm.running, mm.up, mm.hasLeader = false, false, false
}

// restart re-creates the member's Pod on the step's version and the spec's configuration,
// with the spec's quota.
func (mm *member) restart(s plan.Step, desired Desired) {
	mm.configFields, mm.quota, mm.listen = desired.ConfigFields, 0, s.Listen
	mm.version, mm.configHash, mm.up, mm.hasLeader, mm.pod, mm.running, mm.podDeleting = s.Version, desired.ConfigHash, true, true, true, true, false
}

// unlead: a member that stops or leaves no longer leads.
func (m *model) unlead(mm *member) {
	if m.leader == mm.name {
		m.leader = ""
	}
}

// restartOn makes mm the one member of a cluster that a recovery restarts on it: the other
// members that held data keep their claims (retained), and all leave the membership.
func (m *model) restartOn(mm *member, desired Desired) {
	for _, x := range m.keptBy(desired, mm) {
		x.retained = true
	}
	m.dropOthers(mm)
}

// seed makes the step's member the one member of a new cluster, which it leads.
func (m *model) seed(s plan.Step, desired Desired) *member {
	mm := m.add(s.Member)
	class, bytes, expandable := desired.StorageClass, desired.StorageBytes, (*bool)(nil)
	if mm.pvc { // the seed re-uses its volume
		class, bytes, expandable = mm.class, mm.bytes, mm.expandable
	}
	*mm = member{name: mm.name, ordinal: mm.ordinal, inEtcd: true, started: true, up: true, hasLeader: true,
		pod: true, running: true, seed: true, pvc: true, version: s.Version, class: class, bytes: bytes, expandable: expandable,
		configHash: desired.ConfigHash, configFields: desired.ConfigFields, listen: s.Listen,
		peerURLKnown: true, peerURLTLS: registersTLS(s, desired)}
	m.leader, m.bootstrapped, m.reachable, m.linearizable = mm.name, true, true, true
	return mm
}

// dropOthers takes every member but mm out of etcd's membership, as a cluster that
// restarts on mm alone does.
func (m *model) dropOthers(mm *member) {
	for _, x := range m.members {
		if x != mm {
			x.inEtcd, x.learner, x.up, x.silent, x.hasLeader = false, false, false, false, false
		}
	}
}

// satisfy makes the step's precondition true in the model, as waiting for it does in the
// cluster. Only members that can recover (running, data intact) become healthy.
func (m *model) satisfy(p plan.Precondition) {
	heal := func(mm *member) {
		if mm != nil && mm.inEtcd && mm.pod && !mm.podDeleting && !mm.noData() {
			mm.up, mm.running, mm.hasLeader, mm.started = true, true, true, true
		}
	}
	switch p.Kind {
	case plan.PreMemberHealthy, plan.PreLearnerCaughtUp:
		heal(m.get(p.Member))
	case plan.PreClusterHealthy, plan.PreQuorumHealthy, plan.PreQuorumWithout:
		for _, mm := range m.members {
			if mm.voter() && mm.name != p.Member {
				heal(mm)
			}
		}
	}
	if p.Kind == plan.PreClusterHealthy || p.Kind == plan.PreQuorumHealthy || p.Kind == plan.PreQuorumWithout {
		m.linearizable, m.reachable = true, true // a quorum answers, so the member list can be read through it
	}
	if m.leader == "" {
		for _, mm := range m.members {
			if mm.voter() && mm.healthy() {
				m.leader = mm.name
				break
			}
		}
	}
}
