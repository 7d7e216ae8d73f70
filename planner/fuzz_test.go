package planner

import (
	"encoding/json"
	"strconv"
	"testing"
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
// without Pods and volumes, healthy or not, at most one membership change in flight.
func randomWorld(r *bytesReader) (Desired, *world) {
	base := 1 + r.n(len(fuzzVersions)-2)
	c := cluster(r.n(6), fuzzVersions[min(base+r.n(3), len(fuzzVersions)-1)])
	if r.flag(5) {
		c.ConfigHash = "cfg-2"
	}
	w := &world{cluster: name, members: map[string]*wmember{}}
	n := r.n(7)
	inFlight := false
	for i := 0; i < n; i++ {
		ord := i + r.n(2)*i
		m := &wmember{name: MemberName(name, ord), version: fuzzVersions[base+r.n(2)], hash: "cfg-1"}
		if r.flag(4) {
			m.hash = c.ConfigHash
		}
		m.inEtcd = !r.flag(6)
		if m.inEtcd && !inFlight && r.flag(5) {
			m.learner, inFlight = true, true
			m.started = r.flag(2)
		} else {
			m.started = m.inEtcd || r.flag(2)
		}
		m.pod = m.started && !r.flag(4)
		m.pvc = m.pod || !r.flag(4)
		m.healthy = m.pod && !r.flag(4)
		m.dataLost = m.pod && r.flag(8)
		if m.dataLost {
			m.healthy = false
		}
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
			m.inEtcd, m.learner, m.started, m.pod, m.healthy, m.dataLost = false, false, false, false, false, false
		}
	}
	for k, m := range w.members {
		if !m.inEtcd && !m.pod && !m.pvc {
			delete(w.members, k) // nothing left of it anywhere
		}
	}
	return c, w
}

// FuzzPlan checks etcd's rules over random observed states: at most one membership change
// in flight, no step costs quorum, the leader is never taken down without a transfer,
// upgrades go one minor at a time and never down, the same input gives the same plan, and a
// plan that can run to its end leaves a cluster with nothing more to do.
func FuzzPlan(f *testing.F) {
	for _, seed := range []string{"", "\x03\x04\x03", "\x05\x02\x01\x03\x00\x00\x01\x00", "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09",
		"\x01\x04\x02\x05\x01\x01\x00\x01\x03\x02\x01\x00\x00\x00\x00\x01\x02\x01\x03\x00\x00\x03"} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, w := randomWorld(&bytesReader{b: data})
		d := c
		o := w.observe()
		p := Plan(c, o)
		a, _ := json.Marshal(p)
		b, _ := json.Marshal(Plan(c, o))
		if string(a) != string(b) {
			t.Fatalf("same input, different plans:\n%s\n%s", a, b)
		}
		for i := 0; len(p.Steps) > 0; i++ {
			if i > 60 {
				t.Fatalf("no convergence after %d steps; plan %s", i, summary(p))
			}
			s := p.Steps[0]
			stuck, err := w.apply(s, d)
			if err != nil {
				t.Fatalf("step %d of %v: %v\nobserved: %s", i, summary(p), err, mustJSON(o))
			}
			if stuck {
				return // waits for something that cannot happen; the executor reports Stalled
			}
			o = w.observe()
			p = Plan(c, o)
		}
		// A cluster that does not answer may have nothing to do but wait for its members.
		waiting := o.Etcd == nil && o.ClusterID != ""
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
		if d.Replicas == 0 {
			if m.pod || m.learner { // parked: no Pods, no join in flight
				return false
			}
			continue
		}
		if !m.inEtcd || m.learner || m.dataLost || !m.pod || m.version != d.Version || m.hash != d.ConfigHash {
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
