package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/test/framework"
)

// clientGoRetry is client-go's leader election retry period, the operator's before its own.
const clientGoRetry = 2 * time.Second

// rolloutResult is one rollout of the operator's Deployment, each moment from its start as
// seen by a poller (every 10 ms).
type rolloutResult struct {
	Retry       time.Duration // the new operator's --leader-elect-retry-period (0: its default)
	Ready       time.Duration // the new operator's Pod is Ready
	OldStopping time.Duration // the old one's Pod is being deleted
	Released    time.Duration // the lease no longer names the old one
	Taken       time.Duration // the lease names the new one
	Reacted     time.Duration // from a member Pod gone (deleted when the lease was released) to created again
}

// HandOver is from the new operator's readiness to its lease.
func (r rolloutResult) HandOver() time.Duration { return r.Taken - r.Ready }

// rollouts installs the operator for one namespace as users deploy it (kustomize/namespaced:
// a Deployment, leader election) beside a cluster of 3, and rolls it out runs times with
// client-go's retry period and runs times with the operator's own, in turn. In each, the
// moment the lease no longer names the old operator a member Pod is deleted: the new
// operator's first act is to create it again once the old one is gone.
func (b *bench) rollouts(runs int) []rolloutResult {
	t := b.t
	t.Log("bench: operator rollouts")
	ctx := context.Background()
	ns := framework.Namespace(t)
	dir := filepath.Join(framework.Env.Root, ".stack", "bench-rollout")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "kustomization.yaml"), fmt.Appendf(nil,
		"namespace: %s\nnamePrefix: %s-\nresources: [../../kustomize/namespaced]\n", ns, ns), 0o644))
	require.NoError(t, framework.Kubectl(ctx, "apply", "-k", dir))
	t.Cleanup(func() { _ = framework.Kubectl(ctx, "delete", "--ignore-not-found", "--wait=false", "-k", dir) })
	deploy := ns + "-etcdplan"
	rolledOut := func() {
		require.NoError(t, framework.Kubectl(ctx, "-n", ns, "rollout", "status", "deployment/"+deploy, "--timeout=3m"))
	}
	rolledOut()
	c := framework.NewCluster(ns, "demo", 3)
	require.NoError(t, framework.Env.Client.Create(ctx, c))
	framework.WaitReady(t, ns, c.Name)

	var out []rolloutResult
	for i := range 2 * runs {
		retry := time.Duration(0)
		if i%2 == 0 {
			retry = clientGoRetry
		}
		r := b.rollout(ns, deploy, c.Name+"-1", retry)
		rolledOut()
		require.Eventually(t, func() bool { return b.settled(ns, c.Name, 3, c.Spec.Version) }, 2*time.Minute, 50*time.Millisecond)
		t.Logf("bench: rollout with retry %v: ready %v, old stopping %v, released %v, taken %v, reacted %v", retry,
			r.Ready, r.OldStopping, r.Released, r.Taken, r.Reacted)
		out = append(out, r)
	}
	b.clear(ns)
	return out
}

// rollout changes the Deployment's retry period (which rolls it out) and times the hand-over.
func (b *bench) rollout(ns, deploy, member string, retry time.Duration) rolloutResult {
	t, ctx := b.t, context.Background()
	lease := func() string {
		var l coordinationv1.Lease
		if err := framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "etcdplan.io"}, &l); err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	operators := func() []corev1.Pod {
		var pods corev1.PodList
		require.NoError(t, framework.Env.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/name": "etcdplan"}))
		return pods.Items
	}
	old := map[string]bool{}
	for _, p := range operators() {
		old[p.Name] = true
	}
	holder := lease()
	require.NotEmpty(t, holder, "the old operator holds the lease")
	var memberPod corev1.Pod
	require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: member}, &memberPod))

	var d appsv1.Deployment
	require.NoError(t, framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: deploy}, &d))
	ctr := &d.Spec.Template.Spec.Containers[0]
	ctr.Args = slices.DeleteFunc(ctr.Args, func(a string) bool { return strings.HasPrefix(a, "--leader-elect-retry-period=") })
	if retry != 0 {
		ctr.Args = append(ctr.Args, "--leader-elect-retry-period="+retry.String())
	}
	r := rolloutResult{Retry: retry}
	start := time.Now()
	require.NoError(t, framework.Env.Client.Update(ctx, &d))
	var deleted, gone, taken, created time.Time
	for deadline := start.Add(2 * time.Minute); ; time.Sleep(10 * time.Millisecond) {
		require.True(t, time.Now().Before(deadline), "the rollout with retry %v: %+v", retry, r)
		now := time.Since(start)
		for _, p := range operators() {
			switch {
			case !old[p.Name] && framework.PodReady(&p) && r.Ready == 0:
				r.Ready = now
			case old[p.Name] && p.DeletionTimestamp != nil && r.OldStopping == 0:
				r.OldStopping = now
			}
		}
		if h := lease(); h != holder {
			if r.Released == 0 {
				r.Released = now
				require.NoError(t, framework.Env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: framework.MetaName(ns, member)}))
				deleted = time.Now()
			}
			if h != "" && r.Taken == 0 {
				r.Taken, taken = now, time.Now()
			}
		}
		if deleted.IsZero() {
			continue
		}
		var p corev1.Pod
		err := framework.Env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: member}, &p)
		if err != nil && gone.IsZero() {
			gone = time.Now()
		}
		if err == nil && p.UID != memberPod.UID && created.IsZero() {
			created = time.Now()
			if gone.IsZero() {
				gone = created // gone and back between two looks
			}
		}
		if !created.IsZero() && !taken.IsZero() {
			// The new operator can act once it holds the lease and the old Pod is gone.
			from := gone
			if taken.After(from) {
				from = taken
			}
			r.Reacted = nonNeg(created.Sub(from))
			break
		}
	}
	return r
}

// rolloutReport is the docs' section on the operator's rollouts.
func rolloutReport(rs []rolloutResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## Operator rollout\n\n")
	fmt.Fprintf(&b, "The operator installed for one namespace as users deploy it (kustomize/namespaced: a Deployment of one replica with leader election, rolling update with one extra Pod), beside a cluster of 3, rolled out by changing its retry period: in turn to client-go's %v and back to the operator's default. Each moment is from the rollout's start, seen by a poller every 10 ms. When the lease no longer names the old operator a member Pod is deleted; *reaction* is from that Pod gone (its etcd stopped) to the new operator creating it again.\n\n", clientGoRetry)
	fmt.Fprintf(&b, "| new operator's retry period | new Pod Ready | old Pod stopping | lease released | lease taken | hand-over (Ready -> taken) | reaction |\n|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		retry := "default"
		if r.Retry != 0 {
			retry = r.Retry.String()
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", retry, ms(r.Ready), ms(r.OldStopping), ms(r.Released), ms(r.Taken), ms(r.HandOver()), ms(r.Reacted))
	}
	return b.String()
}
