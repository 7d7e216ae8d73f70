// Package etcdfake is an in-memory etcd.Cluster for the executor's unit tests: it serves a
// view the test sets and records the membership calls made on it.
package etcdfake

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/planner"
)

// Cluster is a fake etcd cluster.
type Cluster struct {
	mu sync.Mutex
	// View is what View returns (a copy); nil fails View as if no member answered.
	view *planner.EtcdView
	// Err, when set, fails every membership call.
	Err error
	// Unconnected, when set, refuses AddLearner as etcd's strict reconfiguration check
	// does while its leader has not been connected to enough voters for 5 s.
	Unconnected bool
	// InactiveAt, when set, refuses AddLearner the same way while the member of that ID
	// leads: an etcd leader that holds a peer as unconnected after one failed send.
	InactiveAt string
	// Lag, when set, lets membership calls succeed without showing in the view: etcd
	// applied them, and every look so far came before.
	Lag bool
	// Compacted, when set, changes the view as a compaction does (what it frees).
	Compacted func(v *planner.EtcdView)
	// Database is what Snapshot streams, followed by its SHA-256 as etcd appends it, and
	// Revision the revision it returns.
	Database []byte
	Revision int64
	// Held is what Contents answers, at any revision.
	Held etcd.Contents
	// Cut, when set, names members whose raft messages pass to no peer (ActivePeers).
	Cut []string
	// Looking, when set, runs as View starts, with its context: a look that etcd holds.
	Looking   func(ctx context.Context)
	calls     []string
	nextID    uint64
	clusterID string // set by SetCluster: a view of another cluster is refused, as Client does
}

var _ etcd.Cluster = (*Cluster)(nil)

// New returns a fake cluster serving view.
func New(view *planner.EtcdView) *Cluster { return &Cluster{view: view, nextID: 0x100} }

// Dial returns a dial function that always connects to c.
func (c *Cluster) Dial(map[string]string, *tls.Config) (etcd.Cluster, error) { return c, nil }

// SetView replaces the view.
func (c *Cluster) SetView(v *planner.EtcdView) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.view = v
}

// Calls returns the membership calls made so far, such as "Remove 2" or "MoveLeader 1 2".
func (c *Cluster) Calls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.calls...)
}

func (c *Cluster) call(format string, args ...any) error {
	c.calls = append(c.calls, fmt.Sprintf(format, args...))
	return c.Err
}

func (c *Cluster) View(ctx context.Context) (*planner.EtcdView, error) {
	if c.Looking != nil {
		c.Looking(ctx)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.view == nil {
		return nil, errors.New("no member answers")
	}
	if c.clusterID != "" && c.view.ClusterID != c.clusterID {
		return nil, fmt.Errorf("an endpoint answered for another etcd cluster than %s", c.clusterID)
	}
	v := *c.view
	v.Members = append([]planner.EtcdMember(nil), c.view.Members...)
	return &v, nil
}

// LocalView is View, not linearizable.
func (c *Cluster) LocalView(ctx context.Context) (*planner.EtcdView, error) {
	v, err := c.View(ctx)
	if v != nil {
		v.Linearizable = false
	}
	return v, err
}

func (c *Cluster) AddLearner(_ context.Context, peerURL string) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.call("AddLearner %s", peerURL); err != nil {
		return 0, err
	}
	if c.Unconnected || c.InactiveAt != "" && c.view != nil && c.view.LeaderID == c.InactiveAt {
		return 0, etcd.NotYet(rpctypes.ErrUnhealthy)
	}
	c.nextID++
	if c.shows() {
		c.view.Members = append(c.view.Members, planner.EtcdMember{ID: etcd.ID(c.nextID), PeerURLs: []string{peerURL}, Learner: true})
	}
	return c.nextID, nil
}

func (c *Cluster) Promote(_ context.Context, id uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.call("Promote %s", etcd.ID(id)); err != nil {
		return err
	}
	if c.behind(id) {
		return fmt.Errorf("%w: etcdserver: can only promote a learner member which is in sync with leader", etcd.ErrNotYet)
	}
	if !c.shows() {
		return nil
	}
	return c.member(id, func(m *planner.EtcdMember) { m.Learner = false })
}

// behind: etcd would refuse to promote the learner.
func (c *Cluster) behind(id uint64) bool {
	return c.view != nil && !InSync(c.view, etcd.ID(id))
}

// InSync follows etcd's rule for promotion as far as a view shows it: a learner whose log
// is within a tenth of the leader's may become a voter.
func InSync(v *planner.EtcdView, id string) bool {
	var learner, leader uint64
	for _, m := range v.Members {
		switch m.ID {
		case id:
			learner = m.RaftIndex
		case v.LeaderID:
			leader = m.RaftIndex
		}
	}
	return learner*10 >= leader*9
}

func (c *Cluster) Remove(_ context.Context, id uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.call("Remove %s", etcd.ID(id)); err != nil {
		return err
	}
	if c.shows() {
		for i, m := range c.view.Members {
			if m.ID == etcd.ID(id) {
				c.view.Members = append(c.view.Members[:i], c.view.Members[i+1:]...)
				break
			}
		}
	}
	return nil
}

