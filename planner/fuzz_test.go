package planner

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/vocab"
)

var fuzzVersions = []string{"3.4.30", "3.5.0", "3.5.35", "3.6.0", "3.6.16", "3.7.1"}

// bytesReader hands out small numbers from the fuzzer's input, then zeros.
type bytesReader struct {
	b []byte
	i int
}

func (r *bytesReader) n(max int) int {
	if r.i >= len(r.b) {
		return 0
	}
	r.i++
	return int(r.b[r.i-1]) % max
}

func (r *bytesReader) flag(oneIn int) bool { return r.n(oneIn) == 0 }

// randomWorld builds a cluster state etcd and Kubernetes could be in: members with or
// without Pods and volumes, up or down, at most one membership change in flight, alarms, an
// election, a stale view, and now and then a member the operator does not manage.
func randomWorld(r *bytesReader) (Desired, *world) {
	base := 1 + r.n(len(fuzzVersions)-2)
	c := cluster(r.n(6), fuzzVersions[min(base+r.n(3), len(fuzzVersions)-1)])
	if r.flag(5) {
		c.ConfigHash = "cfg-2"
	}
	c.DefragPercent = 50 // fragments come with faults, and with compaction
	w := &world{cluster: name, members: map[string]*wmember{}}
	// Volumes of two classes and two sizes; the spec may ask for either, or (memory) none.
	classes := []string{"a", "b", ""}
	c.StorageClass, c.StorageBytes = classes[r.n(3)], int64(1+r.n(2))<<30
	w.expandable = map[string]bool{"a": true, "b": false}
	if r.flag(4) {
		delete(w.expandable, "b") // the class cannot be read
	}
	w.memory = c.Replicas > 0 && r.flag(8) // admission refuses replicas 0 in memory
	c.Memory = w.memory
	n := r.n(7)
	inFlight := false
	for i := 0; i < n; i++ {
		ord := i + r.n(2)*i
		m := &wmember{name: vocab.MemberName(name, ord), version: fuzzVersions[base+r.n(2)], hash: "cfg-1"}
		if r.flag(4) {
			m.hash = c.ConfigHash
		}
		m.inEtcd = !r.flag(6)
		m.removed = !m.inEtcd // a leftover left through a removal before this look
		if m.inEtcd && !inFlight && r.flag(5) {
			m.learner, inFlight = true, true
			m.started = r.flag(2)
		} else {
			m.started = m.inEtcd || r.flag(2)
		}
		m.pod = m.started && !r.flag(4)
		m.pvc = !w.memory && (m.pod || !r.flag(4))
		m.class, m.bytes = classes[r.n(2)], int64(1+r.n(2))<<30
		m.index = uint64(r.n(3))
		m.up = m.pod && !r.flag(4)
		m.dataLost = m.pod && r.flag(8)
		if m.dataLost {
			m.up = false
		}
		m.deleting = m.pod && !m.dataLost && r.flag(10) // a wiped member's Pod going would hide what its preflight found
		w.nextID++
		m.id = strconv.Itoa(w.nextID)
		if _, dup := w.members[m.name]; !dup {
			w.members[m.name] = m
		}
	}
	voters := 0
	for _, m := range w.members {
		if m.inEtcd && !m.learner {
			voters++
		}
	}
	for _, m := range w.sorted() {
		if m.learner && voters == 0 {
			m.learner, m.started = false, true // etcd always has a voter
		}
		if m.inEtcd && m.started {
			w.clusterID = "c1"
		}
		if w.leader == "" && m.inEtcd && !m.learner && m.live() && !r.flag(6) {
			w.leader = m.name
		}
	}
	if w.clusterID == "" {
		// Before bootstrap nothing is in etcd; keep only a possible seed volume.
		for _, m := range w.members {
			m.inEtcd, m.learner, m.started, m.pod, m.up, m.dataLost = false, false, false, false, false, false
		}
	}
	for k, m := range w.members {
		if !m.inEtcd && !m.pod && !m.pvc {
			delete(w.members, k) // nothing left of it anywhere
		}
	}
	if r.flag(4) {
		w.alarms = []Alarm{{MemberID: "1", Type: "NOSPACE"}}
	}
	if r.flag(6) {
		w.renewals = []Renewal{{Secret: "demo-server-tls", Mounted: true}, {Secret: "demo-operator-tls"},
			{Secret: "demo-0-peer-tls", Mounted: true, Unserved: r.flag(2)}}
	}
	w.election = r.flag(6)
	if r.flag(5) {
		w.staleBelow = 1 + r.n(max(w.nextID, 1))
	}
	switch r.n(24) {
	case 0:
		w.foreign = []EtcdMember{{ID: "f1", Name: "other", PeerURLs: []string{"http://10.89.0.9:2380"}, Answering: true}}
	case 1: // a learner added by hand under the name of a member etcd lists
		for _, m := range w.sorted() {
			if id, _ := strconv.Atoi(m.id); m.inEtcd && (w.staleBelow == 0 || id <= w.staleBelow) {
				w.foreign = []EtcdMember{{ID: "f2", PeerURLs: []string{"http://" + m.name + ".demo.default.svc:2380"}, Learner: true}}
				break
			}
		}
	}
	for _, m := range w.sorted() { // a volume its preflight check cannot read: down, never lost
		if m.pod && m.pvc && m.started && !m.dataLost && r.flag(10) {
			m.preflightErr, m.up = "exit code 5: permission denied", false
		}
	}
	if r.flag(3) {
		tlsSwitch(r, &c, w)
	} else if r.flag(3) {
		rotation(r, &c, w)
	}
	if r.flag(3) { // auth asked for (with client TLS, as admission holds it), on, or both
		c.Auth = c.ClientTLS && r.flag(2)
		w.auth = r.flag(2) && !slices.ContainsFunc(w.sorted(), func(m *wmember) bool { return m.pod && m.listen.Client != plan.ListenTLS })
		w.authFromCreation = r.flag(4)
		if c.Auth && r.flag(2) {
			c.Users = "u1"
		}
		if r.flag(2) {
			w.users = "u0"
		}
	}
	if w.clusterID != "" && r.flag(6) {
		adopting(r, &c, w)
		w.join.UsersMade = w.auth && r.flag(2)
	}
	if r.flag(2) { // a survivor can be snapshotted, and restored from
		w.snapshotTo, w.snapshotRev = "s3://fuzz/", int64(1+r.n(3))*20
		if r.flag(2) {
			w.backup, w.backupOf = &Backup{Name: "nightly", Revision: 40, TakenAt: "2026-11-23T03:00:00Z"}, w.clusterID
		}
		c.RecoveryApproved = r.flag(2) // a survivor's snapshot is then taken as soon as no quorum answers
	}
	return c, w
}

