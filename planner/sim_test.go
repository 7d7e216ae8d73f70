package planner

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"strconv"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/vocab"
)

// world is a small simulation of an etcd cluster and its Pods, independent of the planner's
// model: tests apply plans to it step by step and check etcd's safety rules as they go. It
// models the world as it is: members take time to start, views can be stale, elections
// leave no leader for a while, alarms are raised, volumes are lost, and etcd may list
// members the operator does not manage.
type world struct {
	cluster   string
	clusterID string
	leader    string
	members   map[string]*wmember
	nextID    int
	memory    bool
	// nextOrdinal is what status records: one past every ordinal the cluster ever had.
	nextOrdinal int

	// staleBelow, when set, makes the next observation a serializable view from a member
	// that missed every membership change after member ID staleBelow.
	staleBelow int
	// election: members answer but know no leader.
	election bool
	alarms   []Alarm
	// foreign are etcd members the operator does not manage (another cluster's peer URL).
	foreign []EtcdMember
	// clusterVersion is etcd's: the lowest minor of its started members once all answer,
	// raised only.
	clusterVersion string
	// compacted: the history before the current revision is compacted.
	compacted bool
	// expandable: whether each storage class grows volumes in place (a class missing could
	// not be read).
	expandable map[string]bool
	// defragDue are the members scheduled defragmentation has still to do; like the
	// executor, each look keeps only those still fragmented (any free space worth it).
	defragDue []string
	// renewals are the certificates the operator is to renew.
	renewals []Renewal
	// backup is the newest successful backup, taken of the cluster with ID backupOf.
	backup   *Backup
	backupOf string
	// snapshotTo is where a survivor's snapshot goes ("": no destination known);
	// snapshots are those taken, each holding snapshotRev, or failing with snapshotFails.
	snapshotTo    string
	snapshots     []MemberSnapshot
	snapshotRev   int64
	snapshotFails string
	// ca is the cluster's own CA, for worlds whose TLS is on (nil: not simulated).
	ca *wca
	// auth: etcd's authentication is on; authFromCreation: status says the cluster was
	// created asking for it.
	auth, authFromCreation bool
	// users identifies the users of spec.auth.users made in etcd.
	users string
	// join is the adoption of a running cluster whose members are the source members
	// (nil: none); adopted: the user acknowledged the source members stopped; peersCut: no
	// member's raft messages reach another (metrics show no active peer).
	join              *Join
	adopted, peersCut bool
}

type wmember struct {
	name, id                 string
	inEtcd, learner, started bool
	pod, seed, dataLost, up  bool
	starting                 bool // its Pod was just created: the container does not run yet
	deleting                 bool // its Pod is Terminating (a node cut off), while etcd may run on
	silent                   bool // takes part in raft but answers no client (publishing itself)
	pvc                      bool
	version, hash            string
	ran                      string // the version it last answered with, recorded on its claim
	// peerName overrides the name in the member's peer URL (a duplicate name).
	peerName string
	// The member's database: live data, earlier revisions (until compacted) and free pages
	// (until defragmented), in bytes.
	data, history, free int64
	// The volume's class and size (0: not known).
	class string
	bytes int64
	// index is how far the member's raft log goes beyond the others'.
	index uint64
	// restoring: the new seed of a recovery from this backup, marked on its claim until
	// its cluster answers; snapshotted: a survivor whose snapshot a recovery takes, marked
	// alike.
	restoring   *Backup
	snapshotted bool
	// checked: a check Pod read its data beside its going Pod (CheckData); the executor
	// deletes it once the member has a Pod that is not going.
	checked bool
	// preflightErr: its Pod ended because its preflight check could not read its data; the
	// executor keeps that Pod for a person, and the data may be intact.
	preflightErr string
	// term is the member's raft term beyond the others'.
	term uint64
	// removed: the member left through a removal a quorum committed, so the others hold
	// the data; retained: it left in a recovery holding data, and its claim is kept.
	removed, retained bool
	// listen is how its Pod serves, each side spelled out ("": plain text); its peer URL is
	// TLS (peerTLS), on the second peer port (peerAlt).
	listen           plan.Listen
	peerTLS, peerAlt bool
	// trusts are the CAs its Pod mounted as trusted when it started ("A+B"); serves, in a
	// change of TLS source, the CA of the certificates its Pod mounted (server and peer).
	trusts, serves string
	// source: a member of an adopted cluster that runs outside Kubernetes (no Pod, no claim).
	source bool
}

// trust is what the member's Pod records of what it mounted (Pod.Trust).
func (m *wmember) trust() string {
	if m.serves == "" {
		return m.trusts
	}
	return m.trusts + "@" + m.serves
}

