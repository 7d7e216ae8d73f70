package controller

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/planner"
)

// forceNewCluster restarts the step's member alone on its data with --force-new-cluster.
// Its claim is marked first: while its Pod is replaced the member does not answer, and the
// mark keeps the plan and the check on it (Check decided on a fresh look that it may).
// The new Pod runs etcd once, as every member Pod does.
func (r *Reconciler) forceNewCluster(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, s plan.Step) error {
	if err := r.markChosen(ctx, c, o, s, vocab.AnnotationForceNewCluster); err != nil {
		return err
	}
	if err := r.retainOthers(ctx, c, o, s, fmt.Sprintf("%s (ID %s) restarted alone with --force-new-cluster", s.Member, s.MemberID)); err != nil {
		return err
	}
	if p := o.pods[s.Member]; p != nil {
		if !owned(c, p, false) {
			return nameTaken("Pod", s.Member)
		}
		ended := observe.PodEnded(p)
		if p.Annotations[vocab.AnnotationForceNewCluster] == s.MemberID && !ended && p.DeletionTimestamp == nil {
			return nil // it runs alone, or starts to
		}
		if err := r.removePod(ctx, c, o, p); err != nil {
			return err
		}
	}
	ms := r.memberSpec(c, o, s, nil)
	ms.ExpectData, ms.Voter, ms.ForceNewCluster = true, true, s.MemberID
	return r.createMemberPod(ctx, c, ms)
}

// retainOthers marks, before a recovery on s's member runs, the claims of the other members
// that held data (planner.Retains); what says what the recovery did.
func (r *Reconciler) retainOthers(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, s plan.Step, what string) error {
	for _, member := range planner.Retains(o.desired, o.Observed, s.Member) {
		if err := r.retain(ctx, c, o, member, what); err != nil {
			return err
		}
	}
	return nil
}

// retain marks the claim of a member that held data when a recovery replaced its cluster:
// the member leaves the cluster, and the writes only it received live on its volume alone.
// The claim loses its owner reference, so it outlives the cluster whatever spec.storage
// says. It is marked before the recovery, so no later plan can take it for a plain leftover.
func (r *Reconciler) retain(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, member, what string) error {
	pvc := o.pvcs[member]
	if pvc == nil || !owned(c, pvc, true) || pvc.Labels[v1alpha1.LabelRetained] != "" {
		return nil
	}
	patch := client.MergeFrom(pvc.DeepCopy())
	pvc.Labels[v1alpha1.LabelRetained] = "true"
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	pvc.Annotations[v1alpha1.AnnotationRetained] = fmt.Sprintf("member %s (ID %s) held data when %s "+
		"in a recovery from quorum loss: it may hold writes the cluster lacks; the operator never deletes this claim (docs/operations.md, retained volume claims)",
		member, pvc.Annotations[vocab.AnnotationMemberID], what)
	// A claim kept under retainPolicy Retain has no owner to lose.
	pvc.OwnerReferences = slices.DeleteFunc(pvc.OwnerReferences, func(o metav1.OwnerReference) bool { return o.UID == c.UID })
	if err := r.Patch(ctx, pvc, patch); err != nil {
		return fmt.Errorf("retaining the volume claim %s: %w", pvc.Name, err)
	}
	return nil
}

// mark sets an annotation on a member's volume claim, unless it has it already.
func (r *Reconciler) mark(ctx context.Context, pvc *corev1.PersistentVolumeClaim, key, value string) error {
	if pvc.Annotations[key] == value {
		return nil
	}
	patch := client.MergeFrom(pvc.DeepCopy())
	if pvc.Annotations == nil {
		pvc.Annotations = map[string]string{}
	}
	pvc.Annotations[key] = value
	if err := r.Patch(ctx, pvc, patch); err != nil {
		return fmt.Errorf("marking the volume claim %s: %w", pvc.Name, err)
	}
	return nil
}

