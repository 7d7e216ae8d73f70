package etcd

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"

	"github.com/etcdplan/etcdplan/planner"
)

// A member that waits to publish itself accepts connections on its client port and answers
// nothing. The first look waits its status timeout and sees it silent; the next looks see it
// silent on the short clock, until it answers or moves to another endpoint.
func TestSilentMemberIsAskedOnTheShortClockAfterwards(t *testing.T) {
	hung, err := net.Listen("tcp", "127.0.0.1:0") // accepts (the kernel does), never answers
	require.NoError(t, err)
	defer hung.Close()
	ep := "http://" + hung.Addr().String()
	c, err := dial(map[string]string{"demo-0": ep}, nil)
	require.NoError(t, err)
	defer c.Close()
	view := func() *planner.EtcdView {
		return &planner.EtcdView{ClusterID: "1", Members: []planner.EtcdMember{{ID: "a", Name: "demo-0"}}}
	}
	look := func() (time.Duration, *planner.EtcdView) {
		v, start := view(), time.Now()
		c.statuses(context.Background(), v)
		return time.Since(start), v
	}

	took, v := look()
	require.True(t, v.Members[0].Silent)
	require.False(t, v.Members[0].Answering)
	require.GreaterOrEqual(t, took, statusTimeout)

	for range 2 {
		require.Equal(t, silentTimeout, c.statusClock("a", ep), "asked on the short clock")
		_, v = look()
		require.True(t, v.Members[0].Silent, "still silent")
	}

	again := "http://" + hungAgain(t)
	c.SetCluster("", map[string]string{"demo-0": again})
	require.Equal(t, statusTimeout, c.statusClock("a", again), "a member at a new endpoint is asked on the full clock")
	took, v = look()
	require.True(t, v.Members[0].Silent)
	require.GreaterOrEqual(t, took, statusTimeout)
}

// hungAgain is the address of another listener that never answers, open until the test ends.
func hungAgain(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l.Addr().String()
}

// oneMember answers as one member of cluster 1 whose status names leader: the leader's own
// answer when leader is the member itself. A read through a quorum waits until its
// caller gives up, as one does while the leader it must pass through is gone.
type oneMember struct {
	etcdserverpb.UnimplementedMaintenanceServer
	etcdserverpb.UnimplementedClusterServer
	leader uint64
	peers  int          // voters its own list names besides itself, at no endpoint
	clock  atomic.Int64 // the deadline the read through a quorum came with, from its start
	// starting: its status answers nothing, as a new cluster's member before its leader is
	// elected; own is the deadline its serializable list came with.
	starting bool
	own      atomic.Int64
}

func (m *oneMember) header() *etcdserverpb.ResponseHeader {
	return &etcdserverpb.ResponseHeader{ClusterId: 1, MemberId: 2}
}

