package controller

import (
	"fmt"
	"strings"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/planner"
)

// recoveryStep returns the plan's recovery from quorum loss still to run, if any: a restart
// alone with --force-new-cluster, or a start anew from a backup.
func recoveryStep(rec *v1alpha1.PlanStatus) *plan.Step {
	for i := int(rec.Current); i < len(rec.Steps); i++ {
		if rec.Steps[i].Action.Recovers() {
			return &rec.Steps[i]
		}
	}
	return nil
}

// recoveryHeld: the plan's current step recovers from quorum loss, which can lose writes,
// and spec.recovery does not let it run without approval. The steps before it run first:
// they start survivors whose Pods were gone, which costs nothing, and only a survivor's
// preflight can tell whether it kept its data (if not, the recovery is planned anew, from a
// backup, and approved on that evidence).
func recoveryHeld(c *v1alpha1.EtcdCluster, rec *v1alpha1.PlanStatus) bool {
	s, cur := recoveryStep(rec), currentStep(rec)
	// The old cluster's Pods stop before a restore, as its part: they are held with it.
	return !c.Spec.RecoveryApproved() && s != nil && (s == cur || cur.Action == plan.StopMember)
}

// currentStep is the plan's step to run, nil once all ran.
func currentStep(rec *v1alpha1.PlanStatus) *plan.Step {
	if int(rec.Current) < len(rec.Steps) {
		return &rec.Steps[rec.Current]
	}
	return nil
}

// recoveryMessage says what a held recovery does, what it can cost, and how to let it run.
func recoveryMessage(c *v1alpha1.EtcdCluster, o *observation, rec *v1alpha1.PlanStatus) string {
	s := recoveryStep(rec)
	approve := fmt.Sprintf("approve it with `kubectl etcd approve %s --plan %s`", c.Name, rec.ID)
	if s.Action == plan.SnapshotSurvivor && s.Why == plan.WhySurvivorSnapshot {
		return fmt.Sprintf("a majority of voters lost their data and the cluster cannot form a quorum: plan %s stores the snapshot of %s, "+
			"the most recent of the voters that kept their data, as EtcdBackup %s (this loses nothing), and the next plan, approved on its own, "+
			"starts the cluster anew from it on new members restored at once, and writes %s had not received are lost; %s "+
			"(see docs/backup-restore.md)", rec.ID, s.Member, s.Backup, s.Member, approve)
	}
	if s.Action == plan.SnapshotSurvivor {
		return fmt.Sprintf("a majority of voters lost their data and the cluster cannot form a quorum, while %s still runs alone with its data in memory: "+
			"plan %s stores its snapshot as EtcdBackup %s (this loses nothing), and the next plan, approved on its own, "+
			"starts the cluster anew from whichever of that snapshot and the newest backup holds the higher revision; %s "+
			"(see docs/backup-restore.md)", s.Member, rec.ID, s.Backup, approve)
	}
	if s.Action == plan.RestoreFromBackup {
		from := o.DescribeBackup(s.Backup)
		stop := ""
		for i := int(rec.Current); rec.Steps[i].Action == plan.StopMember; i++ {
			stop += fmt.Sprintf("stops the Pod of %s, ", rec.Steps[i].Member)
		}
		seeds := planner.RestoreSeeds(o.desired, o.Observed, s.Member)
		return fmt.Sprintf("a majority of voters lost their data and the cluster cannot form a quorum, and no voter restarts alone on its own: "+
			"plan %s %sstarts the cluster anew from %s on new members (%s), each restored from it, and writes after that backup are lost; %s "+
			"(see docs/backup-restore.md)", rec.ID, stop, from, strings.Join(seeds, ", "), approve)
	}
	index := "raft term and index not known while it does not answer"
	if o.Etcd != nil {
		for _, m := range o.Etcd.Members {
			if m.ID == s.MemberID && m.Answering {
				index = fmt.Sprintf("raft term %d, index %d", m.RaftTerm, m.RaftIndex)
			}
		}
	}
	kept := ""
	if names := planner.Retains(o.desired, o.Observed, s.Member); len(names) > 0 {
		kept = fmt.Sprintf("; the volume claims of %s, which held data too, are kept (retained), never deleted by the operator", strings.Join(names, ", "))
	}
	return fmt.Sprintf("a majority of voters lost their data and the cluster cannot form a quorum: plan %s restarts %s (%s, "+
		"the most recent of the voters that kept their data) alone with --force-new-cluster, and writes it had not received are lost%s; "+
		"%s, or restore a new cluster from a backup (see docs/backup-restore.md)", rec.ID, s.Member, index, kept, approve)
}
