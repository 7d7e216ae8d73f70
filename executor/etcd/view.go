package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdplan/etcdplan/planner"
)

// leaderCheck bounds the look for a leader before a read through a quorum.
const leaderCheck = 250 * time.Millisecond

// unreachedLeaderRead bounds a read through a quorum when the look found one member alone
// answering (readTimeout).
const unreachedLeaderRead = 300 * time.Millisecond

// look asks every endpoint for its status at once, each for up to leaderCheck, and returns
// the endpoints that answered for this cluster, the first first, how many it asked,
// whether one of them knows a leader, and whether that leader answered itself. It ends as
// soon as one that knows a leader and another have answered: enough for two tries of a
// read through a quorum.
func (c *Client) look(ctx context.Context) (answered []string, asked int, leader, leaderAnswered bool) {
	c.mu.Lock()
	eps := urls(c.endpoints)
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, leaderCheck)
	defer cancel()
	type answer struct {
		ep             string
		leader, isLead bool
		ok             bool
	}
	answers := make(chan answer, len(eps))
	for _, ep := range eps {
		go func() {
			st, err := c.cli.Status(ctx, ep)
			ok := err == nil && st.Header != nil && c.ours(st.Header) == nil
			answers <- answer{ep, ok && st.Leader != 0, ok && st.Leader != 0 && st.Leader == st.Header.MemberId, ok}
		}()
	}
	for range eps {
		a := <-answers
		if a.ok {
			answered = append(answered, a.ep)
		}
		leader, leaderAnswered = leader || a.leader, leaderAnswered || a.isLead
		if leader && len(answered) > 1 {
			break
		}
	}
	return answered, len(eps), leader, leaderAnswered
}

// View reads etcd's view: the member list, each member's status, and alarms. The member
// list is read linearizably (through the leader, with a quorum); when that fails, one
// member's own serializable view is returned, marked as such, so the planner can still see
// who the members are but takes no destructive decision on it.
func (c *Client) View(ctx context.Context) (*planner.EtcdView, error) {
	list, linearizable, err := c.memberList(ctx)
	if err != nil {
		return nil, err
	}
	return c.view(ctx, list, linearizable), nil
}

// LocalView is View without the read through a quorum: the member list of the member that
// answers first, serializable. Naming a member to snapshot needs no more, and decides
// nothing on membership; while the quorum goes, the read would wait out its clock.
func (c *Client) LocalView(ctx context.Context) (*planner.EtcdView, error) {
	answered, _, _, _ := c.look(ctx)
	list, err := c.localList(ctx, answered)
	if err != nil {
		return nil, err
	}
	if err := c.ours(list.Header); err != nil {
		return nil, err
	}
	return c.view(ctx, list, false), nil
}

// view is etcd's view from a member list: the members' statuses, and alarms.
func (c *Client) view(ctx context.Context, list *clientv3.MemberListResponse, linearizable bool) *planner.EtcdView {
	v := &planner.EtcdView{ClusterID: ID(list.Header.ClusterId), Linearizable: linearizable}
	for _, m := range list.Members {
		v.Members = append(v.Members, planner.EtcdMember{ID: ID(m.ID), Name: m.Name, PeerURLs: m.PeerURLs, ClientURLs: m.ClientURLs, Learner: m.IsLearner})
	}
	statuses := c.statuses(ctx, v)
	v.ClusterVersion = c.clusterVersion(ctx, v)
	c.alarms(ctx, v, statuses)
	return v
}