// restoreUnfinished: status.clusterID is of a cluster a restore started that has not answered
// through a quorum yet (status.lastRecovery).
func restoreUnfinished(c *v1alpha1.EtcdCluster) bool {
	l := c.Status.LastRecovery
	return l != nil && l.Action == string(plan.RestoreFromBackup) && l.FinishedAt == nil && c.Status.ClusterID != l.FromClusterID
}

// restoreFromBackup starts the cluster anew from a backup on new seeds
// (planner.RestoreSeeds), each restoring it. The backup is checked before anything changes;
// then every seed's claim is marked, which keeps the plan and the check on these seeds and
// this backup while the old cluster's ID is forgotten (answers from the new cluster count
// from then on), and only then are the seeds' Pods made: a restore cut short between its
// marks goes on with the seeds marked, all named in each Pod's initial cluster. The old
// members' Pods and claims go later, once the new cluster's member list, read through its
// quorum, shows them gone.
func (r *Reconciler) restoreFromBackup(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, s plan.Step) error {
	if err := r.retainOthers(ctx, c, o, s, fmt.Sprintf("the cluster was restored from EtcdBackup %s on seed %s", s.Backup, s.Member)); err != nil {
		return err
	}
	// A seed that answers alone (its first answer set status.clusterID) waits for its peers:
	// the restore goes on under that ID, making the Pods they lack.
	begun := c.Status.ClusterID == "" || restoreUnfinished(c) && o.Etcd != nil
	if !begun {
		if _, err := r.restoreSource(ctx, c, seedRestore(c, s)); err != nil {
			return err
		}
	}
	seeds := planner.RestoreSeeds(o.desired, o.Observed, s.Member)
	if c.Spec.Storage.Medium != v1alpha1.StorageMediumMemory {
		for _, seed := range seeds {
			if err := r.markSeed(ctx, c, o, seed, s.Backup); err != nil {
				return err
			}
		}
	}
	if !begun {
		// The ID of a restored cluster that never formed a quorum (its seed answered alone,
		// then went) is forgotten too, but the cluster before the restore stays the
		// previous one: its backups are still the cluster's.
		if !restoreUnfinished(c) {
			c.Status.PreviousClusterID = c.Status.ClusterID
		}
		c.Status.ClusterID, c.Status.ClusterVersion = "", ""
		r.clients.forget(client.ObjectKeyFromObject(c))
	}
	var specs []*resources.MemberSpec
	for _, seed := range seeds {
		each := s
		each.Member, each.MemberID = seed, ""
		ms, err := r.prepareMember(ctx, c, o, each, seeds)
		if err != nil {
			return err
		}
		if ms != nil {
			specs = append(specs, ms)
		}
	}
	return r.launch(ctx, c, s, seeds, specs)
}

// markChosen marks the claim of the member a recovery chose (the step's member, by ID) with
// key, its member ID: only a claim of this cluster that records that ID is marked.
func (r *Reconciler) markChosen(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, s plan.Step, key string) error {
	pvc := o.pvcs[s.Member]
	if pvc == nil || !owned(c, pvc, true) || pvc.Annotations[vocab.AnnotationMemberID] != s.MemberID {
		return fmt.Errorf("member %s has no volume claim of this cluster recording member ID %s", s.Member, s.MemberID)
	}
	return r.mark(ctx, pvc, key, s.MemberID)
}

// markSeed creates a seed's claim, unless it exists, and marks it with the backup it
// restores.
func (r *Reconciler) markSeed(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation, seed, backup string) error {
	if err := r.ensurePVC(ctx, c, o, seed); err != nil {
		return err
	}
	pvc := o.pvcs[seed]
	if pvc == nil {
		pvc = &corev1.PersistentVolumeClaim{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: seed}, pvc); err != nil {
			return err
		}
		o.pvcs[seed] = pvc
	}
	return r.mark(ctx, pvc, vocab.AnnotationRestoreSeed, backup)
}
