// Package resources renders the Kubernetes objects of an etcd cluster: member Pods and
// volume claims, the headless and client Services, and the PodDisruptionBudget.
package resources

import (
	"fmt"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
)

// Labels and annotations the operator puts on the objects it owns.
const (
	LabelCluster   = "etcdplan.io/cluster"
	LabelMember    = "etcdplan.io/member"
	LabelRole      = "etcdplan.io/role"
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"

	AnnotationConfigHash = "etcdplan.io/config-hash"
	// AnnotationConfigFields on a member Pod hashes each field of its configuration on its
	// own (EtcdClusterSpec.ConfigFields): what a restart is for.
	AnnotationConfigFields = "etcdplan.io/config-fields"
	AnnotationVersion      = "etcdplan.io/version"
	AnnotationSeed         = "etcdplan.io/seed"
	// AnnotationRestore on a seed Pod names the snapshot it is restored from, as the spec does.
	AnnotationRestore = "etcdplan.io/restore"
	// AnnotationMemberID on a volume claim records the etcd member ID once the member
	// has joined: a later Pod on an empty volume then knows its data was lost.
	AnnotationMemberID = "etcdplan.io/member-id"
	// AnnotationRanVersion on a volume claim records the etcd version the member last
	// answered with: the version its data was last served by.
	AnnotationRanVersion = "etcdplan.io/ran-version"
	// AnnotationApplied, on a Service or PodDisruptionBudget, is the hash of its rendering
	// as the operator last applied it: a restarted operator skips what is already so.
	AnnotationApplied = "etcdplan.io/applied"
	// AnnotationForceNewCluster, on a member's volume claim and on the Pod that runs it alone
	// with --force-new-cluster, carries the member ID a recovery from quorum loss restarts
	// alone. The claim's goes once a quorum answers again.
	AnnotationForceNewCluster = "etcdplan.io/force-new-cluster"
	// AnnotationRestoreSeed, on the new seed's volume claim and Pod, names the EtcdBackup a
	// recovery from the loss of every voter's data starts the cluster anew from. The
	// claim's goes once the new cluster answers through a quorum.
	AnnotationRestoreSeed = "etcdplan.io/restore-seed"
	// LabelRetained on a member's volume claim marks it retained: its member held data when
	// a forced recovery restarted another member alone, and left the cluster. The operator
	// never deletes such a claim; AnnotationRetained says why it was kept.
	LabelRetained      = "etcdplan.io/retained"
	AnnotationRetained = "etcdplan.io/retained"
	// AnnotationApprove carries the ID of the plan a user approved (approval: Manual).
	AnnotationApprove = "etcdplan.io/approve"

	ManagerName = "etcdplan"

	ClientPort  = 2379
	PeerPort    = vocab.PeerPort
	MetricsPort = 2381

	DataMount = "/var/lib/etcd"
	DataDir   = DataMount + "/data"
	// RestoreDir is where a seed's snapshot is fetched and restored before it becomes DataDir.
	RestoreDir = DataMount + "/restore"
	// BackupMount is where a Pod that reads or writes a pvc destination mounts its claim.
	BackupMount = "/backup"

	// PreflightDataLost is the exit code of the preflight init container when a member
	// that joined the cluster finds its data directory empty.
	PreflightDataLost = 3
	// PreflightDataUnreadable is its exit code when the data directory cannot be read (a
	// permission or I/O error, a file or a dangling link in its place): the data may be
	// intact, so the member is down, not lost.
	PreflightDataUnreadable = 5
	// SnapshotStoreFull is the exit code of a backup's snapshot Pod whose volume claim is
	// out of space.
	SnapshotStoreFull = 4
)

// ClusterLabels select every object of a cluster.
func ClusterLabels(c *v1alpha1.EtcdCluster) map[string]string {
	return map[string]string{
		LabelCluster:   c.Name,
		LabelManagedBy: ManagerName,
		LabelName:      "etcd",
		LabelInstance:  c.Name,
	}
}

// Selector is the label selector of a cluster's member Pods, as a string for /scale.
func Selector(c *v1alpha1.EtcdCluster) string {
	return fmt.Sprintf("%s=%s,%s=%s", LabelCluster, c.Name, LabelManagedBy, ManagerName)
}

// HeadlessService names the Service that gives members their DNS names.
func HeadlessService(c *v1alpha1.EtcdCluster) string { return c.Name }

// ClientService names the Service clients connect through.
func ClientService(c *v1alpha1.EtcdCluster) string { return c.Name + "-client" }

// PeerURL is the address other members reach a member at.
func PeerURL(c *v1alpha1.EtcdCluster, member string) string {
	return fmt.Sprintf("%s://%s:%d", scheme(c), MemberHost(c, member), PeerPort)
}

// ClientURL is the address a member advertises to clients.
func ClientURL(c *v1alpha1.EtcdCluster, member string) string {
	return fmt.Sprintf("%s://%s:%d", scheme(c), MemberHost(c, member), ClientPort)
}

// MemberHost is a member's stable DNS name through the headless Service.
func MemberHost(c *v1alpha1.EtcdCluster, member string) string {
	return vocab.MemberHost(HeadlessService(c), c.Namespace, member)
}

// scheme is http: TLS is refused with a Stalled reason until it is supported.
func scheme(*v1alpha1.EtcdCluster) string { return "http" }

// Image is the etcd image of a version.
func Image(c *v1alpha1.EtcdCluster, defaultRepo, version string) string {
	repo := c.Spec.Image
	if repo == "" {
		repo = defaultRepo
	}
	return repo + ":v" + version
}
