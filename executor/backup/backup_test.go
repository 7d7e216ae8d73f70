package backup

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/etcd/etcdfake"
	"github.com/etcdplan/etcdplan/executor/snapshot"
	"github.com/etcdplan/etcdplan/executor/store/storefake"
	"github.com/etcdplan/etcdplan/planner"
)

func member(id, name string, index uint64) planner.EtcdMember {
	return planner.EtcdMember{ID: id, Name: name, Answering: true, Leader: "1", RaftIndex: index}
}

func TestSourceIsAFollowerFurthestAlong(t *testing.T) {
	v := &planner.EtcdView{LeaderID: "1", Members: []planner.EtcdMember{member("1", "a", 90), member("2", "b", 80), member("3", "c", 85)}}
	_, err := Source(v)
	require.ErrorContains(t, err, "not read through a quorum")
	v.Linearizable = true
	m, err := Source(v)
	require.NoError(t, err)
	require.Equal(t, "c", m.Name, "the leader last, then the follower with the higher index")

	// Learners, members that do not answer, know no leader, have not started or have an
	// alarm are never read; the leader is when nothing else is left.
	v.Members[1].Learner = true
	v.Members[2].Answering = false
	v.Members = append(v.Members, member("4", "d", 99), member("5", "", 99), member("6", "f", 99))
	v.Members[3].Leader = ""
	v.Alarms = []planner.Alarm{{MemberID: "6", Type: planner.AlarmNoSpace}}
	m, err = Source(v)
	require.NoError(t, err)
	require.Equal(t, "a", m.Name)

	v.Members[0].Answering = false
	_, err = Source(v)
	require.ErrorContains(t, err, "no voter answers")
}

func TestKeySaysClusterTimeAndRevision(t *testing.T) {
	at := time.Date(2026, 11, 23, 6, 30, 5, 0, time.FixedZone("x", 3600))
	require.Equal(t, "prod/demo/demo-20261123T053005Z-r4711-1a2b3c4d.db", Key("prod", "demo", at, 4711, "1a2b3c4d"))
}

func TestTakeStoresACheckedSnapshot(t *testing.T) {
	fake := etcdfake.New(nil)
	fake.Database, fake.Revision = bytes.Repeat([]byte("etcd"), 5000), 42
	fake.Held = etcd.Contents{Keys: 7, HashKV: 99, CompactRevision: 30}
	st := storefake.New()
	got, err := Take(context.Background(), fake, member("2", "b", 1), st, func(rev int64) string { return fmt.Sprintf("k-%d", rev) })
	require.NoError(t, err)
	require.Equal(t, []string{"Snapshot 2", "Contents 2 42"}, fake.Calls(), "the member is read by its ID, its contents at the snapshot's revision")
	require.Equal(t, int64(42), got.Revision)
	require.Equal(t, fake.Held, got.Contents)
	require.Equal(t, []string{"k-42"}, st.Keys())
	rc, err := st.Get(context.Background(), "k-42")
	require.NoError(t, err)
	stored, err := io.ReadAll(snapshot.NewReader(rc))
	require.NoError(t, err, "what is stored still matches etcd's hash")
	sum := sha256.Sum256(stored)
	require.Equal(t, hex.EncodeToString(sum[:]), got.SHA256)
	require.Equal(t, int64(len(stored)), got.Size)
	require.Equal(t, len(fake.Database)+sha256.Size, len(stored))
}

// A stream that does not match its hash is not kept, and says so.
func TestTakeKeepsNoCorruptSnapshot(t *testing.T) {
	st := storefake.New()
	_, err := Take(context.Background(), corrupt{etcdfake.New(nil)}, member("2", "b", 1), st, func(int64) string { return "k" })
	require.ErrorIs(t, err, snapshot.ErrCorrupt)
	require.Empty(t, st.Keys())
}

// A snapshot whose contents cannot be read is not kept: no drill could check it.
func TestTakeKeepsNoSnapshotWithoutItsContents(t *testing.T) {
	st := storefake.New()
	_, err := Take(context.Background(), uncounted{etcdfake.New(nil)}, member("2", "b", 1), st, func(int64) string { return "k" })
	require.ErrorIs(t, err, ErrSnapshot)
	require.ErrorContains(t, err, "required revision has been compacted")
	require.Empty(t, st.Keys())
}

// uncounted cannot tell what it held at the revision.
type uncounted struct{ *etcdfake.Cluster }

func (uncounted) Contents(context.Context, string, uint64, int64) (etcd.Contents, error) {
	return etcd.Contents{}, errors.New("etcdserver: mvcc: required revision has been compacted")
}

// corrupt serves a snapshot with one byte changed on the way.
type corrupt struct{ *etcdfake.Cluster }

func (c corrupt) Snapshot(ctx context.Context, name string, id uint64) (io.ReadCloser, int64, error) {
	c.Database = []byte("some database")
	rc, rev, err := c.Cluster.Snapshot(ctx, name, id)
	if err != nil {
		return nil, 0, err
	}
	b, _ := io.ReadAll(rc)
	b[3] ^= 1
	return io.NopCloser(bytes.NewReader(b)), rev, nil
}
