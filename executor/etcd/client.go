// Package etcd talks to an etcd cluster for the executor: it reads the cluster's view of
// itself and makes the membership changes plans call for, each one idempotent.
package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/etcdplan/etcdplan/planner"
)

// requestTimeout bounds each call: members are on the same network, a slow answer is a
// sick member.
const requestTimeout = 3 * time.Second

// promoteFor and promoteEvery bound Promote's short poll while etcd finds a learner behind.
const promoteFor, promoteEvery = 500 * time.Millisecond, 25 * time.Millisecond

// statusTimeout bounds a member's status answer in a view. A member that does not answer
// in time but accepts connections is silent, not down: nothing counts on it being down.
const statusTimeout = time.Second

// Cluster is what the executor asks of an etcd cluster. Client implements it against real
// members; tests use a fake.
type Cluster interface {
	// View reads etcd's view of itself; it fails when no member answers.
	View(ctx context.Context) (*planner.EtcdView, error)
	// AddLearner adds a learner with the peer URL, unless a member already has it.
	AddLearner(ctx context.Context, peerURL string) (uint64, error)
	// Promote makes a learner a voter, once etcd finds it caught up (ErrNotYet until then).
	Promote(ctx context.Context, id uint64) error
	// Remove removes a member.
	Remove(ctx context.Context, id uint64) error
	// MoveLeader asks the leader to hand leadership to the target.
	MoveLeader(ctx context.Context, leader, target uint64) error
	// Compact compacts the history up to the current revision.
	Compact(ctx context.Context) error
	// Defragment defragments the database of the member of that name and ID.
	Defragment(ctx context.Context, name string, id uint64) error
	// DisarmNoSpace clears a member's NOSPACE alarm.
	DisarmNoSpace(ctx context.Context, id uint64) error
	// Snapshot streams the database of the member of that name and ID, ending with the
	// SHA-256 etcd appends, and returns the revision the member had applied when it began;
	// the caller closes the stream.
	Snapshot(ctx context.Context, name string, id uint64) (io.ReadCloser, int64, error)
	// Contents reads what the member of that name and ID held at a revision: how many
	// keys, and the hash of its history.
	Contents(ctx context.Context, name string, id uint64, rev int64) (Contents, error)
	// SetCluster points the connection at the members' current endpoints (name -> URL), and
	// sets the cluster ID every answer must carry ("" until the cluster first answered).
	SetCluster(clusterID string, endpoints map[string]string)
	Close() error
}

// Client is a connection to a cluster through the client endpoints of its members. Members
// are reached at Pod IPs, and a Pod IP can be another cluster's member a moment after its Pod
// went: every answer is checked for the cluster's ID, and membership changes go through one
// endpoint that has just proved to be a member of this cluster.
type Client struct {
	cli       *clientv3.Client
	mu        sync.Mutex
	endpoints map[string]string // member name -> client endpoint
	clusterID string
}

var _ Cluster = (*Client)(nil)

// Dial connects to the given member endpoints (name -> URL). It does not wait for a
// connection: calls fail fast when nobody answers.
func Dial(endpoints map[string]string) (Cluster, error) {
	return dial(endpoints)
}

func dial(endpoints map[string]string) (*Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("no member endpoints")
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            urls(endpoints),
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		// gRPC waits a second before reconnecting by default; a member starts in a few
		// hundred milliseconds, and calls made meanwhile wait on that reconnect.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: 2 * time.Second,
		})},
		Logger: zap.NewNop(),
	})
	if err != nil {
		return nil, err
	}
	return &Client{cli: cli, endpoints: endpoints}, nil
}

func urls(endpoints map[string]string) []string {
	eps := make([]string, 0, len(endpoints))
	for _, ep := range endpoints {
		eps = append(eps, ep)
	}
	sort.Strings(eps)
	return eps
}