// serve gives the member's new Pod the step's Listen, spelled out against the spec.
func (m *wmember) serve(s plan.Step, d Desired) {
	f := final(d)
	m.listen = plan.Listen{Client: cmp.Or(s.Listen.Client, f.Client), Peer: cmp.Or(s.Listen.Peer, f.Peer)}
}

// serving is how its Pod serves each side, plain text where nothing is said.
func (m *wmember) serving() plan.Listen {
	return plan.Listen{Client: cmp.Or(m.listen.Client, plan.ListenPlain), Peer: cmp.Or(m.listen.Peer, plan.ListenPlain)}
}

// peerURL is the member's peer URL in etcd's membership.
func (m *wmember) peerURL(cluster, host string) string {
	scheme, port := "http", 2380
	if m.peerTLS {
		scheme = "https"
	}
	if m.source {
		return fmt.Sprintf("%s://%s.elsewhere:2380", scheme, host)
	}
	if m.peerAlt {
		port = 2382
	}
	return fmt.Sprintf("%s://%s.%s.default.svc:%d", scheme, host, cluster, port)
}

// reaches: from can dial to at its peer URL: to serves that scheme on that port, and from
// holds a peer certificate to dial TLS with.
func (w *world) reaches(from, to *wmember) bool {
	ports := map[string][2]string{ // how the first and the second peer port serve
		plan.ListenPlain: {"http", "http"}, plan.ListenTLS: {"https", "https"},
		plan.ListenBoth: {"http", "https"}, plan.ListenTLSFirst: {"https", "http"},
	}[to.serving().Peer]
	serves := ports[0]
	if to.peerAlt {
		serves = ports[1]
	}
	want := map[bool]string{false: "http", true: "https"}[to.peerTLS]
	return serves == want && (!to.peerTLS || from.serving().Peer != plan.ListenPlain)
}

// cutOff names a pair of members whose Pods run where one cannot dial the other.
func (w *world) cutOff() error {
	for _, a := range w.sorted() {
		for _, b := range w.sorted() {
			if a != b && a.inEtcd && b.inEtcd && a.pod && b.pod && !w.reaches(a, b) {
				return fmt.Errorf("%s cannot reach %s at %s (it serves peers %q)", a.name, b.name, b.peerURL(w.cluster, b.name), b.listen.Peer)
			}
		}
	}
	return nil
}

func (m *wmember) dbSize() int64 { return m.data + m.history + m.free }

// claim gives a member starting without a volume a claim of the spec's class and size.
func (w *world) claim(m *wmember, d Desired) {
	if !w.memory && !m.pvc {
		m.pvc, m.class, m.bytes = true, d.StorageClass, d.StorageBytes
	}
}

func (w *world) sorted() []*wmember {
	out := make([]*wmember, 0, len(w.members))
	for _, m := range w.members {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := vocab.Ordinal(w.cluster, out[i].name), vocab.Ordinal(w.cluster, out[j].name)
		if a != b {
			return a < b
		}
		return out[i].name < out[j].name
	})
	return out
}

// voters counts the voters and those that are up (running, answering, data intact).
func (w *world) voters() (all, up int) {
	for _, m := range w.members {
		if m.inEtcd && !m.learner {
			all++
			if m.live() {
				up++
			}
		}
	}
	return all, up
}

func (m *wmember) live() bool { return (m.pod || m.source) && m.started && m.up && !m.dataLost }

// canRun: its Pod can run etcd on its data, once started.
func (m *wmember) canRun() bool { return m.pod && !m.dataLost && m.preflightErr == "" }

// lostData: the member's data is gone, with its volume or (in memory) its Pod.
func (w *world) lostData(m *wmember) bool {
	return m.dataLost || (m.started && !m.pod && !m.source && (w.memory || !m.pvc))
}

func (w *world) hasQuorum() bool {
	all, up := w.voters()
	return w.clusterID != "" && all > 0 && up >= quorum(all)
}

