package controller

import (
	"cmp"
	"fmt"
	"slices"
	"sort"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/planner"
)

// recordObserved writes what was observed into status: members, IDs, versions, counts.
// When etcd does not answer, the last recorded membership stays, with health cleared.
func recordObserved(c *v1alpha1.EtcdCluster, o *observation) {
	st := &c.Status
	st.TLS = o.tls.Status
	recordAuth(c, o)
	names := []string{}
	for _, m := range o.Members {
		names = append(names, m.Name)
	}
	if o.Etcd != nil {
		for _, m := range o.Etcd.Members {
			names = append(names, m.MemberName())
		}
	}
	for _, name := range names { // a name once used is never used again
		if n := vocab.Ordinal(c.Name, name); n >= int(st.NextOrdinal) {
			st.NextOrdinal = int32(n + 1)
		}
	}
	if o.Etcd == nil {
		for i := range st.Members {
			st.Members[i].Healthy, st.Members[i].Leader = false, false
		}
	} else {
		st.ClusterID, st.ClusterVersion = o.Etcd.ClusterID, o.Etcd.ClusterVersion
		if o.Etcd.Linearizable {
			st.Members = membersStatus(c, o)
		} else {
			refreshHealth(st.Members, o.Etcd)
		}
		if o.Etcd.Linearizable { // a stalled learner that left is forgotten
			st.StalledLearners = slices.DeleteFunc(st.StalledLearners, func(id string) bool {
				return !slices.ContainsFunc(o.Etcd.Members, func(m planner.EtcdMember) bool { return m.ID == id && m.Learner })
			})
		}
		st.Alarms = nil
		for _, a := range o.Etcd.Alarms {
			st.Alarms = append(st.Alarms, fmt.Sprintf("%s on member %s", a.Type, a.MemberID))
		}
	}
	var ready, voters int32
	lowest := ""
	for _, m := range st.Members {
		if m.Role == v1alpha1.RoleVoter {
			voters++
			if m.Healthy {
				ready++
			}
		}
		if v, err := planner.ParseVersion(m.Version); err == nil {
			if l, err := planner.ParseVersion(lowest); err != nil || v.Compare(l) < 0 {
				lowest = m.Version
			}
		}
	}
	st.Replicas, st.ReadyReplicas, st.Version = voters, ready, lowest
	st.MemberSummary = fmt.Sprintf("%d/%d", ready, c.Spec.Replicas)
}

// refreshHealth updates the recorded members' health from a view not read through a
// quorum. Such a view is one member's own, which may miss members that joined or still list
// members that left: the planner trusts the recorded membership when etcd is not
// linearizable, so the membership stays as a quorum last showed it. A recorded member the
// view does not show is not known to answer.
func refreshHealth(members []v1alpha1.MemberStatus, v *planner.EtcdView) {
	for i := range members {
		ms := &members[i]
		ms.Healthy, ms.Silent, ms.Leader = false, false, false
		for _, m := range v.Members {
			if m.ID == ms.ID {
				ms.Healthy, ms.Silent, ms.Leader = m.Answering && m.Leader != "", m.Silent, m.ID == v.LeaderID
				ms.Version, ms.DBSize = cmp.Or(m.Version, ms.Version), cmp.Or(m.DBSize, ms.DBSize)
			}
		}
	}
}

func membersStatus(c *v1alpha1.EtcdCluster, o *observation) []v1alpha1.MemberStatus {
	out := make([]v1alpha1.MemberStatus, 0, len(o.Etcd.Members))
	for _, m := range o.Etcd.Members {
		name := m.MemberName()
		ms := v1alpha1.MemberStatus{Name: name, ID: m.ID, Role: v1alpha1.RoleVoter, Leader: m.ID == o.Etcd.LeaderID,
			Version: m.Version, Healthy: m.Answering && m.Leader != "", Silent: m.Silent, DBSize: m.DBSize}
		if pvc := o.pvcs[name]; ms.Version == "" && pvc != nil {
			ms.Version = pvc.Annotations[vocab.AnnotationRanVersion] // the last it answered with
		}
		if m.Learner {
			ms.Role = v1alpha1.RoleLearner
		}
		if _, ok := o.pods[name]; ok {
			ms.Pod = name
		}
		if _, ok := o.pvcs[name]; ok {
			ms.PVC = name
		}
		out = append(out, ms)
	}
	sort.Slice(out, func(i, j int) bool {
		return vocab.Ordinal(c.Name, out[i].Name) < vocab.Ordinal(c.Name, out[j].Name)
	})
	return out
}

// hint tells the user what to look at when a step passes its deadline.
func hint(s plan.Step, reason v1alpha1.StalledReason) string {
	switch reason {
	case v1alpha1.ReasonNameTaken, v1alpha1.ReasonPodStuckTerminating, v1alpha1.ReasonStorageClassNotFound, v1alpha1.ReasonPreflightFailed:
		return "See docs/operations.md, " + string(reason)
	}
	switch s.Action {
	case plan.CreateSeed, plan.StartMember, plan.UpgradeMember, plan.RestartMember:
		return fmt.Sprintf("Check Pod %s: its events, logs and whether it can be scheduled and its volume bound", s.Member)
	case plan.PromoteLearner:
		return fmt.Sprintf("Check that learner %s runs and catches up with the leader (its logs, network, disk speed)", s.Member)
	case plan.TransferLeadership:
		return fmt.Sprintf("Check that %s is healthy and reachable from the leader", s.Target)
	case plan.ExpandVolume:
		return fmt.Sprintf("Check volume claim %s: its events and conditions, and that its StorageClass can expand volumes", s.Member)
	case plan.RemoveMember, plan.AddLearner, plan.DeleteMember, plan.UpdatePeerURL:
		return "Check that a quorum of members is healthy: membership changes and deletions need one"
	case plan.Compact, plan.Defragment, plan.DisarmAlarm:
		return "Check that every voter is healthy and the members' disks: a defragmentation rewrites the whole database (docs/operations.md, out of space)"
	case plan.RenewCertificate, plan.AwaitCertificate:
		return fmt.Sprintf("Check that Secret %s is mounted by the members (a Secret volume is updated in place, never through subPath) and the cluster's CA Secret is there (docs/security.md)", s.Secret)
	case plan.RotateCA:
		return fmt.Sprintf("Check that every voter is healthy and that Secrets %s and the cluster's trust Secret are there (docs/security.md, rotate the cluster's CA)", s.Secret)
	case plan.EnableAuth, plan.DisableAuth, plan.UpdateUsers:
		return "Check that every voter is healthy and that the operator's client certificate names an etcd user with the root role (docs/security.md, authentication)"
	case plan.SnapshotSource:
		return fmt.Sprintf("Check EtcdBackup %s: its conditions, and the cluster's backup destination (docs/backup-restore.md)", s.Backup)
	case plan.Acknowledge:
		return "Approve the plan once what its step asks is done"
	case plan.CheckData:
		return fmt.Sprintf("Check Pod %s: its events (it mounts volume claim %s read-only, on the node of the member's old Pod)", resources.CheckPodName(s.Member), s.Member)
	case plan.StopMember, plan.ForceNewCluster, plan.RestoreFromBackup, plan.SnapshotSurvivor:
		return checkOperator
	}
	return checkOperator // an action of another operator version, in a recorded plan
}

// checkOperator is the hint of steps with nothing more particular to look at.
const checkOperator = "Check the operator's logs and the cluster's events"