// SetCluster points the client at new endpoints and sets the cluster ID answers must carry;
// the connection is kept.
func (c *Client) SetCluster(clusterID string, endpoints map[string]string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clusterID = clusterID
	if maps.Equal(c.endpoints, endpoints) || len(endpoints) == 0 {
		return
	}
	c.endpoints = endpoints
	c.cli.SetEndpoints(urls(endpoints)...)
}

// ours fails an answer from another cluster than the one set.
func (c *Client) ours(h *etcdserverpb.ResponseHeader) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h == nil || (c.clusterID != "" && ID(h.ClusterId) != c.clusterID) {
		return fmt.Errorf("an endpoint answered for another etcd cluster than %s (a Pod IP now used by another Pod)", c.clusterID)
	}
	return nil
}

func (c *Client) endpoint(name string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ep, ok := c.endpoints[name]
	return ep, ok
}

// Close releases the connection.
func (c *Client) Close() error { return c.cli.Close() }

// ID renders a member ID the way etcdctl does.
func ID(id uint64) string { return strconv.FormatUint(id, 16) }

// ParseID reads a member ID rendered by ID.
func ParseID(s string) (uint64, error) { return strconv.ParseUint(s, 16, 64) }

// leaderCheck bounds the look for a leader before a read through a quorum.
const leaderCheck = 250 * time.Millisecond

// leaderless: every member that answers at the endpoints within leaderCheck knows no
// leader, and one at least answered. A read through a quorum cannot succeed then, and the
// view does not wait for two tries of it to time out: when a majority lost its data, every
// look would take seconds. The first member that knows a leader ends the check.
func (c *Client) leaderless(ctx context.Context) bool {
	c.mu.Lock()
	eps := urls(c.endpoints)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, leaderCheck)
	defer cancel()
	leaders := make(chan int64, len(eps)) // the leader each knows (0: none), -1: no answer
	for _, ep := range eps {
		go func() {
			st, err := c.cli.Status(ctx, ep)
			if err != nil || st.Header == nil || c.ours(st.Header) != nil {
				leaders <- -1
				return
			}
			leaders <- int64(min(st.Leader, 1))
		}()
	}
	answered := false
	for range eps {
		switch <-leaders {
		case 1:
			return false
		case 0:
			answered = true
		}
	}
	return answered
}

