package etcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// voters counts the members that are not learners.
func voters(members []*etcdserverpb.Member) int {
	n := 0
	for _, m := range members {
		if !m.IsLearner {
			n++
		}
	}
	return n
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
		return NotYet(err)
	})
	return id, err
}

// promoteFor and promoteEvery bound Promote's short poll while etcd finds a learner behind.
const promoteFor, promoteEvery = 500 * time.Millisecond, 25 * time.Millisecond

// ErrNotYet is etcd refusing a membership change for now by its own rules, which a moment
// later may allow it: a learner's log not within a tenth of the leader's, too few started
// voters, or (to add a member) a leader not connected for the last 5 seconds to a quorum of
// the voters, the new member counted (etcd's strict reconfiguration check, 3.5 and 3.6
// alike). It is a wait, not a failure.
var ErrNotYet = errors.New("etcd does not allow the change yet")

// NotYet wraps etcd's refusals for now in ErrNotYet, saying what each waits for.
func NotYet(err error) error {
	switch {
	case errors.Is(err, rpctypes.ErrUnhealthy):
		return fmt.Errorf("%w: its leader has not been connected to enough voters for the last 5 s (etcd's strict reconfiguration check: %w)", ErrNotYet, err)
	case errors.Is(err, rpctypes.ErrMemberLearnerNotReady), errors.Is(err, rpctypes.ErrMemberNotEnoughStarted):
		return fmt.Errorf("%w: %v", ErrNotYet, err)
	}
	return err
}

// Promote makes a learner a voter; promoting a voter is a no-op. It goes to the leader: a
// follower forwards a promotion to the leader without the caller's identity, which etcd
// with auth on refuses for a client certificate user. etcd itself decides
// whether the learner caught up: it is asked again every promoteEvery for up to promoteFor
// (a started learner catches up within moments, and is promoted the moment etcd allows),
// then a refusal is ErrNotYet.
func (c *Client) Promote(ctx context.Context, id uint64) error {
	return c.atLeader(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		until := time.Now().Add(promoteFor)
		for {
			_, err := cli.MemberPromote(ctx, id)
			switch {
			case errors.Is(err, rpctypes.ErrMemberNotLearner):
				return nil
			case !errors.Is(err, rpctypes.ErrMemberLearnerNotReady) || time.Now().After(until):
				return NotYet(err)
			}
			select {
			case <-ctx.Done():
				return NotYet(err)
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
		return NotYet(err)
	})
}

// UpdatePeerURL sets a member's one peer URL; a member that has it already is left as it
// is (the step may be retried after the operator stopped midway).
func (c *Client) UpdatePeerURL(ctx context.Context, id uint64, peerURL string) error {
	return c.pinned(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		list, err := cli.MemberList(ctx)
		if err != nil {
			return err
		}
		i := slices.IndexFunc(list.Members, func(m *etcdserverpb.Member) bool { return m.ID == id })
		switch {
		case i < 0:
			return fmt.Errorf("etcd lists no member %s", ID(id))
		case slices.Equal(list.Members[i].PeerURLs, []string{peerURL}):
			return nil
		}
		_, err = cli.MemberUpdate(ctx, id, []string{peerURL})
		return NotYet(err)
	})
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
	return c.through(ctx, ep, func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.MoveLeader(ctx, target)
		return err
	})
}
