package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/observe"
	"github.com/etcdplan/etcdplan/planner"
	"github.com/etcdplan/etcdplan/planner/render"
)

const statusHelp = `Show an EtcdCluster on one screen: its conditions, its members (role, leader, version,
health, database size, Pod), the plan with the progress of each step, and the last plans.
It reads the EtcdCluster's status and its member Pods through the Kubernetes API.

Usage:
  kubectl-etcd status NAME

Flags:
` + kubeFlagsHelp

// historyShown is how many finished plans status lists.
const historyShown = 5

// status runs `kubectl-etcd status`.
func (c *CLI) status(ctx context.Context, args []string) int {
	var k kubeFlags
	fs := newFlagSet("status")
	k.add(fs)
	name, err := parseName(fs, args)
	if err != nil {
		return c.flagError(err, "status", statusHelp)
	}
	kc, err := k.connect()
	if err != nil {
		return c.fail(err)
	}
	ec := &v1alpha1.EtcdCluster{}
	if err := kc.Get(ctx, client.ObjectKey{Namespace: kc.namespace, Name: name}, ec); err != nil {
		return c.fail(err)
	}
	objs, err := observe.List(ctx, kc, ec)
	if err != nil {
		return c.fail(err)
	}
	if err := writeStatus(c.Stdout, ec, objs, c.now()); err != nil {
		return c.fail(err)
	}
	return ExitOK
}

func (c *CLI) now() time.Time {
	if c.Now == nil {
		return time.Now()
	}
	return c.Now()
}

// writeStatus prints the status screen of a cluster, ages counted from now.
func writeStatus(w io.Writer, ec *v1alpha1.EtcdCluster, objs observe.Objects, now time.Time) error {
	s := &ec.Status
	approval := ec.Spec.UpdateStrategy.Approval
	fmt.Fprintf(w, "EtcdCluster %s/%s\n", ec.Namespace, ec.Name)
	fmt.Fprintf(w, "  Spec:     %d members, etcd %s, approval %s%s, generation %d (observed %d)\n",
		ec.Spec.Replicas, ec.Spec.Version, approval, suspended(ec), ec.Generation, s.ObservedGeneration)
	fmt.Fprintf(w, "  Cluster:  ID %s, cluster version %s, members ready %s\n",
		orNone(s.ClusterID), orNone(s.ClusterVersion), orNone(s.MemberSummary))
	if l := s.LastRecovery; l != nil {
		fmt.Fprintf(w, "  Recovery: %s\n", recovery(l, now))
	}
	for _, a := range s.Alarms {
		fmt.Fprintf(w, "  Alarm:    %s\n", a)
	}
	for _, warning := range s.Warnings {
		fmt.Fprintf(w, "  Warning:  %s\n", render.OneLine(warning))
	}
	writeTLS(w, ec, objs, now)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CONDITION\tSTATUS\tREASON\tSINCE\tMESSAGE")
	for _, cond := range conditionsInOrder(s.Conditions) {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cond.Type, cond.Status, cond.Reason, ago(cond.LastTransitionTime.Time, now), render.OneLine(cond.Message))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := writeMembers(w, ec, objs); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := writePlan(w, ec, now); err != nil {
		return err
	}
	return writeHistory(w, s.History, now)
}

// writeTLS says which sides talk TLS, the Secret applications take a certificate from, and
// when each certificate expires (and is renewed, for those the operator issues).
func writeTLS(w io.Writer, ec *v1alpha1.EtcdCluster, objs observe.Objects, now time.Time) {
	t := ec.Spec.TLS
	if !t.ClientTLS() && !t.PeerTLS() {
		return
	}
	fmt.Fprintf(w, "  TLS:      clients %s, peers %s", t.ClientMode(), t.PeerMode())
	if st := ec.Status.TLS; st != nil && st.ClientURL != "" {
		fmt.Fprintf(w, ", at %s", st.ClientURL)
	}
	if st := ec.Status.TLS; st != nil && st.ClientSecretName != "" {
		fmt.Fprintf(w, ", client certificate for applications in Secret %s", st.ClientSecretName)
	}
	fmt.Fprintln(w)
	writeSwitch(w, observe.Members(objs, ec))
	if ec.Status.TLS == nil {
		return
	}
	if r := ec.Status.TLS.CARotation; r != nil {
		fmt.Fprintf(w, "  Rotation: the cluster's CA is rotated (%s): pass %d of 3, %s\n", r.Requested, r.Pass, passWords[r.Pass])
	}
	for _, c := range ec.Status.TLS.Certificates {
		renew := ""
		if c.RenewAt != nil {
			renew = ", renewed " + in(c.RenewAt.Time, now)
		}
		fmt.Fprintf(w, "  Cert:     %s (%s, issued by %s) expires %s%s\n", c.SecretName, c.Subject, c.Issuer, in(c.NotAfter.Time, now), renew)
	}
}

