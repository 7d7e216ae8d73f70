package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	kwait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/agent"
	"github.com/etcdplan/etcdplan/executor/backup"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/test/framework"
)

// benchMark is a moment of a scenario after its start, in the operator's run and in the
// floor's (negative: not reached, or not a moment of that run).
type benchMark struct {
	What            string
	Operator, Floor time.Duration
}

// The quorum-loss scenarios' cluster: its own name, so that it comes and goes beside demo.
const qlCluster = "ql"

// quorumLosses measures both recoveries from quorum loss, runs times each: two members'
// volumes wiped (the survivor's snapshot is stored, and three new members restore it at
// once), then all three (three new members restore the backup taken before at once).
func (b *bench) quorumLosses(runs int) []benchResult {
	var results []benchResult
	for _, all := range []bool{false, true} {
		for i := 1; i <= runs; i++ {
			r := b.quorumLoss(all, i)
			r.Run, r.Of = i, runs
			results = append(results, r)
		}
	}
	return results
}

// quorumLoss measures one recovery from quorum loss of a cluster of three whose spec lets
// it run without approval, with a backup destination known (a suspended schedule to a
// claim): from the fault (the volumes wiped, their Pods deleted) until the cluster has three
// voters again, none of those wiped. The floor does the same work with nothing in between:
// it knows what was lost, so it cuts the grace period of the wiped members' old Pods to a
// second, and once they are gone it stores the survivor's snapshot on the claim with the
// operator's snapshot Pod, stops the survivor, and restores the snapshot on three new
// members at once (or, with all three wiped, its own snapshot taken as the operator's backup
// was). It waits for those old Pods as the operator must: until their etcd processes end
// they may still commit writes with the survivor (a wiped disk's files stay open), which a
// snapshot taken sooner would lose, and with all three wiped the old members are still a
// cluster that could serve beside the new one.
func (b *bench) quorumLoss(all bool, run int) benchResult {
	t, ctx := b.t, context.Background()
	name, wiped := "quorum loss, 2 of 3 wiped", []string{qlCluster + "-1", qlCluster + "-2"}
	if all {
		name, wiped = "quorum loss, all 3 wiped", []string{qlCluster + "-0", qlCluster + "-1", qlCluster + "-2"}
	}
	const version = "3.6.16"
	for _, ns := range []string{b.opNS, b.floorNS} {
		ensureClaim(t, ns, "backups")
	}
	ensureSchedule(t, b.opNS, qlCluster, "backups")
	c := framework.NewCluster(b.opNS, qlCluster, 3)
	c.Spec.Recovery = &v1alpha1.RecoverySpec{QuorumLoss: v1alpha1.QuorumLossAutomatic, AutoApproveDataLoss: true}
	require.NoError(t, framework.Env.Client.Create(ctx, c))
	fl := newFloor(t, b.floorNS, c)
	fl.bootstrap(3, version)
	framework.WaitReady(t, b.opNS, qlCluster)
	var source v1alpha1.SnapshotSource // the floor's snapshot, for a restore
	if all {
		backup := fmt.Sprintf("%s-before-%d", qlCluster, run)
		framework.CreateBackup(t, b.opNS, backup, framework.ClaimDest("backups"), func(bk *v1alpha1.EtcdBackup) { bk.Spec.ClusterRef.Name = qlCluster })
		framework.WaitBackup(t, b.opNS, backup, v1alpha1.BackupSucceeded)
		source = fl.snapshot(qlCluster+"-0", "backups", fmt.Sprintf("floor/%s-%d.db", qlCluster, run))
	}

	var floorStart time.Time
	floorAt := map[string]time.Duration{}
	mark := func(what string) { floorAt[what] = time.Since(floorStart) }
	var ready *readyWatch
	var opPods, floorPods *podTrace
	var opTrace []timedNote
	seeds := []string{qlCluster + "-3", qlCluster + "-4", qlCluster + "-5"}
	var cpu int64 // the operator's, in clock ticks, from the fault until its cluster settled
	var opSettled time.Time
	r := b.run(name, qlCluster, 3, version, func() {
		cpu = cpuTicks(t, b.op.PID())
		opPods = tracePods(t, b.opNS)
		ready = b.watchReady(b.opNS, qlCluster, 3, wiped)
		b.wipe(b.opNS, wiped...)
	}, func() {
		opTrace = opPods.stop()
		floorPods = tracePods(t, b.floorNS)
		floorStart = time.Now()
		b.wipe(b.floorNS, wiped...)
		for _, m := range wiped {
			delete(fl.members, m)
			require.NoError(t, client.IgnoreNotFound(framework.Env.Client.Delete(ctx, resources.MemberPVC(fl.c, m))))
		}
		for _, m := range wiped { // as the operator's look cuts the grace of member Pods going while no quorum can form (planner.StopAtOnce)
			fl.deletePod(m, false, client.GracePeriodSeconds(1))
		}
		fl.gone(wiped...)
		mark("recovery started")
		if !all {
			survivor := qlCluster + "-0"
			source = fl.snapshotByPod(survivor, "backups", fmt.Sprintf("floor-survivor-%d", run))
			mark("snapshot stored")
			// As the operator stops a member while no quorum can form: no graceful stop,
			// which could only wait out etcd's timeouts (planner.StopAtOnce).
			fl.deletePod(survivor, true, client.GracePeriodSeconds(1))
			fl.retain(survivor)
			delete(fl.members, survivor)
		}
		fl.restoreAll(seeds, version, source)
		mark("restore applied")
		fl.healthy(seeds[0])
		mark("quorum answers")
	}, func(ns string) bool {
		gone := !slices.ContainsFunc(append(wiped, qlCluster+"-0"), func(m string) bool { return b.podSeen(ns, m) })
		if gone && ns == b.opNS && opSettled.IsZero() {
			opSettled, cpu = time.Now(), cpuTicks(t, b.op.PID())-cpu
		}
		return gone
	})
	r.Ready = ready.stop()
	logNotes(t, name+", operator's status", r.Start, r.Notes)
	t.Logf("bench: %s: the operator used %d ms of CPU until its cluster settled", name, cpu*10)
	logNotes(t, name+", operator's Pods", r.Start, opTrace)
	logNotes(t, name+", floor's Pods", floorStart, floorPods.stop())
	r.Marks = quorumMarks(r, floorAt)
	for _, m := range r.Marks {
		t.Logf("bench: %s: %s: operator %s, floor %s", name, m.What, markMS(m.Operator), markMS(m.Floor))
	}
	t.Logf("bench: %s: fault -> Ready (the operator's status) %s", name, ms(r.Ready))
	b.deleteCluster(qlCluster)
	return r
}

