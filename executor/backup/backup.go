// Package backup takes etcd snapshots into object stores: which member to read, what the
// object is called, and the stream from etcd to the store, checked on its way.
package backup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/snapshot"
	"github.com/etcdplan/etcdplan/executor/store"
	"github.com/etcdplan/etcdplan/planner"
)

// Source is the member to snapshot: a voter that answers, knows a leader and has no alarm
// raised, a follower before the leader (a snapshot reads the whole database, and the
// leader serves every write), the one furthest along the log first. Only on a member list
// read through a quorum: one member's own view may come from a member cut off from the
// rest, whose snapshot would miss what the cluster committed since.
func Source(v *planner.EtcdView) (planner.EtcdMember, error) {
	if !v.Linearizable {
		return planner.EtcdMember{}, errors.New("etcd's member list was not read through a quorum: waiting for a quorum to answer")
	}
	alarmed := map[string]bool{}
	for _, a := range v.Alarms {
		alarmed[a.MemberID] = true
	}
	var ok []planner.EtcdMember
	for _, m := range v.Members {
		if !m.Learner && m.Answering && m.Leader != "" && m.Name != "" && !alarmed[m.ID] {
			ok = append(ok, m)
		}
	}
	if len(ok) == 0 {
		return planner.EtcdMember{}, errors.New("no voter answers with a leader and without an alarm")
	}
	slices.SortStableFunc(ok, func(a, b planner.EtcdMember) int {
		if (a.ID == v.LeaderID) != (b.ID == v.LeaderID) {
			if a.ID == v.LeaderID {
				return 1
			}
			return -1
		}
		switch {
		case a.RaftIndex > b.RaftIndex:
			return -1
		case a.RaftIndex < b.RaftIndex:
			return 1
		}
		return 0
	})
	return ok[0], nil
}

// Member is the member of that ID, once it answers: a backup that names its member (a
// survivor of a lost quorum, alone) reads it on any view, since a snapshot needs no quorum.
func Member(v *planner.EtcdView, id string) (planner.EtcdMember, error) {
	for _, m := range v.Members {
		if m.ID == id && m.Answering && m.Name != "" {
			return m, nil
		}
	}
	return planner.EtcdMember{}, fmt.Errorf("member %s does not answer", id)
}

// Key names a snapshot: its cluster, when it was taken, the revision and the backup's own
// unique suffix, so no two backups share an object.
func Key(namespace, cluster string, at time.Time, revision int64, unique string) string {
	return fmt.Sprintf("%s/%s/%s-%s-r%d-%s.db", namespace, cluster, cluster, at.UTC().Format("20060102T150405Z"), revision, unique)
}

// ErrSnapshot is etcd failing to serve a snapshot.
var ErrSnapshot = errors.New("snapshot")

// Taken is a stored snapshot.
type Taken struct {
	Key      string `json:"key"`
	Size     int64  `json:"size"`
	SHA256   string `json:"sha256"`
	Revision int64  `json:"revision"`
	// Contents is what the member held at Revision.
	Contents etcd.Contents `json:"contents"`
}

// Take streams a snapshot of member m into st under the key name gives it (from the
// revision), checking etcd's hash on the way: a snapshot that does not match is not kept.
// Then it reads what the member held at that revision, for a restore drill to check;
// when that fails, the object is deleted.
func Take(ctx context.Context, c etcd.Cluster, m planner.EtcdMember, st store.Store, name func(revision int64) string) (Taken, error) {
	id, err := etcd.ParseID(m.ID)
	if err != nil {
		return Taken{}, err
	}
	rc, rev, err := c.Snapshot(ctx, m.Name, id)
	if err != nil {
		return Taken{}, fmt.Errorf("%w of %s: %w", ErrSnapshot, m.Name, err)
	}
	defer rc.Close()
	r := snapshot.NewReader(rc)
	t := Taken{Key: name(rev), Revision: rev}
	if err := st.Put(ctx, t.Key, r); err != nil {
		return Taken{}, err
	}
	t.Size, t.SHA256 = r.Size(), r.SHA256()
	if t.Contents, err = c.Contents(ctx, m.Name, id, rev); err != nil {
		// An object whose contents are unknown cannot be drilled: it goes, and the
		// backup is tried again.
		return Taken{}, errors.Join(fmt.Errorf("%w: reading what %s held at revision %d: %w", ErrSnapshot, m.Name, rev, err),
			st.Delete(ctx, t.Key))
	}
	return t, nil
}