// observe renders the world as the executor would observe it: a linearizable member list
// when a quorum answers, else one member's serializable view.
func (w *world) observe() Observed {
	for _, m := range w.members {
		w.nextOrdinal = max(w.nextOrdinal, vocab.Ordinal(w.cluster, m.name)+1)
	}
	o := Observed{FormatVersion: ObservedFormatVersion, ClusterID: w.clusterID, NextOrdinal: w.nextOrdinal, AuthFromCreation: w.authFromCreation,
		Users: w.users}
	if w.backup != nil && w.backupOf == w.clusterID {
		o.Backup = w.backup
	}
	o.SnapshotTo, o.Snapshots = w.snapshotTo, w.snapshots
	w.observeJoin(&o)
	anyUp := false
	for _, m := range w.members {
		anyUp = anyUp || (m.inEtcd && m.live() && !m.silent)
	}
	if w.clusterID != "" && anyUp {
		w.raiseClusterVersion()
		o.Etcd = &EtcdView{ClusterID: w.clusterID, Linearizable: w.hasQuorum() && w.staleBelow == 0, Alarms: w.alarms,
			ClusterVersion: w.clusterVersion, HistoryCompacted: w.compacted, Auth: new(w.auth)}
	}
	for _, m := range w.sorted() {
		if m.inEtcd {
			o.Recorded = append(o.Recorded, RecordedMember{Name: m.name, ID: m.id, Learner: m.learner})
		}
	}
	for _, m := range w.sorted() {
		km := Member{Name: m.name}
		if m.pod && !m.source {
			km.Pod = &Pod{Running: !m.starting, Ready: m.live(), Seed: m.seed, DataLost: m.dataLost, Version: m.version, ConfigHash: m.hash,
				Deleting: m.deleting, Listen: m.listen, Trust: m.trust()}
			if m.preflightErr != "" {
				km.Pod = &Pod{Failed: true, PreflightError: m.preflightErr, Version: m.version, ConfigHash: m.hash, Deleting: m.deleting}
			}
		}
		if m.live() && !m.silent {
			m.ran = m.version // the executor records it on the claim
		}
		if m.pvc {
			km.PVC = &PVC{Bound: true, Version: m.ran, StorageClass: m.class, Bytes: m.bytes}
			if ok, known := w.expandable[m.class]; known {
				km.PVC.Expandable = &ok
			}
			if m.started {
				km.PVC.MemberID, km.PVC.PeerURL = m.id, m.peerURL(w.cluster, m.name)
			}
			if w.hasQuorum() {
				m.restoring, m.snapshotted = nil, false // the executor removes the marks on a linearizable view
			}
			km.PVC.Restoring, km.PVC.Retained, km.PVC.SurvivorSnapshot = m.restoring, m.retained, m.snapshotted
		}
		if m.pod && !m.deleting {
			m.checked = false
		}
		if m.checked && m.pvc {
			km.Check = &DataCheck{DataLost: m.dataLost, PodGone: !m.pod || !m.deleting}
		}
		if km.Pod != nil || km.PVC != nil {
			o.Members = append(o.Members, km)
		}
		id, _ := strconv.Atoi(m.id)
		if o.Etcd == nil || !m.inEtcd || (w.staleBelow > 0 && id > w.staleBelow) {
			continue
		}
		peer := m.name
		if m.peerName != "" {
			peer = m.peerName
		}
		em := EtcdMember{ID: m.id, PeerURLs: []string{m.peerURL(w.cluster, peer)}, Learner: m.learner, RaftIndex: 100 + m.index, RaftTerm: 2 + m.term}
		if m.started {
			em.Name, em.Version = peer, m.version
		}
		em.Silent = m.live() && m.silent
		if m.live() && !m.silent {
			em.Answering, em.DBSize, em.DBInUse = true, m.dbSize(), m.data+m.history
			if !w.election && w.leaderID() != "" {
				em.Leader = w.leaderID()
			}
		}
		o.Etcd.Members = append(o.Etcd.Members, em)
	}
	if o.Etcd != nil {
		o.Etcd.Members = append(o.Etcd.Members, w.foreign...)
		if !w.election {
			o.Etcd.LeaderID = w.leaderID()
		}
	}
	w.defragDue = DefragStillDue(o, w.defragDue, 1)
	o.DefragDue = w.defragDue
	o.Renewals = w.renewals
	if w.ca != nil {
		w.observeCA(&o)
	}
	return o
}

// raiseClusterVersion does what etcd's leader does: once every member answers, the
// cluster version becomes the lowest minor they run, if that is higher.
func (w *world) raiseClusterVersion() {
	var low *Version
	for _, m := range w.members {
		if !m.inEtcd || !m.started {
			continue
		}
		v, err := ParseVersion(m.version)
		if !m.live() || m.silent || err != nil {
			return
		}
		if low == nil || v.Compare(*low) < 0 {
			low = &v
		}
	}
	if low == nil {
		return
	}
	cv := Version{low.Major, low.Minor, 0}
	if have, err := ParseVersion(w.clusterVersion); err != nil || cv.Compare(have) > 0 {
		w.clusterVersion = cv.String()
	}
}

// versionAllowed is etcd's rule for a member moving to version: from the version its data
// last served, patch releases of the minor either way, the next minor from a recent enough
// patch, and back a minor only while the cluster version has not moved past it.
func (w *world) versionAllowed(m *wmember, version string) error {
	from, _ := ParseVersion(cmp.Or(m.ran, m.version))
	to, _ := ParseVersion(version)
	cv, err := ParseVersion(w.clusterVersion)
	switch {
	case to.Major != from.Major || to.Minor > from.Minor+1:
		return fmt.Errorf("%s -> %s skips a minor", from, to)
	case to.Minor == from.Minor+1 && from.Patch < minPatch[[2]int{from.Major, from.Minor}]:
		return fmt.Errorf("%s -> %s from a patch etcd's upgrade guide does not allow", from, to)
	case to.Minor < from.Minor && (err != nil || cv.Minor > to.Minor):
		return fmt.Errorf("%s -> %s with cluster version %q", from, to, w.clusterVersion)
	}
	return nil
}

