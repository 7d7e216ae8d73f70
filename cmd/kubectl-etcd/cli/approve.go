package cli

import (
	"context"
	"flag"
	"fmt"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/planner/render"
)

const approveHelp = `Approve the plan an EtcdCluster waits on: any plan with spec.updateStrategy.approval: Manual,
and a recovery from quorum loss unless spec.recovery.quorumLoss is Automatic. The plan's ID goes into the annotation ` + v1alpha1.AnnotationApprove + `, and the operator applies it.

Usage:
  kubectl-etcd approve NAME [--plan ID]

Flags:
      --plan ID             the plan you reviewed: approval fails when another plan is pending
                            (default: the pending plan, whatever it is)
` + kubeFlagsHelp

// approve runs `kubectl-etcd approve`.
func (c *CLI) approve(ctx context.Context, args []string) int {
	var id string
	return c.annotate(ctx, args, "approve", approveHelp, func(fs *flag.FlagSet) { fs.StringVar(&id, "plan", "", "") },
		func(ec *v1alpha1.EtcdCluster) (string, string, error) {
			p, err := pendingPlan(ec, id)
			if err != nil {
				return "", "", err
			}
			key := ec.Namespace + "/" + ec.Name
			if ec.Annotations[v1alpha1.AnnotationApprove] == p.ID {
				return "", fmt.Sprintf("EtcdCluster %s: plan %s was already approved\n", key, p.ID), nil
			}
			return p.ID, fmt.Sprintf("EtcdCluster %s: plan %s approved (%s); follow it with: kubectl etcd status %s\n", key, p.ID, render.Steps(len(p.Steps)), ec.Name), nil
		}, v1alpha1.AnnotationApprove)
}

// annotate runs a command that sets one annotation of an EtcdCluster NAME (with the
// command's own flags, added by flags): decide says, of the cluster as it is now, the value
// ("" to set none) and what to print. A conflict means the cluster changed since it was
// read: it is read and decided again, so what is set is what was checked.
func (c *CLI) annotate(ctx context.Context, args []string, command, help string, flags func(*flag.FlagSet),
	decide func(*v1alpha1.EtcdCluster) (value, msg string, err error), annotation string) int {
	var k kubeFlags
	fs := newFlagSet(command)
	flags(fs)
	k.add(fs)
	name, err := parseName(fs, args)
	if err != nil {
		return c.flagError(err, command, help)
	}
	kc, err := k.connect()
	if err != nil {
		return c.fail(err)
	}
	key := client.ObjectKey{Namespace: kc.namespace, Name: name}
	var msg string
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ec := &v1alpha1.EtcdCluster{}
		if err := kc.Get(ctx, key, ec); err != nil {
			return err
		}
		var value string
		if value, msg, err = decide(ec); err != nil || value == "" {
			return err
		}
		patch := client.MergeFromWithOptions(ec.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if ec.Annotations == nil {
			ec.Annotations = map[string]string{}
		}
		ec.Annotations[annotation] = value
		return kc.Patch(ctx, ec, patch)
	})
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprint(c.Stdout, msg)
	return ExitOK
}

// pendingPlan is the plan an approval would let run: the one awaiting approval for the
// current spec, and the one the user named when they named one. Without manual approval,
// only a recovery from quorum loss awaits it (spec.recovery).
func pendingPlan(ec *v1alpha1.EtcdCluster, id string) (*v1alpha1.PlanStatus, error) {
	name := ec.Namespace + "/" + ec.Name
	p := ec.Status.Plan
	switch {
	case ec.Spec.UpdateStrategy.Approval != v1alpha1.ApprovalManual && (p == nil || p.Phase != v1alpha1.PlanAwaitingApproval):
		return nil, fmt.Errorf("EtcdCluster %s applies its plans without approval (spec.updateStrategy.approval is %s)",
			name, ec.Spec.UpdateStrategy.Approval)
	case p == nil || p.Generation != ec.Generation:
		return nil, fmt.Errorf("EtcdCluster %s has no plan for generation %d yet: the operator has not planned the latest spec; try again in a moment",
			name, ec.Generation)
	case p.Phase != v1alpha1.PlanAwaitingApproval:
		return nil, fmt.Errorf("EtcdCluster %s has no plan awaiting approval: plan %s is %s", name, p.ID, p.Phase)
	case id != "" && id != p.ID:
		return nil, fmt.Errorf("plan %s is not the pending plan: EtcdCluster %s awaits approval of plan %s (%s); review it with: kubectl etcd status %s",
			id, name, p.ID, render.Steps(len(p.Steps)), ec.Name)
	}
	return p, nil
}