// memberList reads the member list through a quorum, or else one member's own serializable
// list (linearizable false). It first looks at the members' statuses: when every member
// that answers knows no leader (one that lost its quorum steps down within an election
// timeout), no read through a quorum can succeed and none is waited for. Otherwise up to
// two short tries run at once, each to the next member: a member that just joined answers
// a linearizable read only once it applied the log up to the leader's commit, and a read
// the quorum cannot confirm takes its whole clock. While a quorum goes, one clock is all a
// look waits, not one per try.
func (c *Client) memberList(ctx context.Context) (*clientv3.MemberListResponse, bool, error) {
	var list *clientv3.MemberListResponse
	err := errors.New("no member knows a leader")
	answered, asked, leader, leaderAnswered := c.look(ctx)
	// A member that answers alone says first how many voters it has: a leader alone with
	// others to confirm its reads gets the short clock, and no read is asked that too few
	// members run to confirm (mayConfirm).
	var own *clientv3.MemberListResponse
	var owned chan *clientv3.MemberListResponse
	switch {
	case len(answered) == 1 && leader:
		own, _ = c.localList(ctx, answered)
	case len(answered) == 0:
		// No member answered: they are down, or starting (a new cluster's members answer
		// nothing before they elect a leader). The read and a member's own list run at once,
		// both on the short clock; failing both, the next look asks again.
		owned = make(chan *clientv3.MemberListResponse, 1)
		go func() {
			l, _ := c.ownList(ctx, unreachedLeaderRead)
			owned <- l
		}()
	}
	if (leader || len(answered) == 0) && c.mayConfirm(asked, own) {
		list, err = c.readMembers(ctx, min(max(len(answered), 1), 2), readTimeout(answered, max(asked, votersOf(own)), leaderAnswered))
	}
	if owned != nil {
		if own = <-owned; err != nil && own == nil {
			return nil, false, err
		}
	}
	linearizable := err == nil
	if err != nil && own != nil {
		list, err = own, nil
	} else if err != nil {
		if list, err = c.localList(ctx, answered); err != nil {
			return nil, false, err
		}
	}
	if err := c.ours(list.Header); err != nil {
		return nil, false, err
	}
	return list, linearizable, nil
}

// mayConfirm: the members that may run etcd, those asked and those whose Pods are going
// (SetStopping), are at least a quorum of the voters a member's own list names (or either
// is unknown). Fewer can confirm no read through a quorum: one asked would wait out its
// clock. Right after a quorum's Pods went, the leader they left leads on until its check
// of the quorum fails, and each look waited 300 ms for a read it could not get.
func (c *Client) mayConfirm(asked int, own *clientv3.MemberListResponse) bool {
	c.mu.Lock()
	stopping := c.stopping
	c.mu.Unlock()
	n := votersOf(own)
	return stopping < 0 || n == 0 || asked+stopping >= n/2+1
}

// votersOf counts the voters of a member list; 0 for none.
func votersOf(list *clientv3.MemberListResponse) int {
	if list == nil {
		return 0
	}
	return voters(list.Members)
}

// ownList is the serializable member list of an endpoint the client reaches (its one
// endpoint, when it has one), within clock.
func (c *Client) ownList(ctx context.Context, clock time.Duration) (*clientv3.MemberListResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, clock)
	defer cancel()
	return c.cli.MemberList(ctx, clientv3.WithSerializable())
}

// readMembers reads the member list through a quorum, tries times at once (the client
// sends each to the next member), within clock: the first answer wins.
func (c *Client) readMembers(ctx context.Context, tries int, clock time.Duration) (*clientv3.MemberListResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, clock)
	defer cancel()
	type result struct {
		list *clientv3.MemberListResponse
		err  error
	}
	results := make(chan result, tries)
	for range tries {
		go func() {
			list, err := c.cli.MemberList(ctx)
			results <- result{list, err}
		}()
	}
	var err error
	for range tries {
		r := <-results
		if r.err == nil {
			return r.list, nil
		}
		err = r.err
	}
	return nil, err
}

// readTimeout bounds a read through a quorum, asked of a cluster of members (as far as
// the look knows: endpoints asked, or voters listed). When one member alone answered, the
// read must pass through a leader that either the look could not reach or that reaches no
// quorum the look could see: most often a leader that just lost its Pod (the member still
// names it until its election timeout ends, up to two seconds), or a leader whose peers
// just lost theirs (it leads until its check of the quorum fails, an election timeout
// later). Either way the read waits for what cannot come. A leader with a quorum answers
// in a heartbeat's round trip, so the read gets a short clock; failing, the view is one
// member's, on which nothing destructive is decided. The leader of a cluster of one gets
// the full clock. When no member answered at all, they are down or starting: the members
// of a new cluster (a restore's seeds) answer nothing before they elect a leader, and a
// read waiting a full clock would leave the operator blind to the leader they elect
// meanwhile; the next look, which the poll or a Pod event brings, reads again.
func readTimeout(answered []string, members int, leaderAnswered bool) time.Duration {
	if len(answered) == 0 || len(answered) == 1 && (!leaderAnswered || members > 1) {
		return unreachedLeaderRead
	}
	return requestTimeout / 3
}

