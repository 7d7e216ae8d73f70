package observe

import (
	"fmt"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/agent"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/planner"
)

// Members joins a cluster's member Pods and volume claims by member name. A Pod that
// ended (member Pods never restart in place) is marked Failed: StartMember replaces it,
// unless its preflight check found the member's data gone.
func Members(objs Objects, c *v1alpha1.EtcdCluster) []planner.Member {
	pods, pvcs := objs.Pods, objs.PVCs
	byName := map[string]*planner.Member{}
	get := func(name string) *planner.Member {
		if m, ok := byName[name]; ok {
			return m
		}
		m := &planner.Member{Name: name}
		byName[name] = m
		return m
	}
	for i := range pods {
		p := &pods[i]
		name := p.Labels[v1alpha1.LabelMember]
		if name == "" {
			continue
		}
		if m := get(name); m.Pod == nil || m.Pod.Failed { // a Pod that runs wins over one that ended
			m.Pod = pod(p)
			if l := resources.Served(p); l != resources.Serving(c, plan.Listen{}) && l != (plan.Listen{}) {
				m.Pod.Listen = l // started before TLS was switched on, or while it was
			}
			m.Pod.Restoring = restoring(objs.Backups, p.Annotations[vocab.AnnotationRestoreSeed])
		}
	}
	claims := map[string]*corev1.PersistentVolumeClaim{} // by member, for their check Pods
	for i := range pvcs {
		c := &pvcs[i]
		name := c.Labels[v1alpha1.LabelMember]
		if name == "" {
			continue
		}
		claims[name] = c
		class := ptr.Deref(c.Spec.StorageClassName, "")
		req := c.Spec.Resources.Requests[corev1.ResourceStorage]
		get(name).PVC = &planner.PVC{
			Bound:            c.Status.Phase == corev1.ClaimBound,
			Deleting:         c.DeletionTimestamp != nil,
			MemberID:         c.Annotations[vocab.AnnotationMemberID],
			Version:          c.Annotations[vocab.AnnotationRanVersion],
			PeerURL:          c.Annotations[vocab.AnnotationPeerURL],
			ForceNewCluster:  markedForID(c.Annotations, vocab.AnnotationForceNewCluster),
			SurvivorSnapshot: markedForID(c.Annotations, vocab.AnnotationSurvivorSnapshot),
			Restoring:        restoring(objs.Backups, c.Annotations[vocab.AnnotationRestoreSeed]),
			Retained:         c.Labels[v1alpha1.LabelRetained] != "",
			StorageClass:     class,
			Bytes:            req.Value(),
		}
		if ok, known := objs.Expandable[class]; known {
			get(name).PVC.Expandable = &ok
		}
	}
	for i := range objs.Checks {
		p := &objs.Checks[i]
		m := byName[p.Annotations[vocab.AnnotationMember]]
		if m != nil && p.DeletionTimestamp == nil && metav1.IsControlledBy(p, c) && CheckOf(claims[m.Name], p) {
			m.Check = &planner.DataCheck{DataLost: CheckFoundLost(p), PodGone: besideGone(pods, p)}
		}
	}
	out := make([]planner.Member, 0, len(byName))
	for _, m := range byName {
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func pod(p *corev1.Pod) *planner.Pod {
	out := &planner.Pod{
		Failed:       PodEnded(p),
		Deleting:     p.DeletionTimestamp != nil,
		Seed:         p.Annotations[vocab.AnnotationSeed] == "true",
		Version:      p.Annotations[vocab.AnnotationVersion],
		ConfigHash:   p.Annotations[vocab.AnnotationConfigHash],
		ConfigFields: p.Annotations[vocab.AnnotationConfigFields],
		Trust:        p.Annotations[vocab.AnnotationTrust],
		IP:           p.Status.PodIP,
	}
	out.Ready = PodReady(p)
	out.Running = EtcdRunning(p)
	for _, cs := range p.Status.InitContainerStatuses {
		if cs.Name == vocab.ContainerPreflight && (exitedWith(cs.State, agent.ExitDataLost) || exitedWith(cs.LastTerminationState, agent.ExitDataLost)) {
			out.DataLost = true
		}
	}
	if !out.DataLost {
		out.PreflightError = PreflightError(p)
	}
	return out
}

// CheckOf reports whether a check Pod reads its member's volume claim as it is: claim (the
// member's, nil when it has none) carries the UID the Pod records, and is not being
// deleted. A reading of a claim since replaced says nothing of the new one; one of a claim
// going is not needed, and its Pod must go for the claim to (a claim in use by a Pod is
// kept).
func CheckOf(claim *corev1.PersistentVolumeClaim, p *corev1.Pod) bool {
	return claim != nil && string(claim.UID) == p.Annotations[vocab.AnnotationClaimUID] && claim.DeletionTimestamp == nil
}

// besideGone: the member Pod a check Pod was made beside is gone or ended.
func besideGone(pods []corev1.Pod, check *corev1.Pod) bool {
	uid := check.Annotations[vocab.AnnotationBesidePod]
	i := slices.IndexFunc(pods, func(p corev1.Pod) bool { return string(p.UID) == uid })
	return i < 0 || PodEnded(&pods[i])
}

// PodEnded: the Pod's containers stopped for good (member Pods never restart in place).
func PodEnded(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded
}

// CheckFoundLost: the check Pod's preflight found the member's data directory empty.
func CheckFoundLost(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == vocab.ContainerPreflight && exitedWith(cs.State, agent.ExitDataLost) {
			return true
		}
	}
	return false
}

// PreflightError says why a Pod's preflight check failed other than by finding its data
// gone (its data directory could not be read, or the check itself failed): the exit code
// and the check's own words. "" when it did not fail so, or failed on trust bundles that
// changed since the Pod was made (the Pod ended, and a new one mounts them as they are).
func PreflightError(p *corev1.Pod) string {
	for _, cs := range p.Status.InitContainerStatuses {
		if cs.Name != vocab.ContainerPreflight {
			continue
		}
		for _, s := range []corev1.ContainerState{cs.State, cs.LastTerminationState} {
			if t := s.Terminated; t != nil && t.ExitCode != 0 && t.ExitCode != agent.ExitDataLost && t.ExitCode != agent.ExitTrustChanged {
				if msg := strings.TrimSpace(t.Message); msg != "" {
					return fmt.Sprintf("exit code %d: %s", t.ExitCode, msg)
				}
				return fmt.Sprintf("exit code %d", t.ExitCode)
			}
		}
	}
	return ""
}

// EtcdRunning: the Pod's etcd container runs.
func EtcdRunning(p *corev1.Pod) bool {
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == vocab.ContainerEtcd {
			return cs.State.Running != nil
		}
	}
	return false
}