func (w *world) leaderID() string {
	if l := w.members[w.leader]; l != nil && l.live() && !l.learner && w.hasQuorum() {
		return l.id
	}
	return ""
}

// heal makes a member up when waiting could: its Pod exists and its data is intact.
func (w *world) heal(name string) {
	if m := w.members[name]; m != nil && m.inEtcd && m.canRun() {
		m.up, m.started, m.starting = true, true, false
		if m.seed && w.clusterID == "" {
			w.clusterID = "c1" // the seed formed the cluster
		}
	}
}

// settle lets time pass: members that can start are up, views catch up, an election ends,
// Terminating Pods go. It reports whether anything changed.
func (w *world) settle() bool {
	changed := w.staleBelow != 0 || w.election
	w.staleBelow, w.election = 0, false
	for _, m := range w.members {
		changed = changed || m.silent || m.deleting
		m.silent = false
		if m.deleting {
			m.pod, m.deleting, m.up = false, false, false
			if !m.inEtcd && !m.pvc {
				delete(w.members, m.name) // nothing left of it anywhere
				continue
			}
		}
		if m.inEtcd && m.canRun() && !m.up {
			w.heal(m.name)
			changed = true
		}
	}
	w.elect()
	return changed
}

func (w *world) elect() {
	if !w.hasQuorum() {
		w.leader = "" // no leader without a quorum
		return
	}
	if l := w.members[w.leader]; l == nil || !l.live() || l.learner || !l.inEtcd {
		w.leader = ""
		for _, m := range w.sorted() {
			if m.inEtcd && !m.learner && m.live() {
				w.leader = m.name
				break
			}
		}
	}
}

func (w *world) satisfy(p plan.Precondition) {
	switch p.Kind {
	case plan.PreMemberHealthy, plan.PreLearnerCaughtUp, plan.PrePeersConnected:
		w.heal(p.Member)
		w.staleBelow, w.election = 0, false
	case plan.PreClusterHealthy, plan.PreQuorumHealthy, plan.PreQuorumWithout, plan.PreMemberGone:
		for _, m := range w.members {
			if m.inEtcd && !m.learner && m.name != p.Member {
				w.heal(m.name)
			}
		}
		w.staleBelow, w.election = 0, false
	}
	w.elect()
}

// takeDown checks a step that takes a voter out of service for a while (a restart, a
// defragmentation): never the leader of several voters, and never below quorum. One voter
// alone cannot avoid a moment without quorum; every larger cluster can.
func (w *world) takeDown(s plan.Step, m *wmember, all, up int, hadQuorum bool) error {
	if w.leader == s.Member && m.live() && all > 1 {
		return fmt.Errorf("%s %s while it leads", s.Action, s.Member)
	}
	left := up
	if m.live() {
		left--
	}
	if all > 1 && hadQuorum && left < quorum(all) {
		return fmt.Errorf("%s %s loses quorum while it is out (%d of %d up)", s.Action, s.Member, left, all)
	}
	return nil
}