// quorumMarks are the moments of a recovery: when the operator's plan reached its recovery
// (it had shown that the data is lost; the floor knows from the start, and starts once the
// wiped members' old Pods are gone), when the survivor's
// snapshot was stored, when the restore was applied (the floor: the seeds' Pods created),
// when the restored cluster answered through a quorum, and when the run ended.
func quorumMarks(r benchResult, floorAt map[string]time.Duration) []benchMark {
	since := func(at time.Time) time.Duration {
		if at.IsZero() {
			return -1
		}
		return at.Sub(r.Start)
	}
	var first, snap, restore *stepTiming
	for i := range r.Steps {
		st := &r.Steps[i]
		if !plan.Action(st.Action).Recovers() || st.Applied.IsZero() {
			continue
		}
		if first == nil && !early(st) { // an early snapshot decides nothing: the recovery starts once the data is shown lost
			first = st
		}
		switch plan.Action(st.Action) {
		case plan.SnapshotSurvivor:
			if !early(st) {
				snap = st
			}
		case plan.RestoreFromBackup, plan.ForceNewCluster:
			restore = st
		}
	}
	marks := []benchMark{{What: "recovery started", Operator: -1}, {What: "snapshot stored", Operator: -1},
		{What: "restore applied", Operator: -1}, {What: "quorum answers", Operator: -1}}
	if first != nil {
		marks[0].Operator = since(first.Started)
	}
	if snap != nil {
		marks[1].Operator = since(snap.Finished)
	}
	if restore != nil {
		marks[2].Operator, marks[3].Operator = since(restore.Applied), since(restore.Finished)
	}
	for i := range marks {
		marks[i].Floor = -1
		if d, ok := floorAt[marks[i].What]; ok {
			marks[i].Floor = d
		}
	}
	return append(marks, benchMark{What: "settled", Operator: r.Operator, Floor: r.Floor})
}