// View reads etcd's view: the member list, each member's status, and alarms. The member
// list is read linearizably (through the leader, with a quorum); when that fails, one
// member's own serializable view is returned, marked as such, so the planner can still see
// who the members are but takes no destructive decision on it.
func (c *Client) View(ctx context.Context) (*planner.EtcdView, error) {
	// Two short tries: each goes to the next member, and a member that just joined answers
	// a linearizable read only once it applied the log up to the leader's commit.
	var list *clientv3.MemberListResponse
	err := errors.New("no member knows a leader")
	if !c.leaderless(ctx) {
		for try := 0; try < 2; try++ {
			lctx, cancel := context.WithTimeout(ctx, requestTimeout/3)
			list, err = c.cli.MemberList(lctx)
			cancel()
			if err == nil {
				break
			}
		}
	}
	linearizable := err == nil
	if err != nil {
		sctx, cancel := context.WithTimeout(ctx, requestTimeout)
		list, err = c.cli.MemberList(sctx, clientv3.WithSerializable())
		cancel()
		if err != nil {
			return nil, err
		}
	}
	if err := c.ours(list.Header); err != nil {
		return nil, err
	}
	v := &planner.EtcdView{ClusterID: ID(list.Header.ClusterId), Linearizable: linearizable}
	statuses := make([]*clientv3.StatusResponse, len(list.Members))
	silent := make([]bool, len(list.Members)) // v.Members grows meanwhile: answers go aside
	var wg sync.WaitGroup
	for i, m := range list.Members {
		v.Members = append(v.Members, planner.EtcdMember{ID: ID(m.ID), Name: m.Name, PeerURLs: m.PeerURLs, Learner: m.IsLearner})
		ep, ok := c.endpoint(v.Members[i].MemberName())
		if !ok || !v.Members[i].Started() {
			continue
		}
		// Each member on its own clock: one that does not answer must not make the
		// others look down, nor hold up the look at them.
		wg.Add(1)
		go func(id string) {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, statusTimeout)
			defer cancel()
			if st, err := c.cli.Status(sctx, ep); err == nil && st.Header != nil && ID(st.Header.MemberId) == id &&
				ID(st.Header.ClusterId) == v.ClusterID {
				statuses[i] = st
			} else {
				silent[i] = listening(ctx, ep)
			}
		}(v.Members[i].ID)
	}
	wg.Wait()
	for i, st := range statuses {
		if st != nil {
			setStatus(&v.Members[i], st, v)
		}
		v.Members[i].Silent = silent[i]
	}
	for i := range v.Members {
		if ep, ok := c.endpoint(v.Members[i].MemberName()); ok && v.Members[i].Answering {
			if v.ClusterVersion = clusterVersion(ctx, ep); v.ClusterVersion != "" {
				break
			}
		}
	}
	// etcd reads alarms through raft: each AlarmList is an entry in the log. Asked at
	// every look, they fill the log until etcd compacts it, and from then on every joining
	// member is sent a snapshot (and often waits 7 s to publish itself). A member's status
	// lists the alarms it applied, so the list is read only when one reports any.
	if slices.ContainsFunc(statuses, alarmed) {
		actx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		if alarms, err := c.cli.AlarmList(actx); err == nil {
			for _, a := range alarms.Alarms {
				v.Alarms = append(v.Alarms, planner.Alarm{MemberID: ID(a.MemberID), Type: a.Alarm.String()})
			}
			slices.SortFunc(v.Alarms, planner.Alarm.Compare)
		}
		if slices.ContainsFunc(v.Alarms, func(a planner.Alarm) bool { return a.Type == planner.AlarmNoSpace }) {
			v.HistoryCompacted = c.historyCompacted(actx, statuses)
		}
	}
	return v, nil
}

// historyCompacted: the revision before the current one can no longer be read. Only a
// read through a quorum says so.
func (c *Client) historyCompacted(ctx context.Context, statuses []*clientv3.StatusResponse) bool {
	var rev int64
	for _, st := range statuses {
		if st != nil && st.Header.Revision > rev {
			rev = st.Header.Revision
		}
	}
	if rev <= 1 {
		return true
	}
	_, err := c.cli.Get(ctx, "\x00", clientv3.WithRev(rev-1), clientv3.WithCountOnly())
	return errors.Is(err, rpctypes.ErrCompacted)
}

// Compact compacts the history up to the current revision and waits until the member it
// asked removed it from its database, so that its size shows what defragmentation gains.
func (c *Client) Compact(ctx context.Context) error {
	return c.pinned(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		st, err := cli.Status(ctx, cli.Endpoints()[0])
		if err != nil {
			return err
		}
		_, err = cli.Compact(ctx, st.Header.Revision, clientv3.WithCompactPhysical())
		if errors.Is(err, rpctypes.ErrCompacted) {
			return nil // compacted at this revision or later already
		}
		return err
	})
}

// defragTimeout bounds a defragmentation: it rewrites the whole database file.
const defragTimeout = 5 * time.Minute

// Defragment defragments one member, at its own endpoint, once it answers as the member
// the step names and does not lead a cluster of several voters (a leader that defragments
// stalls every write).
func (c *Client) Defragment(ctx context.Context, name string, id uint64) error {
	ep, ok := c.endpoint(name)
	if !ok {
		return fmt.Errorf("member %s has no address", name)
	}
	ctx, cancel := context.WithTimeout(ctx, defragTimeout)
	defer cancel()
	return through(ctx, ep, func(ctx context.Context, cli *clientv3.Client) error {
		st, err := statusOf(ctx, cli, ep, id)
		switch {
		case err != nil:
			return err
		case st.Leader == id:
			list, err := cli.MemberList(ctx)
			if err != nil {
				return err
			}
			if voters(list.Members) > 1 {
				return fmt.Errorf("%w: member %s leads the cluster", ErrNotYet, name)
			}
		}
		_, err = cli.Defragment(ctx, ep)
		return err
	})
}