// tlsSwitch puts the world somewhere in switching TLS on, as the spec asks: not begun,
// some members serving TLS beside plain text, every one and peer URLs moving, plain text
// going; or a cluster made with TLS.
func tlsSwitch(r *bytesReader, c *Desired, w *world) {
	c.ClientTLS, c.PeerTLS = !r.flag(3), !r.flag(3)
	c.PeerTLS = c.PeerTLS || !c.ClientTLS
	both := plan.Listen{Client: plan.ListenPlain, Peer: plan.ListenPlain}
	if c.ClientTLS {
		both.Client = plan.ListenBoth
	}
	if c.PeerTLS {
		both.Peer = plan.ListenBoth
	}
	stage := r.n(5)
	for _, m := range w.sorted() {
		m.listen = plan.Listen{Client: plan.ListenPlain, Peer: plan.ListenPlain}
		switch {
		case stage == 1 && r.flag(2), stage == 2:
			m.listen = both
		case stage == 3:
			m.listen = both
			if r.flag(2) {
				m.listen = final(*c)
			}
		case stage == 4:
			m.listen, m.peerTLS = final(*c), c.PeerTLS
		}
		if stage == 3 || stage == 2 && r.flag(2) {
			m.peerTLS, m.peerAlt = c.PeerTLS, c.PeerTLS
		}
	}
	if r.flag(2) { // the same states, as the spec switches the other way on some side
		c.ClientTLS, c.PeerTLS = c.ClientTLS != r.flag(2), c.PeerTLS != r.flag(2)
	}
}