// early: the step is a survivor's snapshot asked for as soon as no quorum answered.
func early(st *stepTiming) bool { return st.Precondition == string(plan.PreQuorumDown) }

func markMS(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return ms(d)
}

// wipe deletes the data of members' volumes, as lost disks would, then their Pods: every
// volume wiped before any Pod goes, so no member is started again on data about to vanish.
func (b *bench) wipe(ns string, members ...string) {
	ctx := context.Background()
	for _, m := range members {
		require.NoError(b.t, framework.Env.Stack.WipePVC(ctx, ns, m))
	}
	for _, m := range members {
		require.NoError(b.t, client.IgnoreNotFound(framework.Env.Client.Delete(ctx, &corev1.Pod{ObjectMeta: framework.MetaName(ns, m)})))
	}
}

// readyWatch polls a cluster of the operator's until it is Ready with its replicas as
// members, none of those gone.
type readyWatch struct {
	start  time.Time
	at     time.Duration
	cancel context.CancelFunc
	done   chan struct{}
}

func (b *bench) watchReady(ns, cluster string, replicas int, gone []string) *readyWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &readyWatch{start: time.Now(), at: -1, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			at := time.Now()
			var c v1alpha1.EtcdCluster
			if b.kube.Get(ctx, client.ObjectKey{Namespace: ns, Name: cluster}, &c) == nil && framework.Ready(&c) &&
				len(c.Status.Members) == replicas && !slices.ContainsFunc(c.Status.Members, func(m v1alpha1.MemberStatus) bool {
				return slices.Contains(gone, m.Name)
			}) {
				w.at = at.Sub(w.start)
				return
			}
			time.Sleep(time.Until(at.Add(20 * time.Millisecond)))
		}
	}()
	return w
}

// stop returns how long after its start the cluster was first seen Ready (-1: not seen).
func (w *readyWatch) stop() time.Duration {
	w.cancel()
	<-w.done
	return w.at
}

// ensureSchedule creates a suspended EtcdBackupSchedule of a cluster to a claim, unless it
// exists: the destination a recovery stores a survivor's snapshot at.
func ensureSchedule(t require.TestingT, ns, cluster, claim string) {
	s := &v1alpha1.EtcdBackupSchedule{ObjectMeta: framework.MetaName(ns, cluster+"-nightly")}
	s.Spec.ClusterRef.Name, s.Spec.Schedule, s.Spec.Suspend = cluster, "@daily", true
	s.Spec.Destination = framework.ClaimDest(claim)
	if err := framework.Env.Client.Create(context.Background(), s); !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// ensureClaim creates a volume claim of 1 GiB to back up to, unless it exists.
func ensureClaim(t require.TestingT, ns, name string) {
	err := framework.Env.Client.Create(context.Background(), &corev1.PersistentVolumeClaim{ObjectMeta: framework.MetaName(ns, name),
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}}}})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
}