func (c *Cluster) UpdatePeerURL(_ context.Context, id uint64, peerURL string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.call("UpdatePeerURL %s %s", etcd.ID(id), peerURL); err != nil {
		return err
	}
	if !c.shows() {
		return nil
	}
	return c.member(id, func(m *planner.EtcdMember) { m.PeerURLs = []string{peerURL} })
}

func (c *Cluster) MoveLeader(_ context.Context, leader, target uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.call("MoveLeader %s %s", etcd.ID(leader), etcd.ID(target)); err != nil {
		return err
	}
	if c.shows() {
		c.view.LeaderID = etcd.ID(target)
	}
	return nil
}

// EnableAuth switches auth on in the view, as etcd would once every voter said so.
func (c *Cluster) EnableAuth(_ context.Context, a etcd.Auth) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.call("EnableAuth %s", a.User); err != nil {
		return err
	}
	if c.shows() {
		c.view.Auth = new(true)
	}
	return nil
}

// AuthEnabled says what the view says (off when it says nothing).
func (c *Cluster) AuthEnabled(context.Context) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.view == nil {
		return false, errors.New("no member answers")
	}
	return c.view.Auth != nil && *c.view.Auth, nil
}

// SyncUsers records the call.
func (c *Cluster) SyncUsers(_ context.Context, users []etcd.User, gone []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var names []string
	for _, u := range users {
		names = append(names, u.Name)
	}
	return c.call("SyncUsers %v gone %v", names, gone)
}

// DisableAuth switches auth off in the view.
func (c *Cluster) AdoptUsers(_ context.Context, users []string, as, _ string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.call("AdoptUsers %s as %s", strings.Join(users, ","), as)
}

// ActivePeers counts every member of the view active to every other, but those Cut.
func (c *Cluster) ActivePeers(_ context.Context, members map[string]string) map[string][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string][]string{}
	if c.view == nil {
		return out // no member answers
	}
	for _, id := range members {
		out[id] = []string{}
		for _, m := range c.view.Members {
			if m.ID != id && !slices.Contains(c.Cut, id) && !slices.Contains(c.Cut, m.ID) {
				out[id] = append(out[id], m.ID)
			}
		}
	}
	return out
}

func (c *Cluster) DisableAuth(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.call("DisableAuth"); err != nil {
		return err
	}
	if c.shows() {
		c.view.Auth = new(false)
	}
	return nil
}

func (c *Cluster) Compact(context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.call("Compact"); err != nil {
		return err
	}
	if c.shows() {
		c.view.HistoryCompacted = true
		if c.Compacted != nil {
			c.Compacted(c.view)
		}
	}
	return nil
}

func (c *Cluster) Defragment(_ context.Context, _ string, id uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.call("Defragment %s", etcd.ID(id)); err != nil {
		return err
	}
	if !c.shows() {
		return nil
	}
	return c.member(id, func(m *planner.EtcdMember) { m.DBSize = m.DBInUse })
}

func (c *Cluster) DisarmNoSpace(_ context.Context, id uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.call("DisarmNoSpace %s", etcd.ID(id)); err != nil {
		return err
	}
	if c.shows() {
		c.view.Alarms = slices.DeleteFunc(c.view.Alarms, func(a planner.Alarm) bool {
			return a.MemberID == etcd.ID(id) && a.Type == planner.AlarmNoSpace
		})
	}
	return nil
}

func (c *Cluster) Snapshot(_ context.Context, _ string, id uint64) (io.ReadCloser, int64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.call("Snapshot %s", etcd.ID(id)); err != nil {
		return nil, 0, err
	}
	sum := sha256.Sum256(c.Database)
	return io.NopCloser(bytes.NewReader(append(bytes.Clone(c.Database), sum[:]...))), c.Revision, nil
}

func (c *Cluster) Contents(_ context.Context, _ string, id uint64, rev int64) (etcd.Contents, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.call("Contents %s %d", etcd.ID(id), rev); err != nil {
		return etcd.Contents{}, err
	}
	return c.Held, nil
}

// shows: a call's effect shows in the view.
func (c *Cluster) shows() bool { return c.view != nil && !c.Lag }

func (c *Cluster) member(id uint64, f func(*planner.EtcdMember)) error {
	if c.view == nil {
		return errors.New("no member answers")
	}
	for i := range c.view.Members {
		if c.view.Members[i].ID == etcd.ID(id) {
			f(&c.view.Members[i])
			return nil
		}
	}
	return fmt.Errorf("member %s not found", strings.ToLower(etcd.ID(id)))
}

func (c *Cluster) SetCluster(clusterID string, _ map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clusterID = clusterID
}

// SetStopping is of no use to the fake: its view is what the test sets.
func (c *Cluster) SetStopping(int) {}

func (c *Cluster) Close() error { return nil }