// rotation puts a cluster with TLS from its own CA somewhere in a rotation of that CA,
// in a state the rotation's passes reach: asked; the new CA trusted beside the old and some
// members restarted to read it; the new CA issuing and some certificates issued again from
// it (some not served yet); the old CA out of the trust bundle and some members restarted.
func rotation(r *bytesReader, c *Desired, w *world) {
	c.ClientTLS, c.PeerTLS = !r.flag(4), true
	c.PeerTLS = !c.ClientTLS || !r.flag(4)
	for _, m := range w.members {
		m.listen, m.peerTLS = final(*c), c.PeerTLS
	}
	w.ca = newCA(w, *c)
	ca := w.ca
	ca.asked = true
	if r.flag(3) { // a change of spec.tls's source: pass 2 restarts members onto B's Secrets
		ca.source = "Auto to Provided"
		for _, m := range w.sorted() {
			if m.pod {
				m.serves = "A"
			}
		}
	}
	stage := r.n(5)
	if stage >= 1 {
		ca.next, ca.asked = "B", false
		ca.trust = []string{"A", "B"}
		for _, m := range w.sorted() {
			if m.pod && (stage > 1 || r.flag(2)) {
				m.trusts = "A+B"
			}
		}
	}
	if stage >= 2 {
		ca.previous, ca.issuing, ca.next = "A", "B", ""
		if ca.source != "" {
			for _, l := range ca.clientLeaves() {
				ca.leaves[l] = "B"
			}
			for _, m := range w.sorted() {
				if m.pod && (stage > 2 || r.flag(2)) {
					m.serves = "B"
				}
			}
		}
		for _, l := range slices.Sorted(maps.Keys(ca.leaves)) {
			if ca.source != "" {
				break
			}
			if stage > 2 || r.flag(2) {
				ca.leaves[l] = "B"
				if r.flag(2) && stage == 2 && (l == "demo-server-tls" || strings.HasSuffix(l, "-peer-tls")) {
					ca.unserved[l] = "A"
				}
			}
		}
	}
	if stage >= 3 {
		ca.trust = []string{"B"}
		for _, m := range w.sorted() {
			if m.pod && (stage > 3 || r.flag(2)) {
				m.trusts = "B"
			}
		}
	}
	if stage == 4 && r.flag(2) {
		ca.previous, ca.asked = "", r.flag(2) // done, or asked again
	}
}

// fault disturbs the world between two steps, as the cluster does while a plan runs.
func (w *world) fault(r *bytesReader) {
	switch r.n(12) {
	case 0: // a member crashes: its Pod stays, it does not answer until restarted
		for _, m := range w.sorted() {
			if m.live() && r.flag(2) {
				m.up = false
				break
			}
		}
	case 1:
		w.election = true
	case 2:
		w.staleBelow = 1 + r.n(max(w.nextID, 1))
	case 3: // the database reaches its quota: with earlier revisions, or with live data
		w.alarms, w.compacted = []Alarm{{MemberID: "1", Type: AlarmNoSpace}}, false
		for _, m := range w.members {
			m.data, m.history = 100<<20, defaultQuota
			if r.flag(4) {
				m.data, m.history = defaultQuota, 0
			}
		}
	case 6: // a member's database fragments
		for _, m := range w.sorted() {
			if r.flag(2) {
				m.free += 64 << 20
				break
			}
		}
	case 7: // spec.maintenance.defrag.schedule comes
		w.defragDue = nil
		for _, m := range w.sorted() {
			if m.inEtcd {
				w.defragDue = append(w.defragDue, m.id)
			}
		}
	case 4: // a Pod fails to start and ends: its member needs another
		for _, m := range w.sorted() {
			if m.starting {
				m.pod, m.starting = false, false
				break
			}
		}
	case 5: // a member answers no client for a while, yet takes part in raft
		for _, m := range w.sorted() {
			if m.live() && r.flag(2) {
				m.silent = true
				break
			}
		}
	case 8: // a node is cut off: its Pods stay Terminating while etcd runs on, until it returns
		for _, m := range w.sorted() {
			if m.pod && !m.dataLost && r.flag(2) {
				m.deleting = true
				break
			}
		}
	}
	w.elect()
}

