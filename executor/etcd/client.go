// Package etcd talks to an etcd cluster for the executor: it reads the cluster's view of
// itself and makes the membership changes plans call for, each one idempotent.
package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"sort"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"

	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/planner"
)

// requestTimeout bounds each call: members are on the same network, a slow answer is a
// sick member.
const requestTimeout = 3 * time.Second

// statusTimeout bounds a member's status answer in a view. A member that does not answer
// in time but accepts connections is silent, not down: nothing counts on it being down.
const statusTimeout = time.Second

// silentTimeout bounds the status answer of a member that was silent at the last look. The
// usual silent member is one that waits etcd's 7 s to publish itself (it serves raft, and no
// client before that): at a full statusTimeout every look would wait a second on it. Its
// answer once it publishes takes milliseconds; a member that stays silent is seen silent
// either way, and nothing counts on a silent member being down.
const silentTimeout = 250 * time.Millisecond

// Cluster is what the executor asks of an etcd cluster. Client implements it against real
// members; tests use a fake.
type Cluster interface {
	// View reads etcd's view of itself; it fails when no member answers.
	View(ctx context.Context) (*planner.EtcdView, error)
	// LocalView is View as the member that answers first holds it, never read through a
	// quorum (Linearizable false); it fails when no member answers.
	LocalView(ctx context.Context) (*planner.EtcdView, error)
	// AddLearner adds a learner with the peer URL, unless a member already has it.
	AddLearner(ctx context.Context, peerURL string) (uint64, error)
	// Promote makes a learner a voter, once etcd finds it caught up (ErrNotYet until then).
	Promote(ctx context.Context, id uint64) error
	// Remove removes a member.
	Remove(ctx context.Context, id uint64) error
	// UpdatePeerURL sets a member's one peer URL.
	UpdatePeerURL(ctx context.Context, id uint64, peerURL string) error
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
	// EnableAuth switches etcd's authentication on with the users in a (see Auth.Enable).
	EnableAuth(ctx context.Context, a Auth) error
	// DisableAuth switches etcd's authentication off.
	DisableAuth(ctx context.Context) error
	// SyncUsers makes each user with the role of its name holding exactly its permissions,
	// and deletes the users (and roles) named in gone.
	SyncUsers(ctx context.Context, users []User, gone []string) error
	// AuthEnabled reports whether etcd's authentication is on.
	AuthEnabled(ctx context.Context) (bool, error)
	// AdoptUsers makes users with the root role in a cluster whose auth is on, as the user
	// given by password (see Client.AdoptUsers).
	AdoptUsers(ctx context.Context, users []string, as, password string) error
	// ActivePeers reads, for each member named (name -> member ID), the IDs of the members
	// etcd counts as its active peers (see Client.ActivePeers).
	ActivePeers(ctx context.Context, members map[string]string) map[string][]string
	// SetCluster points the connection at the members' current endpoints (name -> URL), and
	// sets the cluster ID every answer must carry ("" until the cluster first answered).
	SetCluster(clusterID string, endpoints map[string]string)
	// SetStopping says how many members' Pods are going while their etcd may still run:
	// they have no endpoint, but may still confirm a read through a quorum.
	SetStopping(n int)
	Close() error
}

// Client is a connection to a cluster through the client endpoints of its members. Members
// are reached at Pod IPs, and a Pod IP can be another cluster's member a moment after its Pod
// went: every answer is checked for the cluster's ID, and membership changes go through one
// endpoint that has just proved to be a member of this cluster.
type Client struct {
	cli       *clientv3.Client
	tls       *tls.Config // nil for plain text
	mu        sync.Mutex
	endpoints map[string]string // member name -> client endpoint
	clusterID string
	// silent holds the endpoints of members that were silent at the last look, by member ID:
	// their next status is asked on a short clock (silentTimeout).
	silent map[string]string
	// stopping is how many members' Pods are going while their etcd may still run; -1
	// until SetStopping says.
	stopping int
}

var _ Cluster = (*Client)(nil)

// DialFunc connects to member endpoints (name -> URL); Dial outside tests.
type DialFunc func(endpoints map[string]string, tlsCfg *tls.Config) (Cluster, error)

// Dial connects to the given member endpoints (name -> URL), with TLS when tlsCfg is set
// and the endpoints are https (while TLS is switched on they are http, and tlsCfg is not
// used). It does not wait for a connection: calls fail fast when nobody answers.
func Dial(endpoints map[string]string, tlsCfg *tls.Config) (Cluster, error) {
	return dial(endpoints, tlsCfg)
}

func dial(endpoints map[string]string, tlsCfg *tls.Config) (*Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("no member endpoints")
	}
	if !vocab.TLSURL(urls(endpoints)[0]) {
		tlsCfg = nil
	}
	// gRPC waits a second before reconnecting by default; a member starts in a few
	// hundred milliseconds, and calls made meanwhile wait on that reconnect.
	opts := []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
		MinConnectTimeout: 2 * time.Second,
	})}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            urls(endpoints),
		TLS:                  tlsCfg,
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		DialOptions:          append(opts, ServerName(tlsCfg)...),
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, err
	}
	return &Client{cli: cli, tls: tlsCfg, endpoints: endpoints, stopping: -1}, nil
}

// ServerName is the dial option that checks every member's certificate for tlsCfg's
// ServerName. Members are dialed at Pod IPs, and gRPC checks a certificate for the host it
// dials unless the connection's authority is set; none for plain text.
func ServerName(tlsCfg *tls.Config) []grpc.DialOption {
	if tlsCfg == nil || tlsCfg.ServerName == "" {
		return nil
	}
	return []grpc.DialOption{grpc.WithAuthority(tlsCfg.ServerName)}
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

// SetStopping says how many members' Pods are going while their etcd may still run.
func (c *Client) SetStopping(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.stopping = n
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

// pinned runs a membership change through one endpoint that has just answered as a voter
// of this cluster (the leader when it answers), so the change cannot land on another
// cluster at a reused Pod IP, nor on a learner, which refuses membership changes.
func (c *Client) pinned(ctx context.Context, f func(context.Context, *clientv3.Client) error) error {
	return c.viaVoter(ctx, false, f)
}

// atLeader runs a call through the leader alone, once it answered as the leader of this
// cluster.
func (c *Client) atLeader(ctx context.Context, f func(context.Context, *clientv3.Client) error) error {
	return c.viaVoter(ctx, true, f)
}

// viaVoter runs f through the endpoint voter finds, which must be the leader's when
// leader is set.
func (c *Client) viaVoter(ctx context.Context, leader bool, f func(context.Context, *clientv3.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, 2*requestTimeout)
	defer cancel()
	ep, st, err := c.voter(ctx)
	if err != nil {
		return err
	}
	if leader && st.Leader != st.Header.MemberId {
		return fmt.Errorf("%w: the leader does not answer", ErrNotYet)
	}
	return c.through(ctx, ep, f)
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
func (c *Client) through(ctx context.Context, ep string, f func(context.Context, *clientv3.Client) error) error {
	one, err := dial(map[string]string{"": ep}, c.tls)
	if err != nil {
		return err
	}
	defer one.Close()
	return f(ctx, one.cli)
}