// Stopping counts the member Pods that are going while their etcd may still run: they are
// no endpoint, but their etcd may still answer its peers.
func Stopping(pods []corev1.Pod) int {
	n := 0
	for i := range pods {
		if pods[i].DeletionTimestamp != nil && EtcdRunning(&pods[i]) {
			n++
		}
	}
	return n
}

// Endpoints are the client URLs (by member name) of the member Pods that run etcd, at their
// Pod IPs, which work from inside and outside the cluster network alike: https when every
// one serves TLS (one connection dials all one way), plain text while TLS is being
// switched on and some do not serve it yet.
func Endpoints(pods []corev1.Pod) map[string]string {
	var serving []*corev1.Pod
	tls := true
	for i := range pods {
		p := &pods[i]
		if p.Status.PodIP != "" && p.DeletionTimestamp == nil && EtcdRunning(p) {
			serving, tls = append(serving, p), tls && servesTLS(p)
		}
	}
	out := map[string]string{}
	for _, p := range serving {
		out[p.Name] = clientURL(p, tls)
	}
	return out
}

// ClientURL is the etcd client URL of a Pod at its Pod IP, https when the Pod says it
// serves TLS (alone, or beside plain text while TLS is switched on).
func ClientURL(p *corev1.Pod) string {
	return clientURL(p, servesTLS(p))
}