// passWords say what each pass of a CA rotation does.
var passWords = map[int32]string{
	1: "members restart trusting the old and the new CA",
	2: "every certificate is issued again from the new CA (no restart)",
	3: "members restart trusting the new CA alone",
}

// writeSwitch says, while TLS is switched on or off, how each member that does not serve as the
// spec says yet serves clients and peers.
func writeSwitch(w io.Writer, members []planner.Member) {
	var serving []string
	for _, m := range members {
		if m.Pod != nil && m.Pod.Listen != (plan.Listen{}) {
			serving = append(serving, fmt.Sprintf("%s (clients %s, peers %s)", m.Name, m.Pod.Listen.Client, m.Pod.Listen.Peer))
		}
	}
	if len(serving) > 0 {
		fmt.Fprintf(w, "  Switch:   TLS is being switched; not yet as the spec says: %s\n", strings.Join(serving, ", "))
	}
}

// in says when a moment comes, or came: "in 59d", "3m ago".
func in(t, now time.Time) string {
	if t.Before(now) {
		return ago(t, now)
	}
	return "in " + duration.HumanDuration(t.Sub(now))
}

// conditionsInOrder puts the kstatus conditions first: Ready, Reconciling, Stalled.
func conditionsInOrder(conds []metav1.Condition) []metav1.Condition {
	rank := func(c metav1.Condition) int {
		if i := slices.Index([]string{"Ready", "Reconciling", "Stalled"}, c.Type); i >= 0 {
			return i
		}
		return 3
	}
	out := slices.Clone(conds)
	slices.SortStableFunc(out, func(a, b metav1.Condition) int { return rank(a) - rank(b) })
	return out
}

func suspended(ec *v1alpha1.EtcdCluster) string {
	if ec.Spec.Suspend {
		return ", SUSPENDED"
	}
	return ""
}

// writeMembers lists the members etcd knows (as last recorded in status) and the members
// that have a Pod or a volume claim but have not joined.
func writeMembers(w io.Writer, ec *v1alpha1.EtcdCluster, objs observe.Objects) error {
	pods := map[string]*corev1.Pod{}
	for i := range objs.Pods {
		pods[objs.Pods[i].Labels[v1alpha1.LabelMember]] = &objs.Pods[i]
	}
	members := observe.Members(objs, ec)
	kube := map[string]planner.Member{}
	for _, m := range members {
		kube[m.Name] = m
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tID\tROLE\tVERSION\tHEALTHY\tDB SIZE\tPOD\tRESTARTS\tNODE")
	listed := map[string]bool{}
	for _, m := range ec.Status.Members {
		listed[m.Name] = true
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", m.Name, orDash(m.ID), role(m), orDash(m.Version),
			health(m), size(m.DBSize), podCells(pods[m.Name], kube[m.Name]))
	}
	for _, m := range members {
		if !listed[m.Name] {
			fmt.Fprintf(tw, "%s\t-\tnot a member\t-\t-\t-\t%s\n", m.Name, podCells(pods[m.Name], m))
		}
	}
	if len(listed) == 0 && len(members) == 0 {
		fmt.Fprintln(tw, "(no members yet)")
	}
	return tw.Flush()
}

func role(m v1alpha1.MemberStatus) string {
	switch {
	case m.Leader:
		return "leader"
	case m.Role == v1alpha1.RoleLearner:
		return "learner"
	case m.ID == "":
		return "-"
	}
	return "follower"
}

// podCells are the POD, RESTARTS and NODE cells of a member.
func podCells(p *corev1.Pod, m planner.Member) string {
	if p == nil {
		if m.PVC != nil {
			return "none (volume kept)\t-\t-"
		}
		return "none\t-\t-"
	}
	restarts := int32(0)
	for _, cs := range p.Status.ContainerStatuses {
		restarts += cs.RestartCount
	}
	return fmt.Sprintf("%s\t%d\t%s", podState(p, m.Pod), restarts, orDash(p.Spec.NodeName))
}