// apply waits for the step's precondition and then does what the executor does: it runs the
// step only when it is still the fresh plan's first step and Check allows it; then it checks
// the safety rules and applies the step. It returns an error when a rule is broken, and
// stuck when the step cannot start (or the plan was superseded and must be made anew).
func (w *world) apply(s plan.Step, d Desired) (stuck bool, err error) {
	if !slices.Contains(plan.Whys, s.Why) {
		return false, fmt.Errorf("%s %s carries no known reason code: why %q (reason %q)", s.Action, s.Member, s.Why, s.Reason)
	}
	w.satisfy(s.Precondition)
	o := w.observe()
	if fresh := Plan(d, o); len(fresh.Steps) == 0 || !SameStep(s, fresh.Steps[0]) {
		return true, nil
	}
	if ok, _ := Check(d, s, o); !ok {
		return true, nil
	}
	m := w.members[s.Member]
	if s.Action == plan.StartMember && m != nil && m.pod && !m.deleting {
		return true, nil // its Pod exists: the step waits for it to run
	}
	all, up := w.voters()
	hadQuorum := up >= quorum(all)
	isVoter := m != nil && m.inEtcd && !m.learner
	if m != nil && s.MemberID != "" && s.Action != plan.DeleteMember && m.id != s.MemberID {
		return false, fmt.Errorf("%s %s names member ID %s, but the member is %s", s.Action, s.Member, s.MemberID, m.id)
	}
	switch s.Action {
	case plan.CreateSeed:
		if w.clusterID != "" {
			return false, fmt.Errorf("CreateSeed %s in a formed cluster", s.Member)
		}
		w.nextID++
		seed := &wmember{name: s.Member, id: strconv.Itoa(w.nextID), inEtcd: true, started: true,
			pod: true, seed: true, up: true, version: s.Version, hash: d.ConfigHash, peerTLS: registersTLS(s, d)}
		seed.serve(s, d)
		if m != nil {
			seed.pvc, seed.class, seed.bytes = m.pvc, m.class, m.bytes
		}
		w.members[s.Member] = seed
		w.claim(seed, d)
		w.clusterID, w.leader = "c1", s.Member
	case plan.AddLearner:
		if !w.hasQuorum() {
			return false, fmt.Errorf("AddLearner %s without quorum", s.Member)
		}
		for _, x := range w.members {
			if x.inEtcd && (x.learner || !x.started) {
				return false, fmt.Errorf("AddLearner %s while %s has not finished joining", s.Member, x.name)
			}
		}
		if m != nil {
			return false, fmt.Errorf("AddLearner %s re-uses a member name", s.Member)
		}
		if all > 1 && up < quorum(all+1) {
			return true, nil // etcd's strict reconfiguration check: the leader is not connected to enough voters
		}
		w.nextID++
		w.members[s.Member] = &wmember{name: s.Member, id: strconv.Itoa(w.nextID), inEtcd: true, learner: true, peerTLS: registersTLS(s, d)}
	case plan.StartMember:
		if m == nil || !m.inEtcd {
			return false, fmt.Errorf("StartMember %s, which is not in the membership", s.Member)
		}
		if m.dataLost || (m.started && !m.pvc) {
			return false, fmt.Errorf("StartMember %s on lost data: a voter that forgot its log", s.Member)
		}
		if m.preflightErr != "" {
			return true, nil // the executor keeps the Pod for a person, and stalls
		}
		w.claim(m, d)
		m.pod, m.up, m.starting, m.deleting = true, false, true, false // it takes time to start
		m.version, m.hash = s.Version, d.ConfigHash
		m.serve(s, d)
	case plan.CheckData:
		if !isVoter || !m.pod || !m.deleting || !m.pvc || w.memory {
			return false, fmt.Errorf("CheckData %s: only a voter on a volume whose Pod goes gets a check Pod", s.Member)
		}
		m.checked = true
	case plan.PromoteLearner:
		if !m.live() {
			return false, fmt.Errorf("PromoteLearner %s, which does not run", s.Member)
		}
		m.learner = false
	case plan.TransferLeadership:
		if t := w.members[s.Target]; t == nil || !t.live() || t.learner || w.peersCut && m != nil && m.source {
			return false, fmt.Errorf("TransferLeadership to %s, which cannot lead (or cannot reach the source)", s.Target)
		}
		w.leader = s.Target
	case plan.RemoveMember:
		if !w.hasQuorum() {
			return false, fmt.Errorf("RemoveMember %s without quorum", s.Member)
		}
		if m != nil && m.source && w.snapshotTo != "" && !w.join.SourceLeft &&
			!slices.ContainsFunc(w.snapshots, func(x MemberSnapshot) bool { return x.Name == SourceSnapshotName(w.cluster) }) {
			return false, fmt.Errorf("RemoveMember %s, the first source member to leave, before the adoption's snapshot was stored", s.Member)
		}
		if w.leader == s.Member && all > 1 {
			return false, fmt.Errorf("RemoveMember %s while it leads", s.Member)
		}
		if isVoter {
			left := up
			if m.live() {
				left--
			}
			if hadQuorum && left < quorum(all-1) {
				return false, fmt.Errorf("RemoveMember %s loses quorum: %d up of %d left", s.Member, left, all-1)
			}
		}
		m.inEtcd, m.learner, m.removed = false, false, true
	case plan.DeleteMember:
		if m.inEtcd {
			return false, fmt.Errorf("DeleteMember %s deletes the data of a member still in the membership", s.Member)
		}
		if m.retained { // the executor keeps a retained claim: only the Pod goes
			m.pod, m.up, m.silent, m.starting = false, false, false, false
			break
		}
		if !w.memory && m.pvc && m.started && !w.lostData(m) && !m.removed {
			return false, fmt.Errorf("DeleteMember %s deletes the claim of a member that held data and was not removed through a quorum", s.Member)
		}
		delete(w.members, s.Member)
	case plan.StopMember:
		// Only to park, or to clear the way for a restore: never a voter that holds its data,
		// unless it is saved, or on its volume with a snapshot of the most recent survivor
		// saved (which holds every write it committed).
		if d.Replicas != 0 && (w.hasQuorum() || (isVoter && !w.lostData(m) && !m.deleting && !w.saved(m) && (w.memory || !w.savedNewest()))) {
			return false, fmt.Errorf("StopMember %s with replicas %d, of a cluster that can still serve", s.Member, d.Replicas)
		}
		m.pod, m.up, m.silent, m.deleting = false, false, false, false
		if w.memory {
			m.dataLost = true
		}
	case plan.UpgradeMember, plan.RestartMember:
		if err := w.takeDown(s, m, all, up, hadQuorum); err != nil {
			return false, err
		}
		if s.Action == plan.UpgradeMember {
			if err := w.versionAllowed(m, s.Version); err != nil {
				return false, fmt.Errorf("UpgradeMember %s: %w", s.Member, err)
			}
		}
		m.version, m.hash, m.up, m.silent, m.starting, m.deleting = s.Version, d.ConfigHash, false, false, true, false // it takes time to start again
		m.serve(s, d)
	case plan.Compact:
		if !w.hasQuorum() {
			return false, fmt.Errorf("Compact without quorum")
		}
		for _, x := range w.members {
			x.free, x.history = x.free+x.history, 0
		}
		w.compacted = true
	case plan.Defragment:
		if !isVoter || !m.live() {
			return false, fmt.Errorf("Defragment %s, which is not a voter that runs", s.Member)
		}
		if err := w.takeDown(s, m, all, up, hadQuorum); err != nil {
			return false, err
		}
		m.free = 0
	case plan.ExpandVolume:
		if m == nil || !m.pvc || !w.expandable[m.class] {
			return false, fmt.Errorf("ExpandVolume %s, whose volume cannot grow", s.Member)
		}
		m.bytes = max(m.bytes, d.StorageBytes)
	case plan.ForceNewCluster:
		if err := w.forceNewCluster(m, all); err != nil {
			return false, err
		}
		m.serve(s, d)
	case plan.RestoreFromBackup:
		if m != nil && m.restoring != nil && m.restoring.Name == s.Backup {
			return !w.restartSeeds(), nil
		}
		if err := w.restore(s, d, m); err != nil {
			return false, err
		}
	case plan.SnapshotSurvivor:
		if err := w.snapshot(s, m); err != nil {
			return false, err
		}
	case plan.SnapshotSource:
		if w.join == nil || w.join.SourceLeft || w.snapshotTo == "" || m == nil || !m.live() || m.source {
			return false, fmt.Errorf("SnapshotSource %s outside an adoption with a destination, or of a member not of the cluster's own", s.Member)
		}
		w.snapshots = append(w.snapshots, MemberSnapshot{Backup: Backup{Name: s.Backup}, MemberID: m.id, Member: m.name, Phase: SnapshotSucceeded})
	case plan.Acknowledge:
		if o.Join == nil || !o.Join.AllLeft {
			return false, fmt.Errorf("Acknowledge %s while source members remain", s.Why)
		}
		w.adopted = true
	case plan.DisarmAlarm:
		quota := cmp.Or(d.QuotaBytes, defaultQuota)
		for _, x := range w.members {
			if x.inEtcd && !x.learner && x.dbSize() >= quota {
				return false, fmt.Errorf("DisarmAlarm while %s holds %d bytes against a quota of %d", x.name, x.dbSize(), quota)
			}
		}
		w.alarms = slices.DeleteFunc(w.alarms, func(a Alarm) bool { return a.MemberID == s.MemberID && a.Type == AlarmNoSpace })
	case plan.EnableAuth:
		for _, m := range w.sorted() {
			if m.pod && m.listen.Client != plan.ListenTLS {
				return false, fmt.Errorf("EnableAuth while %s serves clients %q: a client without a certificate has no user", m.name, m.listen.Client)
			}
		}
		if s.Why == plan.WhyAuthAdopted {
			if !w.auth || w.join == nil {
				return false, fmt.Errorf("EnableAuth %s without an adopted source whose auth is on", s.Why)
			}
			w.join.UsersMade = true
		}
		w.auth = true
	case plan.DisableAuth:
		w.auth = false
	case plan.UpdateUsers:
		w.users = d.Users
	case plan.RotateCA:
		if w.ca == nil {
			return false, fmt.Errorf("RotateCA of a world without a CA")
		}
		if err := w.rotate(s); err != nil {
			return false, err
		}
	case plan.RenewCertificate, plan.AwaitCertificate:
		if w.ca != nil {
			if err := w.renew(s); err != nil {
				return false, err
			}
			break
		}
		i := slices.IndexFunc(w.renewals, func(r Renewal) bool { return r.Secret == s.Secret })
		if i < 0 || w.renewals[i].Unserved != (s.Action == plan.AwaitCertificate) {
			return false, fmt.Errorf("%s of %s, which is not to be renewed so", s.Action, s.Secret)
		}
		if s.Action == plan.RenewCertificate && w.renewals[i].Mounted {
			w.renewals[i].Unserved = true // served once the world looks again
		} else {
			w.renewals = slices.Delete(w.renewals, i, i+1)
		}
	case plan.UpdatePeerURL:
		if !w.hasQuorum() || m == nil || !m.inEtcd {
			return false, fmt.Errorf("UpdatePeerURL %s without quorum, or of no member", s.Member)
		}
		m.peerTLS, m.peerAlt = s.Why == plan.WhyPeerURLToTLS, MovedPeerURLPort(s) == 2382
	default:
		return false, fmt.Errorf("unknown action %q", s.Action)
	}
	for k, x := range w.members {
		if !x.inEtcd && !x.pod && !x.pvc {
			delete(w.members, k) // nothing left of it anywhere
		}
	}
	if x := w.members[s.Member]; x != nil && x.pod && w.ca != nil && s.Action.StartsPod() {
		w.mount(x)
	}
	if err := w.cutOff(); err != nil {
		return false, fmt.Errorf("after %s %s: %w", s.Action, s.Member, err)
	}
	if w.ca != nil {
		if err := w.mistrust(); err != nil {
			return false, fmt.Errorf("after %s %s: %w", s.Action, s.Subject(), err)
		}
	}
	w.elect()
	return false, nil
}