// Snapshot streams one member's database from its own endpoint, once it answers as the
// member the caller names. The stream holds its own connection, closed with it.
func (c *Client) Snapshot(ctx context.Context, name string, id uint64) (io.ReadCloser, int64, error) {
	one, _, st, err := c.only(ctx, name, id)
	if err != nil {
		return nil, 0, err
	}
	rc, err := one.cli.Snapshot(ctx)
	if err != nil {
		_ = one.Close()
		return nil, 0, err
	}
	return closeBoth{rc, one}, st.Header.Revision, nil
}

// Contents is what a store held at a revision.
type Contents struct {
	Keys            int64  `json:"keys"`
	HashKV          uint32 `json:"hashKV"`
	CompactRevision int64  `json:"compactRevision"`
}

// contentsTimeout bounds reading a store's contents: etcd hashes its whole history.
const contentsTimeout = time.Minute

// Contents reads what the member of that name and ID held at the revision.
func (c *Client) Contents(ctx context.Context, name string, id uint64, rev int64) (Contents, error) {
	one, ep, _, err := c.only(ctx, name, id)
	if err != nil {
		return Contents{}, err
	}
	defer one.Close()
	return contentsOf(ctx, one.cli, ep, rev)
}

// ContentsAt reads what the etcd at url, of whatever cluster, held at the revision: a
// restore drill's scratch etcd.
func ContentsAt(ctx context.Context, url string, rev int64) (Contents, error) {
	one, err := dial(map[string]string{"scratch": url})
	if err != nil {
		return Contents{}, err
	}
	defer one.Close()
	return contentsOf(ctx, one.cli, url, rev)
}

// contentsOf counts the keys at rev and asks the member at ep for its history's hash.
func contentsOf(ctx context.Context, cli *clientv3.Client, ep string, rev int64) (Contents, error) {
	ctx, cancel := context.WithTimeout(ctx, contentsTimeout)
	defer cancel()
	r, err := cli.Get(ctx, "", clientv3.WithPrefix(), clientv3.WithRev(rev), clientv3.WithCountOnly(), clientv3.WithSerializable())
	if err != nil {
		return Contents{}, fmt.Errorf("counting the keys at revision %d: %w", rev, err)
	}
	h, err := cli.HashKV(ctx, ep, rev)
	if err != nil {
		return Contents{}, fmt.Errorf("hashing the history up to revision %d: %w", rev, err)
	}
	return Contents{Keys: r.Count, HashKV: h.Hash, CompactRevision: h.CompactRevision}, nil
}

// only connects to the member of that name and ID alone, once it proved to be that member
// of this cluster.
func (c *Client) only(ctx context.Context, name string, id uint64) (*Client, string, *clientv3.StatusResponse, error) {
	ep, ok := c.endpoint(name)
	if !ok {
		return nil, "", nil, fmt.Errorf("member %s has no address", name)
	}
	one, err := dial(map[string]string{name: ep})
	if err != nil {
		return nil, "", nil, err
	}
	st, err := statusOf(ctx, one.cli, ep, id)
	if err == nil {
		err = c.ours(st.Header)
	}
	if err != nil {
		_ = one.Close()
		return nil, "", nil, err
	}
	return one, ep, st, nil
}

// statusOf asks the member at ep for its status, and checks that it is the member of that
// ID: a Pod IP may belong to another member by now.
func statusOf(ctx context.Context, cli *clientv3.Client, ep string, id uint64) (*clientv3.StatusResponse, error) {
	sctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	st, err := cli.Status(sctx, ep)
	if err != nil {
		return nil, err
	}
	if st.Header.MemberId != id {
		return nil, fmt.Errorf("the member at %s is %s, not %s", ep, ID(st.Header.MemberId), ID(id))
	}
	return st, nil
}

// closeBoth is a stream that closes its connection with it.
type closeBoth struct {
	io.ReadCloser
	conn io.Closer
}