// quorumReport is the table of the recoveries' moments, the operator's beside the floor's.
func quorumReport(results []benchResult) string {
	var b strings.Builder
	for _, r := range results {
		if len(r.Marks) == 0 {
			continue
		}
		if b.Len() == 0 {
			b.WriteString("\n| recovery from quorum loss: seconds after the fault, operator (floor) |")
			for _, m := range r.Marks {
				b.WriteString(" " + m.What + " |")
			}
			b.WriteString(" Ready (operator's status) |\n|---|" + strings.Repeat("---|", len(r.Marks)+1) + "\n")
		}
		fmt.Fprintf(&b, "| %s |", r.title())
		for _, m := range r.Marks {
			fmt.Fprintf(&b, " %s (%s) |", secs(m.Operator), secs(m.Floor))
		}
		fmt.Fprintf(&b, " %s |\n", secs(r.Ready))
	}
	return b.String()
}

func secs(d time.Duration) string {
	if d < 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", d.Seconds())
}

// restoreAll starts a cluster anew on new members that each restore a snapshot, in Pods
// rendered as the operator's: each fetches the snapshot and restores it with etcdutl, with
// every member in its initial cluster, before etcd starts.
func (f *floor) restoreAll(names []string, version string, source v1alpha1.SnapshotSource) {
	var initial []string
	for _, n := range names {
		initial = append(initial, n+"="+resources.PeerURL(f.c, n))
	}
	for _, n := range names {
		f.ordinals = max(f.ordinals, vocab.Ordinal(f.c.Name, n)+1)
		f.create(resources.MemberSpec{Name: n, Version: version, Seed: true, InitialCluster: initial,
			Restore: &resources.Restore{From: source.URI(source.Key), Source: source}})
	}
}

// retain labels a member's claim as the operator labels a survivor's whose cluster was
// restored: kept, and no longer the cluster's.
func (f *floor) retain(name string) {
	ctx, cancel := f.ctx()
	defer cancel()
	pvc := resources.MemberPVC(f.c, name)
	patch := client.MergeFrom(pvc.DeepCopy())
	pvc.Labels[v1alpha1.LabelRetained] = "true"
	require.NoError(f.t, framework.Env.Client.Patch(ctx, pvc, patch))
}

// snapshotByPod stores a snapshot of a member on a claim with the Pod the operator's backup
// of it runs, rendered by the same code (only a Pod that mounts a claim writes to it), and
// returns where: the key the Pod says it stored.
func (f *floor) snapshotByPod(member, claim, name string) v1alpha1.SnapshotSource {
	ctx, cancel := f.ctx()
	defer cancel()
	cli := f.client(member)
	defer cli.Close()
	st, err := cli.Status(ctx, cli.Endpoints()[0])
	require.NoError(f.t, err)
	b := &v1alpha1.EtcdBackup{ObjectMeta: framework.MetaName(f.c.Namespace, name)}
	b.Spec.Destination = framework.ClaimDest(claim)
	p := resources.SnapshotPod(b, f.c, f.images(), agent.Snapshot{Endpoint: f.endpoint(member), Member: member, MemberID: etcd.ID(st.Header.MemberId),
		ClusterID: etcd.ID(st.Header.ClusterId), Namespace: f.c.Namespace, Cluster: f.c.Name, At: time.Now(), Unique: "floor"})
	require.NoError(f.t, framework.Env.Client.Create(ctx, p))
	defer func() { _ = framework.Env.Client.Delete(context.Background(), p) }()
	var taken backup.Taken
	require.NoError(f.t, kwait.PollUntilContextCancel(ctx, floorPoll, true, func(ctx context.Context) (bool, error) {
		if err := framework.Env.Client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return false, nil
		}
		if p.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("the snapshot Pod %s failed", p.Name)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && p.Status.Phase == corev1.PodSucceeded {
				return true, json.Unmarshal([]byte(t.Message), &taken)
			}
		}
		return false, nil
	}), "the snapshot Pod %s stores the snapshot of %s", p.Name, member)
	return v1alpha1.SnapshotSource{BackupDestination: b.Spec.Destination, Key: taken.Key}
}