func podState(p *corev1.Pod, m *planner.Pod) string {
	switch {
	case m == nil:
		return string(p.Status.Phase) // finished for good: the planner replaces it
	case m.Deleting:
		return "Terminating"
	case m.DataLost:
		return "DataLost"
	case m.PreflightError != "":
		return "PreflightFailed"
	case m.Ready:
		return "Ready " + m.IP
	case m.Running:
		return "Running " + m.IP
	}
	return string(p.Status.Phase)
}

// writePlan prints the recorded plan with the state of each step.
func writePlan(w io.Writer, ec *v1alpha1.EtcdCluster, now time.Time) error {
	p := ec.Status.Plan
	switch {
	case p == nil && len(ec.Status.History) > 0:
		_, err := fmt.Fprintln(w, "Plan: none pending.")
		return err
	case p == nil:
		_, err := fmt.Fprintln(w, "Plan: none yet.")
		return err
	case p.Blocked != nil:
		_, err := fmt.Fprintf(w, "Plan %s: blocked (%s)\n  %s\n", p.ID, p.Blocked.Reason, p.Blocked.Message)
		return err
	case len(p.Steps) == 0:
		_, err := fmt.Fprintf(w, "Plan %s: no changes, the cluster matches the spec.\n", p.ID)
		return err
	}
	fmt.Fprintf(w, "Plan %s: %s, %s, for generation %d, made %s\n", p.ID, p.Phase, p.Summary, p.Generation, ago(p.CreatedAt.When(), now))
	if p.Phase == v1alpha1.PlanAwaitingApproval {
		fmt.Fprintf(w, "  Review the steps, then: kubectl etcd approve %s --plan %s\n", ec.Name, p.ID)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "#\tACTION\tMEMBER\tTARGET/VERSION\tPRECONDITION\tSTATE\tSTARTED\tMESSAGE")
	for i, step := range p.Steps {
		state, started, msg := string(v1alpha1.StepPending), "-", render.OneLine(step.Reason)
		if i < len(p.Progress) {
			pr := p.Progress[i]
			state, started = string(pr.State), ago(pr.StartedAt.When(), now)
			if pr.Message != "" {
				msg = render.OneLine(pr.Message)
			}
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\n", i+1, strings.Join(render.StepCells(step), "\t"), state, started, msg)
	}
	return tw.Flush()
}

func writeHistory(w io.Writer, history []v1alpha1.PlanRecord, now time.Time) error {
	if len(history) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nHistory (newest first):\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PLAN\tPHASE\tSTEPS\tFINISHED\tMESSAGE\tACTIONS")
	for _, r := range history[:min(len(history), historyShown)] {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, r.Phase, r.Steps, ago(r.FinishedAt.When(), now), orDash(render.OneLine(r.Message)), orDash(r.Actions))
	}
	return tw.Flush()
}

// recovery says what the last recovery from quorum loss did and how it ended.
func recovery(l *v1alpha1.RecoveryStatus, now time.Time) string {
	what := fmt.Sprintf("%s restarted alone with --force-new-cluster", l.Member)
	if l.Action == string(plan.RestoreFromBackup) {
		what = fmt.Sprintf("restored from EtcdBackup %s on seed %s", l.Backup, l.Member)
	}
	if l.FinishedAt == nil {
		return fmt.Sprintf("%s (plan %s), started %s, not answering through a quorum yet", what, l.Plan, ago(l.StartedAt.When(), now))
	}
	return fmt.Sprintf("%s (plan %s), started %s, answered as cluster %s after %s", what, l.Plan, ago(l.StartedAt.When(), now), l.ClusterID,
		l.FinishedAt.Sub(l.StartedAt.Time).Round(time.Millisecond))
}

// ago says how long ago t was, as kubectl prints ages: "5m2s ago".
func ago(t time.Time, now time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return duration.HumanDuration(now.Sub(t)) + " ago"
}

func size(bytes int64) string {
	const k = 1024
	switch {
	case bytes <= 0:
		return "-"
	case bytes < k*k:
		return fmt.Sprintf("%.0f KiB", float64(bytes)/k)
	}
	return fmt.Sprintf("%.1f MiB", float64(bytes)/(k*k))
}

// health is yes or no, and says when a member that is not healthy may still be up.
func health(m v1alpha1.MemberStatus) string {
	if !m.Healthy && m.Silent {
		return "no (silent)"
	}
	return yesNo(m.Healthy)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
