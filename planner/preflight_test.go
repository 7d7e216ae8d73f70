package planner

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/plan"
)

const unreadable = "exit code 5: data directory /var/lib/etcd/data cannot be read: open /var/lib/etcd/data/member: permission denied"

// A member whose preflight check could not read its data directory is down, never lost:
// its Pod waits for a person with the check's words, and nothing of it is removed or
// deleted, for one member or for all (a storage incident hits every Pod at once).
func TestUnreadableDataIsDownNotLost(t *testing.T) {
	nightly := &Backup{Name: "nightly", Revision: 42, TakenAt: "2026-11-23T03:00:00Z"}
	for _, tt := range []struct {
		name       string
		unreadable []string
		want       []string
	}{
		{"one of three", []string{"demo-1"}, []string{"StartMember demo-1"}},
		{"two of three", []string{"demo-1", "demo-2"}, []string{"StartMember demo-1", "StartMember demo-2"}},
		{"every voter", []string{"demo-0", "demo-1", "demo-2"}, []string{"StartMember demo-0", "StartMember demo-1", "StartMember demo-2"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := cluster(3, "3.6.16")
			w := running(c, 3, "3.6.16")
			w.backup, w.backupOf = nightly, w.clusterID
			for _, n := range tt.unreadable {
				w.members[n].preflightErr, w.members[n].up = unreadable, false
			}
			w.elect()
			o := w.observe()
			p := Plan(c, o)
			require.Nil(t, p.Blocked)
			require.Equal(t, tt.want, summary(p), "no RemoveMember, DeleteMember, ForceNewCluster or RestoreFromBackup")
			require.Contains(t, p.Steps[0].Reason, unreadable)
			require.Contains(t, p.Steps[0].Reason, "the member is down, not lost, and nothing of it is deleted")
			require.Contains(t, p.Steps[0].Reason, "delete Pod "+tt.unreadable[0])
			stuck, err := w.apply(p.Steps[0], c)
			require.NoError(t, err)
			require.True(t, stuck, "the executor keeps the Pod for a person")

			ok, _ := Check(c, plan.Step{Action: plan.ForceNewCluster, Member: "demo-0", MemberID: "1",
				Precondition: plan.Precondition{Kind: plan.PreQuorumLost, Member: "demo-0"}}, o)
			require.False(t, ok, "no quorum loss")
			ok, _ = Check(c, restoreAt(nightly, c), o)
			require.False(t, ok, "no restore")
		})
	}
}

// Once a person deleted the failed Pod (the volume mended), the member starts again as
// any member whose Pod is gone; a person who deleted the volume too has the member
// replaced, as a member whose data is gone.
func TestUnreadableDataAfterAPersonActed(t *testing.T) {
	c := cluster(3, "3.6.16")
	w := running(c, 3, "3.6.16")
	w.members["demo-1"].preflightErr, w.members["demo-1"].up = unreadable, false
	w.elect()
	w.members["demo-1"].pod, w.members["demo-1"].preflightErr = false, ""
	p := Plan(c, w.observe())
	require.Equal(t, []string{"StartMember demo-1"}, summary(p))
	require.Equal(t, "member demo-1 needs a new Pod", p.Steps[0].Reason)
	converge(t, c, w)

	w.members["demo-1"].preflightErr, w.members["demo-1"].up = unreadable, false
	w.members["demo-1"].pvc = false
	w.elect()
	require.Equal(t, []string{"RemoveMember demo-1", "AddLearner demo-3", "StartMember demo-3", "PromoteLearner demo-3"},
		summary(Plan(c, w.observe())))
}
