// Package etcd talks to an etcd cluster for the executor: it reads the cluster's view of
// itself and makes the membership changes plans call for, each one idempotent.
package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcdplan/etcdplan/planner"
)

// requestTimeout bounds each call: members are on the same network, a slow answer is a
// sick member.
const requestTimeout = 3 * time.Second

// Client is a connection to a cluster through the client endpoints of its members.
type Client struct {
	cli       *clientv3.Client
	endpoints map[string]string // member name -> client endpoint
}

// Dial connects to the given member endpoints (name -> URL). It does not wait for a
// connection: calls fail fast when nobody answers.
func Dial(endpoints map[string]string) (*Client, error) {
	if len(endpoints) == 0 {
		return nil, errors.New("no member endpoints")
	}
	eps := make([]string, 0, len(endpoints))
	for _, ep := range endpoints {
		eps = append(eps, ep)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            eps,
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    5 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return nil, err
	}
	return &Client{cli: cli, endpoints: endpoints}, nil
}

// Close releases the connection.
func (c *Client) Close() error { return c.cli.Close() }

// ID renders a member ID the way etcdctl does.
func ID(id uint64) string { return strconv.FormatUint(id, 16) }

// ParseID reads a member ID rendered by ID.
func ParseID(s string) (uint64, error) { return strconv.ParseUint(s, 16, 64) }

// View reads etcd's view: the member list, each member's status, and alarms. It returns
// nil when no member answers.
func (c *Client) View(ctx context.Context) (*planner.EtcdView, error) {
	lctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	// Serializable: a member without quorum still tells who it thinks the members are.
	list, err := c.cli.MemberList(lctx, clientv3.WithSerializable())
	if err != nil {
		return nil, err
	}
	v := &planner.EtcdView{ClusterID: ID(list.Header.ClusterId)}
	statuses := make([]*clientv3.StatusResponse, len(list.Members))
	var wg sync.WaitGroup
	for i, m := range list.Members {
		v.Members = append(v.Members, planner.EtcdMember{ID: ID(m.ID), Name: m.Name, PeerURLs: m.PeerURLs, Learner: m.IsLearner})
		ep, ok := c.endpoints[v.Members[i].MemberName()]
		if !ok || !v.Members[i].Started() {
			continue
		}
		// Each member on its own clock: one that does not answer must not make the
		// others look unhealthy.
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(ctx, requestTimeout)
			defer cancel()
			if st, err := c.cli.Status(sctx, ep); err == nil {
				statuses[i] = st
			}
		}()
	}
	wg.Wait()
	for i, st := range statuses {
		if st != nil {
			setStatus(&v.Members[i], st, v)
		}
	}
	for i := range v.Members {
		if v.Members[i].Healthy {
			v.ClusterVersion = clusterVersion(ctx, c.endpoints[v.Members[i].MemberName()])
			break
		}
	}
	actx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if alarms, err := c.cli.AlarmList(actx); err == nil {
		for _, a := range alarms.Alarms {
			v.Alarms = append(v.Alarms, planner.Alarm{MemberID: ID(a.MemberID), Type: a.Alarm.String()})
		}
	}
	return v, nil
}

// setStatus fills a member's health from its own answer. A member is healthy when it
// answers, reports no errors and knows a leader.
func setStatus(em *planner.EtcdMember, st *clientv3.StatusResponse, v *planner.EtcdView) {
	em.Healthy = len(st.Errors) == 0 && st.Leader != 0
	em.Version, em.RaftIndex, em.DBSize, em.DBInUse = st.Version, st.RaftIndex, st.DbSize, st.DbSizeInUse
	// The leader's own word wins: a follower may not have heard of a new leader yet.
	if st.Leader != 0 && (v.LeaderID == "" || st.Header.MemberId == st.Leader) {
		v.LeaderID = ID(st.Leader)
	}
}

// AddLearner adds a learner with the peer URL, unless a member already has it (the step
// may be retried after the operator stopped midway).
func (c *Client) AddLearner(ctx context.Context, peerURL string) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if id, ok, err := c.findPeer(ctx, peerURL); err != nil || ok {
		return id, err
	}
	resp, err := c.cli.MemberAddAsLearner(ctx, []string{peerURL})
	if err != nil {
		return 0, err
	}
	return resp.Member.ID, nil
}

func (c *Client) findPeer(ctx context.Context, peerURL string) (uint64, bool, error) {
	list, err := c.cli.MemberList(ctx)
	if err != nil {
		return 0, false, err
	}
	for _, m := range list.Members {
		for _, u := range m.PeerURLs {
			if u == peerURL {
				return m.ID, true, nil
			}
		}
	}
	return 0, false, nil
}

// Promote makes a learner a voter; promoting a voter is a no-op.
func (c *Client) Promote(ctx context.Context, id uint64) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	_, err := c.cli.MemberPromote(ctx, id)
	if errors.Is(err, rpctypes.ErrMemberNotLearner) {
		return nil
	}
	return err
}

// Remove removes a member; removing one that is gone is a no-op.
func (c *Client) Remove(ctx context.Context, id uint64) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	_, err := c.cli.MemberRemove(ctx, id)
	if errors.Is(err, rpctypes.ErrMemberNotFound) {
		return nil
	}
	return err
}

// MoveLeader asks the leader, at its own endpoint, to hand leadership to the target.
func (c *Client) MoveLeader(ctx context.Context, leaderName string, target uint64) error {
	ep, ok := c.endpoints[leaderName]
	if !ok {
		return fmt.Errorf("no endpoint for leader %s", leaderName)
	}
	leader, err := Dial(map[string]string{leaderName: ep})
	if err != nil {
		return err
	}
	defer leader.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*requestTimeout)
	defer cancel()
	_, err = leader.cli.MoveLeader(ctx, target)
	return err
}

// Endpoint returns the client endpoint of a member, if known.
func (c *Client) Endpoint(name string) (string, bool) {
	ep, ok := c.endpoints[name]
	return ep, ok
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