// restore checks a cluster starting anew from a backup against what must hold for it to
// lose nothing that could be kept: no voter can bring the cluster back (a majority lost its
// data, and those that kept it hold it in memory or none did), the backup is the newest
// of this cluster, and the seeds are new members. The new cluster holds the seeds alone.
func (w *world) restore(s plan.Step, d Desired, m *wmember) error {
	all, kept := 0, 0
	for _, x := range w.members {
		if x.inEtcd && !x.learner {
			all++
			if !w.lostData(x) {
				kept++
			}
		}
	}
	switch {
	case m != nil:
		return fmt.Errorf("RestoreFromBackup on %s, which exists", s.Member)
	case w.source() == nil || w.source().Name != s.Backup:
		return fmt.Errorf("RestoreFromBackup from %s, which is not the cluster's backup with the highest revision", s.Backup)
	case kept >= quorum(all) || (kept > 0 && !w.memory && !w.savedNewest()):
		return fmt.Errorf("RestoreFromBackup while %d of %d voters kept their data, and no snapshot holds the most recent one's", kept, all)
	}
	// At most one cluster ID can serve: no Pod of the old cluster may run etcd beside the
	// seeds (one that ended at its preflight check runs none).
	for _, x := range w.sorted() {
		if x.pod && !x.dataLost && x.preflightErr == "" {
			return fmt.Errorf("RestoreFromBackup while the Pod of %s, of the old cluster, has not gone", x.name)
		}
	}
	for _, x := range w.members {
		// The executor keeps the claims of the members that held data.
		x.retained = x.retained || !w.memory && x.pvc && x.started && !w.lostData(x)
		x.inEtcd, x.learner = false, false
	}
	// Every seed restores the same snapshot and starts at once (one, in memory).
	seeds := 1
	if !w.memory {
		seeds = max(d.Replicas, 1)
	}
	for i := range seeds {
		name := vocab.MemberName(w.cluster, vocab.Ordinal(w.cluster, s.Member)+i)
		if w.members[name] != nil {
			return fmt.Errorf("RestoreFromBackup on %s, which exists", name)
		}
		w.nextID++
		seed := &wmember{name: name, id: strconv.Itoa(w.nextID), inEtcd: true, started: true, pod: true, seed: true, up: true,
			version: s.Version, hash: d.ConfigHash, restoring: w.source(), peerTLS: registersTLS(s, d)}
		seed.serve(s, d)
		w.members[name] = seed
		w.claim(seed, d)
		if w.ca != nil {
			w.mount(seed)
		}
	}
	w.clusterID, w.leader, w.alarms, w.compacted = w.clusterID+"'", s.Member, nil, false
	w.foreign = nil // members added by hand to the old cluster are not in the new one
	return nil
}