func (c closeBoth) Close() error { return errors.Join(c.ReadCloser.Close(), c.conn.Close()) }

func voters(members []*etcdserverpb.Member) int {
	n := 0
	for _, m := range members {
		if !m.IsLearner {
			n++
		}
	}
	return n
}

// DisarmNoSpace clears a member's NOSPACE alarm.
func (c *Client) DisarmNoSpace(ctx context.Context, id uint64) error {
	return c.pinned(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: id, Alarm: etcdserverpb.AlarmType_NOSPACE})
		return err
	})
}

// alarmed: a member's status lists an error other than having no leader, which etcd does
// for each alarm it has applied.
func alarmed(st *clientv3.StatusResponse) bool {
	return st != nil && slices.ContainsFunc(st.Errors, func(e string) bool { return e != rpctypes.ErrNoLeader.Error() })
}

// listening reports whether something accepts connections at the endpoint: a process that
// exited or a Pod that is gone refuses them (or cannot be reached).
func listening(ctx context.Context, endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil {
		return false
	}
	d := net.Dialer{Timeout: statusTimeout / 4}
	conn, err := d.DialContext(ctx, "tcp", u.Host)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}

// setStatus records a member's own answer as facts: it answers, the leader it knows, its
// version, raft index and term. Errors in the answer (etcd lists every active alarm there) are
// not a verdict on the member: alarms are read on their own.
func setStatus(em *planner.EtcdMember, st *clientv3.StatusResponse, v *planner.EtcdView) {
	em.Answering = true
	if st.Leader != 0 {
		em.Leader = ID(st.Leader)
	}
	em.Version, em.RaftIndex, em.RaftTerm = st.Version, st.RaftIndex, st.RaftTerm
	em.DBSize, em.DBInUse, em.Quota = st.DbSize, st.DbSizeInUse, st.DbSizeQuota
	// The leader's own word wins: a follower may not have heard of a new leader yet.
	if st.Leader != 0 && (v.LeaderID == "" || st.Header.MemberId == st.Leader) {
		v.LeaderID = ID(st.Leader)
	}
}

// AddLearner adds a learner with the peer URL, unless a member already has it (the step
// may be retried after the operator stopped midway).
func (c *Client) AddLearner(ctx context.Context, peerURL string) (uint64, error) {
	var id uint64
	err := c.pinned(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		list, err := cli.MemberList(ctx)
		if err != nil {
			return err
		}
		for _, m := range list.Members {
			if slices.Contains(m.PeerURLs, peerURL) {
				id = m.ID
				return nil
			}
		}
		resp, err := cli.MemberAddAsLearner(ctx, []string{peerURL})
		if err == nil {
			id = resp.Member.ID
		}
		return notYet(err)
	})
	return id, err
}

// ErrNotYet is etcd refusing a membership change for now by its own rules, which a moment
// later may allow it: a learner's log not within a tenth of the leader's, too few started
// voters, or a leader not connected to every voter for the last 5 seconds (etcd's strict
// reconfiguration check). It is a wait, not a failure.
var ErrNotYet = errors.New("etcd does not allow the change yet")

// notYet wraps etcd's refusals for now in ErrNotYet.
func notYet(err error) error {
	for _, e := range []error{rpctypes.ErrMemberLearnerNotReady, rpctypes.ErrMemberNotEnoughStarted, rpctypes.ErrUnhealthy} {
		if errors.Is(err, e) {
			return fmt.Errorf("%w: %v", ErrNotYet, err)
		}
	}
	return err
}

// Promote makes a learner a voter; promoting a voter is a no-op. etcd itself decides
// whether the learner caught up: it is asked again every promoteEvery for up to promoteFor
// (a started learner catches up within moments, and is promoted the moment etcd allows),
// then a refusal is ErrNotYet.
func (c *Client) Promote(ctx context.Context, id uint64) error {
	return c.pinned(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		until := time.Now().Add(promoteFor)
		for {
			_, err := cli.MemberPromote(ctx, id)
			switch {
			case errors.Is(err, rpctypes.ErrMemberNotLearner):
				return nil
			case !errors.Is(err, rpctypes.ErrMemberLearnerNotReady) || time.Now().After(until):
				return notYet(err)
			}
			select {
			case <-ctx.Done():
				return notYet(err)
			case <-time.After(promoteEvery):
			}
		}
	})
}