// FuzzPlan checks etcd's rules over random observed states and faults while plans run: at
// most one membership change in flight, no step takes voters that are up below quorum, never
// two disruptions at once, the leader is never taken down without a transfer, no member's
// data is deleted while it is in the membership, no claim of a member that held data is
// deleted unless a quorum removed the member (a forced recovery retains it), no voter starts
// on lost data, versions move only as etcd allows, the same input gives the same plan,
// foreign and duplicate members block, at most one cluster ID can serve (no restore while a
// Pod of the old cluster runs), and a plan that can run to its end leaves nothing more to do.
func FuzzPlan(f *testing.F) {
	for _, seed := range []string{"", "\x03\x04\x03", "\x05\x02\x01\x03\x00\x00\x01\x00", "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09",
		"\x01\x04\x02\x05\x01\x01\x00\x01\x03\x02\x01\x00\x00\x00\x00\x01\x02\x01\x03\x00\x00\x03"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &bytesReader{b: data}
		c, w := randomWorld(r)
		d := c
		o := w.observe()
		p := Plan(c, o)
		a, _ := json.Marshal(p)
		b, _ := json.Marshal(Plan(c, o))
		if string(a) != string(b) {
			t.Fatalf("same input, different plans:\n%s\n%s", a, b)
		}
		if rv := ReviewPlan(c, o, p); len(rv.Steps) != len(p.Steps) {
			t.Fatalf("a review of %d steps for a plan of %d", len(rv.Steps), len(p.Steps))
		}
		if len(w.foreign) > 0 && o.Etcd != nil {
			if p.Blocked == nil || (p.Blocked.Reason != plan.BlockForeignMember && p.Blocked.Reason != plan.BlockDuplicateMember) {
				t.Fatalf("a member the operator does not manage must block the plan: %s", mustJSON(p))
			}
			return
		}
		for i := 0; ; i++ {
			if len(p.Steps) == 0 && p.Blocked == nil && w.settle() {
				o = w.observe() // time passed: is there more to do once views caught up?
				p = Plan(c, o)
			}
			if len(p.Steps) == 0 {
				break
			}
			for _, s := range p.Steps {
				if !slices.Contains(plan.Whys, s.Why) {
					t.Fatalf("%s %s carries no known reason code: why %q (reason %q)", s.Action, s.Member, s.Why, s.Reason)
				}
			}
			if i > 80 {
				t.Fatalf("no convergence after %d steps; plan %s", i, summary(p))
			}
			s := p.Steps[0]
			stuck, err := w.apply(s, d)
			if err == nil && stuck && w.settle() {
				stuck, err = w.apply(s, d) // time passed: starting members are up, views caught up
			}
			if err != nil {
				t.Fatalf("step %d of %v: %v\nobserved: %s", i, summary(p), err, mustJSON(o))
			}
			if stuck {
				return // waits for something that cannot happen; the executor reports Stalled
			}
			if i < 10 {
				w.fault(r)
			}
			o = w.observe()
			p = Plan(c, o)
		}
		// A cluster that does not answer may have nothing to do but wait for its members; one
		// read from a member's own view plans only what needs no quorum, and waits for one.
		waiting := o.Etcd == nil && o.ClusterID != "" || o.Stale() != ""
		if p.Blocked == nil && !waiting && !isConverged(w, d) {
			for _, m := range w.sorted() {
				t.Logf("world: %+v", *m)
			}
			t.Fatalf("empty plan but not converged (replicas %d %s): %s", d.Replicas, d.Version, mustJSON(o))
		}
	})
}

// isConverged checks the world against the spec, independently of the planner.
func isConverged(w *world, d Desired) bool {
	voters := 0
	for _, m := range w.members {
		if m.retained && !m.pod || m.source && !m.inEtcd { // kept for a person to inspect, out of the cluster; or gone
			continue
		}
		if m.source {
			return false
		}
		if d.Replicas == 0 {
			if m.pod || m.learner { // parked: no Pods, no join in flight
				return false
			}
			continue
		}
		if !m.inEtcd || m.learner || m.dataLost || !m.pod || m.deleting || m.version != d.Version || m.hash != d.ConfigHash {
			return false
		}
		if m.serving() != final(d) || m.peerTLS != d.PeerTLS {
			return false
		}
		if w.ca != nil && (w.ca.stage() != "" || m.trusts != strings.Join(w.ca.trust, "+") || m.serves != "" && m.serves != w.ca.issuing) {
			return false
		}
		_, known := w.expandable[m.class]
		if !w.memory && (!m.pvc || (d.StorageClass != "" && m.class != "" && m.class != d.StorageClass) || (known && m.bytes > 0 && m.bytes < d.StorageBytes)) {
			return false
		}
		voters++
	}
	return d.Replicas == 0 || voters == d.Replicas
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestConvergedClusterHasEmptyPlan(t *testing.T) {
	for n := 1; n <= 7; n++ {
		for _, v := range []string{"3.5.35", "3.6.16"} {
			c := cluster(n, v)
			p := Plan(c, running(c, n, v).observe())
			if len(p.Steps) != 0 || p.Blocked != nil {
				t.Fatalf("%d members on %s: %v %v", n, v, summary(p), p.Blocked)
			}
		}
	}
}