// restartSeeds carries on a restore whose seeds never answered through a quorum: the seeds
// whose Pods went start again on what their volumes hold. It says whether any did; if not,
// the step waits for the seeds that run to answer.
func (w *world) restartSeeds() bool {
	started := false
	for _, x := range w.members {
		if x.restoring != nil && !x.pod {
			x.pod, x.up, x.starting, started = true, !w.lostData(x), false, true
		}
	}
	return started
}

// source is what a restore must use: of the newest backup and the survivors' snapshots
// that succeeded, the one with the highest revision (the backup on a tie).
func (w *world) source() *Backup {
	var b *Backup
	if w.backup != nil && w.backupOf == w.clusterID {
		b = w.backup
	}
	for i := range w.snapshots {
		if s := &w.snapshots[i]; s.Phase == SnapshotSucceeded && (b == nil || s.Revision > b.Revision) {
			b = &s.Backup
		}
	}
	return b
}

// saved: a snapshot of the member succeeded, taken at the raft term and index it has
// (when the snapshot records them).
func (w *world) saved(m *wmember) bool {
	return slices.ContainsFunc(w.snapshots, func(s MemberSnapshot) bool {
		return s.MemberID == m.id && s.Phase == SnapshotSucceeded && (s.RaftIndex == 0 || s.RaftTerm == 2+m.term && s.RaftIndex == 100+m.index)
	})
}