func (m *oneMember) Status(ctx context.Context, _ *etcdserverpb.StatusRequest) (*etcdserverpb.StatusResponse, error) {
	if m.starting {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &etcdserverpb.StatusResponse{Header: m.header(), Leader: m.leader, Version: "3.6.16"}, nil
}

func (m *oneMember) MemberList(ctx context.Context, r *etcdserverpb.MemberListRequest) (*etcdserverpb.MemberListResponse, error) {
	if r.Linearizable {
		if dl, ok := ctx.Deadline(); ok {
			m.clock.Store(int64(time.Until(dl)))
		}
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if dl, ok := ctx.Deadline(); ok {
		m.own.Store(int64(time.Until(dl)))
	}
	members := []*etcdserverpb.Member{{ID: 2, Name: "demo-0"}}
	for i := range m.peers {
		members = append(members, &etcdserverpb.Member{ID: uint64(3 + i), Name: fmt.Sprintf("demo-%d", 1+i)})
	}
	return &etcdserverpb.MemberListResponse{Header: m.header(), Members: members}, nil
}

// One member alone answers, naming another as its leader (one that lost its Pod a moment
// ago), or itself while its peers do not answer (it leads until its quorum check fails):
// the read through a quorum is tried on a short clock, and the view is the member's own.
// So does the leader alone at the only endpoint when its own list names other voters. The
// one member of a cluster of one, answering as the leader, is given the full clock. With no
// member answering, the read is short too.
func TestReadThroughAnUnreachedLeaderIsShort(t *testing.T) {
	require.Equal(t, unreachedLeaderRead, readTimeout([]string{"demo-0"}, 3, false), "one member, its leader unreached")
	require.Equal(t, unreachedLeaderRead, readTimeout([]string{"demo-0"}, 3, true), "one member of three, the leader")
	require.Equal(t, requestTimeout/3, readTimeout([]string{"demo-0"}, 1, true), "the one member, the leader")
	require.Equal(t, requestTimeout/3, readTimeout([]string{"demo-0", "demo-1"}, 3, false), "more members answered")
	require.Equal(t, unreachedLeaderRead, readTimeout(nil, 3, false), "no member answered: they are down, or a new cluster forms")
	for _, tc := range []struct {
		leader    uint64
		peers     int
		clock     time.Duration
		whoseLead string
	}{
		{leader: 3, clock: unreachedLeaderRead, whoseLead: "another member"},
		{leader: 2, clock: requestTimeout / 3, whoseLead: "itself"},
		{leader: 2, peers: 2, clock: unreachedLeaderRead, whoseLead: "itself, of three voters"},
	} {
		t.Run(tc.whoseLead, func(t *testing.T) {
			m := &oneMember{leader: tc.leader, peers: tc.peers}
			c := serveOne(t, m)
			start := time.Now()
			list, linearizable, err := c.memberList(context.Background())
			took := time.Since(start)
			require.NoError(t, err)
			require.False(t, linearizable)
			require.Len(t, list.Members, 1+tc.peers)
			require.GreaterOrEqual(t, took, tc.clock, "the read waited its clock")
			require.LessOrEqual(t, time.Duration(m.clock.Load()), tc.clock, "the read's deadline is its clock")
		})
	}
}

// A member that answers no status (a new cluster's member before its leader is elected) is
// read through a quorum and asked for its own list at once, each on the short clock: the
// look returns its own list, not read through a quorum, instead of waiting a clock for each.
func TestNoMemberAnsweringIsReadOnTheShortClock(t *testing.T) {
	m := &oneMember{starting: true, peers: 2}
	list, linearizable, err := serveOne(t, m).memberList(context.Background())
	require.NoError(t, err)
	require.False(t, linearizable)
	require.Len(t, list.Members, 3)
	require.LessOrEqual(t, time.Duration(m.clock.Load()), unreachedLeaderRead, "the read's deadline is the short clock")
	require.LessOrEqual(t, time.Duration(m.own.Load()), unreachedLeaderRead, "so is the own list's")
	require.Positive(t, m.own.Load(), "the own list was asked")
}

// A member that answers alone, of three voters (it leads, or names a leader whose Pod
// went), while no other member's etcd runs: no read through a quorum is asked, which
// none could confirm, and the view is its own list at once. With a member whose Pod goes
// while its etcd may still run, two could confirm it, and the read is asked.
func TestNoReadIsAskedThatTooFewRunToConfirm(t *testing.T) {
	for _, leader := range []uint64{2, 3} {
		t.Run(fmt.Sprintf("leader %d", leader), func(t *testing.T) {
			m := &oneMember{leader: leader, peers: 2}
			c := serveOne(t, m)
			c.SetStopping(0)
			list, linearizable, err := c.memberList(context.Background())
			require.NoError(t, err)
			require.False(t, linearizable)
			require.Len(t, list.Members, 3)
			require.Zero(t, m.clock.Load(), "no read through a quorum was asked")

			c.SetStopping(1)
			_, linearizable, err = c.memberList(context.Background())
			require.NoError(t, err)
			require.False(t, linearizable)
			require.Positive(t, m.clock.Load(), "a member still stopping may confirm the read: it is asked")
		})
	}
}

// The survivor of a quorum that goes still leads for a moment, its stopping peers may still
// confirm a read: View asks for it and waits its clock, LocalView never does and names the
// members from the survivor's own list, the survivor answering.
func TestLocalViewAsksNoReadThroughAQuorum(t *testing.T) {
	m := &oneMember{leader: 2, peers: 2}
	c := serveOne(t, m)
	c.SetStopping(2)
	v, err := c.LocalView(context.Background())
	require.NoError(t, err)
	require.False(t, v.Linearizable)
	require.Len(t, v.Members, 3)
	require.True(t, v.Members[0].Answering, "demo-0 answers")
	require.Zero(t, m.clock.Load(), "no read through a quorum was asked")

	v, err = c.View(context.Background())
	require.NoError(t, err)
	require.False(t, v.Linearizable)
	require.Positive(t, m.clock.Load(), "View asks the read")
}

// serveOne serves m at a local address until the test ends, and dials it as demo-0.
func serveOne(t *testing.T, m *oneMember) *Client {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	srv := grpc.NewServer()
	etcdserverpb.RegisterMaintenanceServer(srv, m)
	etcdserverpb.RegisterClusterServer(srv, m)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)
	c, err := dial(map[string]string{"demo-0": "http://" + l.Addr().String()}, nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}
