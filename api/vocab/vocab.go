// Package vocab is the operator's vocabulary: the labels and annotations it keeps for
// itself on the objects it owns, the ports and paths of its Pods, and how members are named
// and addressed (member.go). Labels and annotations users select on or write are in
// api/v1alpha1 (labels.go). These values are stored on objects that a later operator
// version reads back, so they never change. Standard library only: every floor imports it.
package vocab

// Labels and annotations the operator puts on the objects it owns.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelName      = "app.kubernetes.io/name"
	LabelInstance  = "app.kubernetes.io/instance"
	// ManagerName is the value of LabelManagedBy.
	ManagerName = "etcdplan"
	// LabelBackup on a Pod that works for a backup (its snapshot or pruning on a pvc
	// destination, its restore drill) names the EtcdBackup.
	LabelBackup = "etcdplan.io/backup"
	// LabelDataCheck on a check Pod (CheckData) names its cluster; AnnotationMember names
	// the member whose data it reads, AnnotationClaimUID the volume claim it mounts, and
	// AnnotationBesidePod the UID of the member Pod it was made beside. It carries no
	// cluster label: no Service or list of member Pods ever selects it.
	LabelDataCheck      = "etcdplan.io/data-check"
	AnnotationClaimUID  = "etcdplan.io/claim-uid"
	AnnotationBesidePod = "etcdplan.io/beside-pod"

	AnnotationConfigHash = "etcdplan.io/config-hash"
	// AnnotationConfigFields on a member Pod hashes each field of its configuration on its
	// own (EtcdClusterSpec.ConfigFields): what a restart is for.
	AnnotationConfigFields = "etcdplan.io/config-fields"
	// AnnotationVersion is the etcd version of a member Pod, or of the member a snapshot Pod
	// reads.
	AnnotationVersion = "etcdplan.io/version"
	AnnotationSeed    = "etcdplan.io/seed"
	// AnnotationRestore on a seed Pod names the snapshot it is restored from, as the spec does.
	AnnotationRestore = "etcdplan.io/restore"
	// AnnotationMemberID on a volume claim records the etcd member ID once the member
	// has joined: a later Pod on an empty volume then knows its data was lost.
	AnnotationMemberID = "etcdplan.io/member-id"
	// AnnotationRanVersion on a volume claim records the etcd version the member last
	// answered with: the version its data was last served by.
	AnnotationRanVersion = "etcdplan.io/ran-version"
	// AnnotationPeerURL on a volume claim records the member's peer URL as etcd's member
	// list last showed it: how its peers dial it, known even while no member answers.
	AnnotationPeerURL = "etcdplan.io/peer-url"
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
	// AnnotationSurvivorSnapshot, on a member's volume claim, carries the member ID of a
	// survivor whose snapshot a recovery from quorum loss takes to restore every member from
	// (it is marked before the snapshot is asked for). It goes once a quorum answers again:
	// a snapshot of an earlier loss never counts for a later one.
	AnnotationSurvivorSnapshot = "etcdplan.io/survivor-snapshot"
	// On a survivor's EtcdBackup: the member's raft term and index when its snapshot was
	// asked for, "<term>/<index>": a member that reports the same committed nothing since.
	AnnotationRaftAt = "etcdplan.io/raft-at"

	// On a snapshot Pod: what its artifact says besides what the Pod reports. The member
	// also names a check Pod's member.
	AnnotationMember    = "etcdplan.io/member"
	AnnotationClusterID = "etcdplan.io/cluster-id"
	AnnotationTakenAt   = "etcdplan.io/taken-at"
)

// Ports of a member's etcd.
const (
	ClientPort  = 2379
	PeerPort    = 2380
	MetricsPort = 2381
	// PeerTLSPort is the second peer port, always TLS: a member whose peer TLS is switched
	// on while it runs serves it there beside plain text on PeerPort (one port serves peers
	// one way only), and keeps its peer URL there once plain text is gone.
	PeerTLSPort = 2382
)

// Containers of the Pods the operator renders, by name: the operator reads their statuses
// back (a preflight's exit code, a restore's failure, whether etcd runs).
const (
	ContainerEtcd         = "etcd"
	ContainerPreflight    = "preflight"
	ContainerRestoreFetch = "restore-fetch"
	ContainerRestore      = "restore"
)

// Paths inside the Pods the operator renders.
const (
	DataMount = "/var/lib/etcd"
	DataDir   = DataMount + "/data"
	// RestoreDir is where a seed's snapshot is fetched and restored before it becomes DataDir.
	RestoreDir = DataMount + "/restore"
	// BackupMount is where a Pod that reads or writes a pvc destination mounts its claim.
	BackupMount = "/backup"
)
