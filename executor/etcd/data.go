package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

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
	return c.through(ctx, ep, func(ctx context.Context, cli *clientv3.Client) error {
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
// restore drill's scratch etcd. With rootPassword it reads as root: a snapshot brings
// etcd's users and auth flag with it, and the scratch etcd serves plain text, where no
// certificate names a user. etcd with auth off takes the password and ignores it.
func ContentsAt(ctx context.Context, url string, rev int64, rootPassword string) (Contents, error) {
	cli, err := dialOne(url, nil, root, rootPassword)
	if err != nil {
		return Contents{}, err
	}
	defer cli.Close()
	return contentsOf(ctx, cli, url, rev)
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
	one, err := dial(map[string]string{name: ep}, c.tls)
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

// DisarmNoSpace clears a member's NOSPACE alarm.
func (c *Client) DisarmNoSpace(ctx context.Context, id uint64) error {
	return c.pinned(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.AlarmDisarm(ctx, &clientv3.AlarmMember{MemberID: id, Alarm: etcdserverpb.AlarmType_NOSPACE})
		return err
	})
}