// snapshot stores a snapshot of a member's data on a claim of the floor's namespace, where
// a backup to framework.ClaimDest(claim) puts them, and returns where.
func (f *floor) snapshot(member, claim, key string) v1alpha1.SnapshotSource {
	ctx, cancel := f.ctx()
	defer cancel()
	var dir string
	require.Eventually(f.t, func() bool {
		d, err := framework.Env.Stack.ClaimDir(ctx, f.c.Namespace, claim)
		dir = d
		return err == nil
	}, time.Minute, floorPoll, "claim %s is bound", claim)
	dest := framework.ClaimDest(claim)
	path := filepath.Join(dir, dest.PVC.SubPath, filepath.FromSlash(key))
	require.NoError(f.t, os.MkdirAll(filepath.Dir(path), 0o755))
	cli := f.client(member)
	defer cli.Close()
	rc, err := cli.Snapshot(ctx)
	require.NoError(f.t, err)
	defer rc.Close()
	out, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	require.NoError(f.t, err)
	_, err = io.Copy(out, rc)
	require.NoError(f.t, err)
	require.NoError(f.t, out.Close())
	return v1alpha1.SnapshotSource{BackupDestination: dest, Key: key}
}

// podTrace records what the API server's watch shows of a namespace's Pods, each fact once
// per Pod: created, scheduled, an init container ended, running, ready, ended, deleting,
// gone. It tells a recovery's waits on Kubernetes from the operator's own.
type podTrace struct {
	start  time.Time
	mu     sync.Mutex
	notes  []timedNote
	seen   map[types.UID]map[string]bool
	cancel context.CancelFunc
	done   chan struct{}
}

func tracePods(t *testing.T, ns string) *podTrace {
	ctx, cancel := context.WithCancel(context.Background())
	pods := kubernetes.NewForConfigOrDie(framework.Env.Stack.RESTConfig()).CoreV1().Pods(ns)
	list, err := pods.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	require.NoError(t, err)
	pt := &podTrace{start: time.Now(), seen: map[types.UID]map[string]bool{}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(pt.done)
		defer w.Stop()
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			facts := []string{"created"}
			if p.Spec.NodeName != "" {
				facts = append(facts, "scheduled on "+p.Spec.NodeName)
			}
			for _, cs := range p.Status.InitContainerStatuses {
				if term := cs.State.Terminated; term != nil {
					facts = append(facts, fmt.Sprintf("init container %s exited %d", cs.Name, term.ExitCode))
				}
			}
			if p.Status.Phase != corev1.PodPending && p.Status.Phase != "" {
				facts = append(facts, "phase "+string(p.Status.Phase))
			}
			if framework.PodReady(p) {
				facts = append(facts, "ready")
			}
			if p.DeletionTimestamp != nil {
				facts = append(facts, "deleting")
			}
			if ev.Type == watch.Deleted {
				facts = append(facts, "gone")
			}
			pt.mu.Lock()
			if pt.seen[p.UID] == nil {
				pt.seen[p.UID] = map[string]bool{}
			}
			for _, f := range facts {
				if !pt.seen[p.UID][f] {
					pt.seen[p.UID][f] = true
					pt.notes = append(pt.notes, timedNote{At: time.Now(), Note: fmt.Sprintf("Pod %s (%s): %s", p.Name, p.UID[:8], f)})
				}
			}
			pt.mu.Unlock()
		}
	}()
	return pt
}

// stop ends the watch and returns what it saw.
func (pt *podTrace) stop() []timedNote {
	pt.cancel()
	<-pt.done
	return pt.notes
}

// logNotes logs notes, each at its time after start.
func logNotes(t *testing.T, what string, start time.Time, notes []timedNote) {
	for _, n := range notes {
		t.Logf("bench: %s: %s %s", what, ms(n.At.Sub(start)), n.Note)
	}
}