func servesTLS(p *corev1.Pod) bool {
	s := p.Annotations[vocab.AnnotationClientScheme]
	return s == plan.ListenTLS || s == plan.ListenBoth
}

// Scheme is how endpoints are dialed: all one way.
func Scheme(endpoints map[string]string) string {
	for _, u := range endpoints {
		scheme, _, _ := strings.Cut(u, "://")
		return scheme
	}
	return ""
}

func clientURL(p *corev1.Pod, tls bool) string {
	return vocab.Scheme(tls) + "://" + net.JoinHostPort(p.Status.PodIP, strconv.Itoa(vocab.ClientPort))
}

func exitedWith(s corev1.ContainerState, code int32) bool {
	return s.Terminated != nil && s.Terminated.ExitCode == code
}

// Recorded is the membership last recorded in status.
func Recorded(c *v1alpha1.EtcdCluster) []planner.RecordedMember {
	var out []planner.RecordedMember
	for _, m := range c.Status.Members {
		if m.ID != "" {
			out = append(out, planner.RecordedMember{Name: m.Name, ID: m.ID, Learner: m.Role == v1alpha1.RoleLearner})
		}
	}
	return out
}

// FromStatus rebuilds etcd's view from the members recorded in status, for tools that
// read the cluster through the Kubernetes API alone.
func FromStatus(c *v1alpha1.EtcdCluster) *planner.EtcdView {
	if len(c.Status.Members) == 0 {
		return nil
	}
	// Status records what the operator last read; it re-reads etcd before it acts. Its
	// membership was read through a quorum, but its health is of the last look, and a look
	// that found no leader read nothing through a quorum: the view is then stale.
	v := &planner.EtcdView{ClusterID: c.Status.ClusterID, ClusterVersion: c.Status.ClusterVersion, Auth: authFromStatus(c)}
	for _, m := range c.Status.Members {
		if m.ID == "" {
			continue
		}
		v.Members = append(v.Members, planner.EtcdMember{ID: m.ID, Name: m.Name, PeerURLs: []string{resources.PeerURL(c, m.Name)},
			Learner: m.Role == v1alpha1.RoleLearner, Answering: m.Healthy, Silent: m.Silent, Version: m.Version, DBSize: m.DBSize})
		if m.Leader {
			v.LeaderID, v.Linearizable = m.ID, true
		}
	}
	for i := range v.Members {
		if v.Members[i].Answering {
			v.Members[i].Leader = v.LeaderID
		}
	}
	return v
}

// authFromStatus is whether etcd's authentication is on as status last recorded it: off for
// a cluster that never had it, unknown for one restored from a snapshot (which brings its
// auth flag) and never read since.
func authFromStatus(c *v1alpha1.EtcdCluster) *bool {
	switch a := c.Status.Auth; {
	case a != nil && a.ClusterID == c.Status.ClusterID:
		return new(a.Enabled)
	case a == nil && c.Status.RestoredFrom == "" && c.Status.PreviousClusterID == "":
		return new(false)
	}
	return nil
}

// PodReady: the Pod's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// FailedContainer says which of the containers ended in failure and how ("restore-fetch
// (exit code 1): ..."), leaving out those named skip; "" when none did.
func FailedContainer(statuses []corev1.ContainerStatus, skip ...string) string {
	for _, cs := range statuses {
		if t := cs.State.Terminated; t != nil && t.ExitCode != 0 && !slices.Contains(skip, cs.Name) {
			return fmt.Sprintf("%s (exit code %d): %s", cs.Name, t.ExitCode, strings.TrimSpace(t.Message))
		}
	}
	return ""
}

// markedForID: a claim carries a recovery's mark of the member ID it records. Only that ID
// counts: a mark of an earlier member under the name is not this one's.
func markedForID(annotations map[string]string, key string) bool {
	return annotations[key] != "" && annotations[key] == annotations[vocab.AnnotationMemberID]
}
