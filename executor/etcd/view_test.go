package etcd

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
		took, v = look()
		require.True(t, v.Members[0].Silent, "still silent, on the short clock")
		require.Less(t, took, statusTimeout/2+silentTimeout)
	}

	c.SetCluster("", map[string]string{"demo-0": "http://" + hungAgain(t)})
	took, v = look()
	require.True(t, v.Members[0].Silent)
	require.GreaterOrEqual(t, took, statusTimeout, "a member at a new endpoint is asked on the full clock")
}

// hungAgain is the address of another listener that never answers, open until the test ends.
func hungAgain(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	return l.Addr().String()
}