// savedNewest: a snapshot succeeded of a voter that kept its data on its volume, and no
// voter that kept its data has a more recent log.
func (w *world) savedNewest() bool {
	for _, x := range w.members {
		if x.inEtcd && !x.learner && !w.lostData(x) && w.saved(x) && w.newest(x) {
			return true
		}
	}
	return false
}

// newest: no voter that kept its data has a more recent log than m.
func (w *world) newest(m *wmember) bool {
	for _, x := range w.members {
		if x.inEtcd && !x.learner && !w.lostData(x) && (x.term > m.term || x.term == m.term && x.index > m.index) {
			return false
		}
	}
	return true
}

// snapshot stores a snapshot of a member that runs alone after a majority lost their data
// (it needs no quorum), once per member: one in memory, or the voter with the most recent
// log of those that kept their data on their volumes.
func (w *world) snapshot(s plan.Step, m *wmember) error {
	// An early one is taken before the others showed their data (a look may not see a
	// quorum that answers): it decides nothing, and counts only while the member is current.
	early := s.Why == plan.WhySurvivorSnapshotEarly
	switch {
	case m == nil || !m.live() || (w.hasQuorum() && !early) || w.snapshotTo == "" || !m.inEtcd || m.learner:
		return fmt.Errorf("SnapshotSurvivor %s, which is not a voter that runs in a cluster without quorum, or with nowhere to store it", s.Member)
	case !w.memory && !early && (w.lostData(m) || !w.newest(m)):
		return fmt.Errorf("SnapshotSurvivor %s, which is not the survivor with the most recent log", s.Member)
	case slices.ContainsFunc(w.snapshots, func(x MemberSnapshot) bool { return x.Name == s.Backup }):
		if !early && !w.memory && !m.snapshotted && w.saved(m) {
			m.snapshotted = true // the recovery takes the early snapshot, which holds all the member has
			return nil
		}
		return fmt.Errorf("SnapshotSurvivor %s a second time", s.Member)
	}
	m.snapshotted = !w.memory && !early
	snap := MemberSnapshot{Backup: Backup{Name: s.Backup}, MemberID: m.id, Member: m.name, Phase: SnapshotSucceeded,
		RaftTerm: 2 + m.term, RaftIndex: 100 + m.index}
	if w.snapshotFails != "" {
		snap.Phase, snap.Message = SnapshotFailed, w.snapshotFails
	} else {
		snap.Revision, snap.TakenAt = w.snapshotRev, "2026-11-24T10:00:00Z"
	}
	w.snapshots = append(w.snapshots, snap)
	return nil
}

// forceNewCluster checks a restart alone against what etcd needs for it to lose nothing it
// need not: the member kept its data, the voters that kept theirs can never form a quorum,
// and none of them has a longer log. etcd then drops every other member.
func (w *world) forceNewCluster(m *wmember, all int) error {
	if m == nil || !m.inEtcd || m.learner || w.lostData(m) || w.memory {
		return fmt.Errorf("ForceNewCluster on a member that is not a voter holding its data")
	}
	kept := 0
	for _, x := range w.members {
		if x.inEtcd && !x.learner && !w.lostData(x) {
			kept++
			if x.term > m.term || x.term == m.term && x.index > m.index {
				return fmt.Errorf("ForceNewCluster %s while %s has a more recent log", m.name, x.name)
			}
		}
	}
	if kept >= quorum(all) {
		return fmt.Errorf("ForceNewCluster %s while %d of %d voters kept their data and can form a quorum", m.name, kept, all)
	}
	for _, x := range w.members {
		if x != m {
			// The executor keeps the claims of the members that held data.
			x.retained = x.retained || x.pvc && x.started && !w.lostData(x)
			x.inEtcd, x.learner = false, false
		}
	}
	// It is up as soon as its Pod runs: while it starts, the executor's record of the
	// membership still lists the others, so the same step is planned until it answers.
	m.pod, m.up, m.starting, m.silent, m.deleting = true, true, false, false, false
	return nil
}