// Remove removes a member; removing one that is gone is a no-op.
func (c *Client) Remove(ctx context.Context, id uint64) error {
	return c.pinned(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.MemberRemove(ctx, id)
		if errors.Is(err, rpctypes.ErrMemberNotFound) {
			return nil
		}
		return notYet(err)
	})
}

// pinned runs a membership change through one endpoint that has just answered as a voter
// of this cluster (the leader when it answers), so the change cannot land on another
// cluster at a reused Pod IP, nor on a learner, which refuses membership changes.
func (c *Client) pinned(ctx context.Context, f func(context.Context, *clientv3.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, 2*requestTimeout)
	defer cancel()
	ep, _, err := c.voter(ctx)
	if err != nil {
		return err
	}
	return through(ctx, ep, f)
}

// voter finds the endpoint of a voter of this cluster, the leader when it answers, with its
// status. Every endpoint is asked at once, each on its own short clock, and the leader's
// answer ends the wait: one that does not answer (a member still starting) must not hold up
// the change.
func (c *Client) voter(ctx context.Context) (string, *clientv3.StatusResponse, error) {
	c.mu.Lock()
	eps, known := urls(c.endpoints), c.clusterID != ""
	c.mu.Unlock()
	if !known {
		return "", nil, errors.New("the cluster's ID is not known yet: no membership change before it first answers")
	}
	type answer struct {
		ep string
		st *clientv3.StatusResponse
	}
	answers := make(chan answer, len(eps))
	for _, ep := range eps {
		go func() {
			sctx, cancel := context.WithTimeout(ctx, requestTimeout/3)
			defer cancel()
			st, err := c.cli.Status(sctx, ep)
			if err != nil || c.ours(st.Header) != nil || st.IsLearner {
				st = nil
			}
			answers <- answer{ep, st}
		}()
	}
	var pick *answer
	for range eps {
		a := <-answers
		switch {
		case a.st == nil:
		case a.st.Leader == a.st.Header.MemberId:
			return a.ep, a.st, nil
		case pick == nil || a.ep < pick.ep:
			pick = &a
		}
	}
	if pick == nil {
		return "", nil, errors.New("no voter of this cluster answers")
	}
	return pick.ep, pick.st, nil
}

// through calls f with a connection to the one endpoint ep.
func through(ctx context.Context, ep string, f func(context.Context, *clientv3.Client) error) error {
	one, err := dial(map[string]string{"": ep})
	if err != nil {
		return err
	}
	defer one.Close()
	return f(ctx, one.cli)
}

// MoveLeader asks the leader, at its own endpoint, to hand leadership to the target. It
// acts only when the member it reaches is the leader it was told of.
func (c *Client) MoveLeader(ctx context.Context, leader, target uint64) error {
	ctx, cancel := context.WithTimeout(ctx, 2*requestTimeout)
	defer cancel()
	ep, st, err := c.voter(ctx)
	if err != nil {
		return err
	}
	if st.Header.MemberId != leader || st.Leader != leader {
		return fmt.Errorf("member %s no longer leads", ID(leader))
	}
	return through(ctx, ep, func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.MoveLeader(ctx, target)
		return err
	})
}

// clusterVersion asks a member for the version the cluster runs at (the lowest its members
// support, major.minor.0). The gRPC API does not tell it; the /version endpoint does. It is
// "" when the member does not answer.
func clusterVersion(ctx context.Context, endpoint string) string {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, endpoint+"/version", nil)
	if err != nil {
		return ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var v struct {
		Cluster string `json:"etcdcluster"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&v) != nil {
		return ""
	}
	return v.Cluster
}