// localList reads one member's own member list, serializable: first from the member that
// answered its status first, on a short clock (any endpoint may be a member still
// stopping, which holds a call for long), else from any endpoint, on the same clock when
// some member answered the look (the others are likely stopping too), else on a full one.
func (c *Client) localList(ctx context.Context, answered []string) (*clientv3.MemberListResponse, error) {
	var list *clientv3.MemberListResponse
	if len(answered) > 0 {
		sctx, cancel := context.WithTimeout(ctx, statusTimeout)
		err := c.through(sctx, answered[0], func(ctx context.Context, cli *clientv3.Client) (err error) {
			list, err = cli.MemberList(ctx, clientv3.WithSerializable())
			return err
		})
		cancel()
		if err == nil {
			return list, nil
		}
	}
	clock := requestTimeout
	if len(answered) > 0 {
		clock = statusTimeout
	}
	return c.ownList(ctx, clock)
}

// statuses asks every started member with an endpoint for its status and records the
// answers in v; it returns them by member (nil: no answer). Each member on its own clock: one
// that does not answer must not make the others look down, nor hold up the look at them.
func (c *Client) statuses(ctx context.Context, v *planner.EtcdView) []*clientv3.StatusResponse {
	statuses := make([]*clientv3.StatusResponse, len(v.Members))
	silent := make([]bool, len(v.Members))
	var wg sync.WaitGroup
	for i, m := range v.Members {
		ep, ok := c.endpoint(m.MemberName())
		if !ok || !m.Started() {
			continue
		}
		wg.Go(func() { statuses[i], silent[i] = c.memberStatus(ctx, ep, m.ID, v.ClusterID) })
	}
	wg.Wait()
	now := map[string]string{}
	for i, st := range statuses {
		if st != nil {
			setStatus(&v.Members[i], st, v)
		}
		v.Members[i].Silent = silent[i]
		if silent[i] {
			now[v.Members[i].ID], _ = c.endpoint(v.Members[i].MemberName())
		}
	}
	c.mu.Lock()
	c.silent = now
	c.mu.Unlock()
	return statuses
}

// statusClock bounds the status answer of the member of that ID at ep: the short clock
// when it was silent there at the last look.
func (c *Client) statusClock(id, ep string) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.silent[id] == ep {
		return silentTimeout
	}
	return statusTimeout
}

// memberStatus asks the member of that ID at ep for its status, as a member of that
// cluster: nil and whether something accepts connections there when it does not answer.
// A member silent at the last look, at the same endpoint, is asked on the short clock.
func (c *Client) memberStatus(ctx context.Context, ep, id, clusterID string) (*clientv3.StatusResponse, bool) {
	sctx, cancel := context.WithTimeout(ctx, c.statusClock(id, ep))
	defer cancel()
	st, err := c.cli.Status(sctx, ep)
	if err == nil && st.Header != nil && ID(st.Header.MemberId) == id && ID(st.Header.ClusterId) == clusterID {
		return st, false
	}
	return nil, listening(ctx, ep)
}

// clusterVersion is the cluster version the first answering member tells, or "".
func (c *Client) clusterVersion(ctx context.Context, v *planner.EtcdView) string {
	for _, m := range v.Members {
		if ep, ok := c.endpoint(m.MemberName()); ok && m.Answering {
			if cv := clusterVersionAt(ctx, ep); cv != "" {
				return cv
			}
		}
	}
	return ""
}

// alarms reads the cluster's alarms into v, and whether a NOSPACE cluster's history is
// compacted. etcd reads alarms through raft: each AlarmList is an entry in the log. Asked at
// every look, they fill the log until etcd compacts it, and from then on every joining
// member is sent a snapshot (and often waits 7 s to publish itself). A member's status
// lists the alarms it applied, so the list is read only when one reports any.
func (c *Client) alarms(ctx context.Context, v *planner.EtcdView, statuses []*clientv3.StatusResponse) {
	if !slices.ContainsFunc(statuses, alarmed) {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if alarms, err := c.cli.AlarmList(ctx); err == nil {
		for _, a := range alarms.Alarms {
			v.Alarms = append(v.Alarms, planner.Alarm{MemberID: ID(a.MemberID), Type: a.Alarm.String()})
		}
		slices.SortFunc(v.Alarms, planner.Alarm.Compare)
	}
	if slices.ContainsFunc(v.Alarms, func(a planner.Alarm) bool { return a.Type == planner.AlarmNoSpace }) {
		v.HistoryCompacted = c.historyCompacted(ctx, statuses)
	}
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

// clusterVersionAt asks a member for the version the cluster runs at (the lowest its members
// support, major.minor.0). The gRPC API does not tell it; the /version endpoint does. It is
// "" when the member does not answer.
func clusterVersionAt(ctx context.Context, endpoint string) string {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout) // as a status: a member answers at once, or is stopping
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
