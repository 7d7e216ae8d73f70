package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// EtcdClusterSpec is the desired state of an etcd cluster.
// +kubebuilder:validation:XValidation:rule="!(has(oldSelf.auth) && oldSelf.auth.enabled && has(self.auth) && self.auth.enabled) || (has(oldSelf.tls) ? (has(oldSelf.tls.client) ? oldSelf.tls.client.mode : oldSelf.tls.mode) : 'Disabled') == (has(self.tls) ? (has(self.tls.client) ? self.tls.client.mode : self.tls.mode) : 'Disabled') || ((has(oldSelf.tls) ? (has(oldSelf.tls.client) ? oldSelf.tls.client.mode : oldSelf.tls.mode) : 'Disabled') in ['Auto', 'CertManager'] && (has(self.tls) ? (has(self.tls.client) ? self.tls.client.mode : self.tls.mode) : 'Disabled') in ['Auto', 'CertManager'])",message="tls.client.mode (or tls.mode) cannot change to or from Provided while auth.enabled: the operator's etcd user is its client certificate's common name, which that change replaces; switch auth off, change the source, then switch auth on again"
// +kubebuilder:validation:XValidation:rule="!has(self.auth) || !has(self.auth.users) || size(self.auth.users) == 0 || (has(self.tls) && (has(self.tls.client) ? self.tls.client.mode : self.tls.mode) in ['Auto', 'CertManager'])",message="auth.users needs client TLS from the cluster's own CA (tls.mode or tls.client.mode Auto or CertManager): it issues each user's certificate"
// +kubebuilder:validation:XValidation:rule="!(has(self.auth) && self.auth.enabled) || (has(self.tls) && (has(self.tls.client) ? self.tls.client.mode : self.tls.mode) != 'Disabled')",message="auth.enabled needs client TLS (tls.mode or tls.client.mode other than Disabled): the operator and clients are etcd users by their client certificates' common names"
// +kubebuilder:validation:XValidation:rule="!(has(self.replicas) && self.replicas == 0 && has(self.storage) && has(self.storage.medium) && self.storage.medium == 'Memory')",message="replicas 0 parks a cluster on its volumes, which storage.medium Memory cannot keep: use a disk-backed medium or keep at least one replica"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.tls) ? (has(oldSelf.tls.client) ? oldSelf.tls.client.mode : oldSelf.tls.mode) : 'Disabled') == (has(self.tls) ? (has(self.tls.client) ? self.tls.client.mode : self.tls.mode) : 'Disabled') || (has(oldSelf.tls) ? (has(oldSelf.tls.client) ? oldSelf.tls.client.mode : oldSelf.tls.mode) : 'Disabled') == 'Disabled' || (has(self.tls) ? (has(self.tls.client) ? self.tls.client.mode : self.tls.mode) : 'Disabled') == 'Disabled' || (((has(oldSelf.tls) ? (has(oldSelf.tls.client) ? oldSelf.tls.client.mode : oldSelf.tls.mode) : 'Disabled') == 'Auto' || (has(oldSelf.tls) ? (has(oldSelf.tls.client) ? oldSelf.tls.client.mode : oldSelf.tls.mode) : 'Disabled') == 'CertManager') && (has(self.tls) ? (has(self.tls.client) ? self.tls.client.mode : self.tls.mode) : 'Disabled') == 'Provided') || ((has(oldSelf.tls) ? (has(oldSelf.tls.client) ? oldSelf.tls.client.mode : oldSelf.tls.mode) : 'Disabled') == 'Provided' && (has(self.tls) ? (has(self.tls.client) ? self.tls.client.mode : self.tls.mode) : 'Disabled') == 'Auto')",message="tls.client.mode (or tls.mode) may go from Disabled to TLS, from TLS to Disabled, from Auto or CertManager to Provided, or from Provided to Auto on a running cluster, member by member; no other change of source is planned yet: create a new cluster and restore a backup into it for that"
// +kubebuilder:validation:XValidation:rule="(has(oldSelf.tls) ? (has(oldSelf.tls.peer) ? oldSelf.tls.peer.mode : oldSelf.tls.mode) : 'Disabled') == (has(self.tls) ? (has(self.tls.peer) ? self.tls.peer.mode : self.tls.mode) : 'Disabled') || (has(oldSelf.tls) ? (has(oldSelf.tls.peer) ? oldSelf.tls.peer.mode : oldSelf.tls.mode) : 'Disabled') == 'Disabled' || (has(self.tls) ? (has(self.tls.peer) ? self.tls.peer.mode : self.tls.mode) : 'Disabled') == 'Disabled' || (((has(oldSelf.tls) ? (has(oldSelf.tls.peer) ? oldSelf.tls.peer.mode : oldSelf.tls.mode) : 'Disabled') == 'Auto' || (has(oldSelf.tls) ? (has(oldSelf.tls.peer) ? oldSelf.tls.peer.mode : oldSelf.tls.mode) : 'Disabled') == 'CertManager') && (has(self.tls) ? (has(self.tls.peer) ? self.tls.peer.mode : self.tls.mode) : 'Disabled') == 'Provided') || ((has(oldSelf.tls) ? (has(oldSelf.tls.peer) ? oldSelf.tls.peer.mode : oldSelf.tls.mode) : 'Disabled') == 'Provided' && (has(self.tls) ? (has(self.tls.peer) ? self.tls.peer.mode : self.tls.mode) : 'Disabled') == 'Auto')",message="tls.peer.mode (or tls.mode) may go from Disabled to TLS, from TLS to Disabled, from Auto or CertManager to Provided, or from Provided to Auto on a running cluster, member by member; no other change of source is planned yet: create a new cluster and restore a backup into it for that"
// +kubebuilder:validation:XValidation:rule="!has(self.bootstrap) || !has(self.bootstrap.join) || (has(oldSelf.bootstrap) && has(oldSelf.bootstrap.join))",message="bootstrap.join is set only when the cluster is created: a running cluster adopts no other; it may be removed, which rolls an adoption back until the first source member left"
type EtcdClusterSpec struct {
	// Replicas is the number of voting members. 0 parks the cluster: its Pods go, its
	// volumes and membership stay, and scaling up again brings the same cluster back.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=9
	// +optional
	Replicas int32 `json:"replicas"`

	// Version is the etcd release the members run, such as 3.6.16.
	// +kubebuilder:validation:XValidation:rule="self.matches('^3\\\\.(0|[1-9][0-9]*)\\\\.(0|[1-9][0-9]*)$')",message="version must be an etcd 3.x.y release such as 3.6.16, without a leading v"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^3\\\\.[0-4]\\\\.')",message="version must be 3.5.0 or newer: the operator relies on etcd 3.5's learners, linearizable member list and health checks that leave alarms out"
	Version string `json:"version"`

	// Image overrides the etcd image repository; the tag is always v<version>.
	// +optional
	Image string `json:"image,omitempty"`

	// Storage describes each member's data volume.
	// +kubebuilder:default={}
	// +optional
	Storage StorageSpec `json:"storage"`

	// Resources of the etcd container.
	// +optional
	Resources corev1.ResourceRequirements `json:"resources,omitempty"`

	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`
	// +optional
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`
	// +optional
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// +optional
	ImagePullSecrets []corev1.LocalObjectReference `json:"imagePullSecrets,omitempty"`

	// PodMetadata is added to every member Pod.
	// +optional
	PodMetadata *EmbeddedMetadata `json:"podMetadata,omitempty"`

	// ClientService shapes the Service clients connect through.
	// +optional
	ClientService *ClientServiceSpec `json:"clientService,omitempty"`

	// Options are etcd settings applied to every member.
	// +optional
	Options EtcdOptions `json:"options,omitempty"`

	// TLS secures client and peer traffic.
	// +optional
	TLS *TLSSpec `json:"tls,omitempty"`

	// Auth switches on etcd's authentication: every client needs an etcd user from then on.
	// It needs client TLS, whose certificates' common names name the users.
	// +optional
	Auth *AuthSpec `json:"auth,omitempty"`

	// Bootstrap seeds a new cluster from a backup instead of empty.
	// +optional
	Bootstrap *BootstrapSpec `json:"bootstrap,omitempty"`

	// UpdateStrategy says how plans are applied.
	// +kubebuilder:default={}
	// +optional
	UpdateStrategy UpdateStrategy `json:"updateStrategy"`

	// Maintenance schedules defragmentation.
	// +optional
	Maintenance *MaintenanceSpec `json:"maintenance,omitempty"`

	// Recovery says what to do when quorum is lost.
	// +optional
	Recovery *RecoverySpec `json:"recovery,omitempty"`

	// Suspend stops all reconciliation; the plan is neither computed nor applied.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
}

// StorageMedium is where member data lives.
// +kubebuilder:validation:Enum="";Memory
type StorageMedium string

// RetainPolicy says what happens to member volumes when the EtcdCluster is deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type RetainPolicy string

const (
	RetainPolicyRetain RetainPolicy = "Retain"
	RetainPolicyDelete RetainPolicy = "Delete"
	// StorageMediumMemory keeps member data in a memory-backed emptyDir.
	StorageMediumMemory StorageMedium = "Memory"
)

// StorageSpec describes each member's data volume.
// +kubebuilder:validation:XValidation:rule="(has(self.medium) && self.medium == 'Memory') == (has(oldSelf.medium) && oldSelf.medium == 'Memory')",message="storage.medium is immutable: members keep the volumes they were created with"
type StorageSpec struct {
	// Size of each member's volume. It may grow but never shrink: claims of a StorageClass
	// that allows expansion grow in place; on others, members are replaced one at a time by
	// new members on volumes of the new size.
	// +kubebuilder:default="1Gi"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).compareTo(quantity(string(oldSelf))) >= 0",message="storage.size cannot shrink: a volume can only grow"
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="storage.size must be larger than zero, such as 1Gi"
	// +optional
	Size resource.Quantity `json:"size,omitempty"`

	// StorageClassName of member volumes; empty uses the default class. Changing it moves
	// the members one at a time onto volumes of the new class: a new member joins, then one
	// on the old class leaves. Emptying it moves nothing.
	// +optional
	StorageClassName string `json:"storageClassName,omitempty"`

	// Medium "" keeps data on a PersistentVolumeClaim; Memory keeps it in RAM (lost with the Pod).
	// +kubebuilder:default=""
	// +optional
	Medium StorageMedium `json:"medium"`

	// RetainPolicy: Retain keeps member volumes when the EtcdCluster is deleted, Delete removes them.
	// +kubebuilder:default=Retain
	// +optional
	RetainPolicy RetainPolicy `json:"retainPolicy,omitempty"`
}

// EmbeddedMetadata is the part of ObjectMeta users may set on generated objects.
type EmbeddedMetadata struct {
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ClientServiceSpec shapes the client Service.
type ClientServiceSpec struct {
	// Type of the Service: ClusterIP (default), NodePort or LoadBalancer.
	// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer
	// +kubebuilder:default=ClusterIP
	// +optional
	Type corev1.ServiceType `json:"type,omitempty"`
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// AutoCompactionMode is etcd's --auto-compaction-mode.
// +kubebuilder:validation:Enum=periodic;revision
type AutoCompactionMode string

// EtcdOptions are etcd settings applied to every member.
// +kubebuilder:validation:XValidation:rule="(has(self.electionTimeout) ? self.electionTimeout : 1000) >= 5 * (has(self.heartbeatInterval) ? self.heartbeatInterval : 100)",message="options.electionTimeout must be at least 5 times options.heartbeatInterval (etcd's defaults, 1000 and 100 ms, count for the one not set)"
type EtcdOptions struct {
	// QuotaBackendBytes is the backend size that raises the NOSPACE alarm.
	// +kubebuilder:validation:Minimum=0
	// +optional
	QuotaBackendBytes *int64 `json:"quotaBackendBytes,omitempty"`
	// +optional
	AutoCompactionMode AutoCompactionMode `json:"autoCompactionMode,omitempty"`
	// AutoCompactionRetention, such as "1h" (periodic) or "1000" (revision).
	// +optional
	AutoCompactionRetention string `json:"autoCompactionRetention,omitempty"`
	// +kubebuilder:validation:Minimum=1
	// +optional
	SnapshotCount *int64 `json:"snapshotCount,omitempty"`
	// HeartbeatInterval in milliseconds.
	// +kubebuilder:validation:Minimum=10
	// +optional
	HeartbeatInterval *int32 `json:"heartbeatInterval,omitempty"`
	// ElectionTimeout in milliseconds.
	// +kubebuilder:validation:Minimum=50
	// +optional
	ElectionTimeout *int32 `json:"electionTimeout,omitempty"`
	// ExtraArgs are further etcd flags, without the leading dashes. Flags the operator manages
	// (names, URLs, data dir, initial cluster, TLS files) cannot be set here.
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['name', 'data-dir', 'wal-dir', 'listen-peer-urls', 'listen-client-urls', 'advertise-client-urls', 'initial-advertise-peer-urls', 'initial-cluster', 'initial-cluster-state', 'initial-cluster-token', 'cert-file', 'key-file', 'trusted-ca-file', 'peer-cert-file', 'peer-key-file', 'peer-trusted-ca-file', 'client-cert-auth', 'peer-client-cert-auth', 'listen-metrics-urls']))",message="options.extraArgs cannot set flags the operator manages (names, URLs, data and WAL dirs, initial cluster, TLS files, metrics URLs)"
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k in ['force-new-cluster', 'unsafe-no-fsync', 'discovery', 'discovery-srv', 'discovery-srv-name', 'discovery-fallback', 'discovery-proxy'])",message="options.extraArgs cannot set force-new-cluster, unsafe-no-fsync or discovery flags: they can lose acknowledged writes or split the cluster"
	// +kubebuilder:validation:XValidation:rule="!self.exists(k, k in ['experimental-initial-corrupt-check', 'initial-corrupt-check', 'strict-reconfig-check'] && self[k] == 'false')",message="options.extraArgs cannot turn off etcd's initial corruption check or its strict reconfiguration check"
	// +kubebuilder:validation:MaxProperties=64
	// +optional
	ExtraArgs map[string]string `json:"extraArgs,omitempty"`
}

// BootstrapSpec seeds a new cluster.
// +kubebuilder:validation:XValidation:rule="!(has(self.restore) && has(self.join))",message="bootstrap takes one of restore and join: a cluster starts from a snapshot or adopts a running cluster, not both"
type BootstrapSpec struct {
	// Restore seeds the cluster from a snapshot.
	// +optional
	Restore *RestoreSpec `json:"restore,omitempty"`
	// Join adopts a running etcd cluster with no downtime: the cluster keeps its ID and
	// data, the operator's members join it one at a time, and its own members leave. Set
	// only at creation. Removing it before the first of the running cluster's members left
	// rolls the adoption back: the operator's members leave again.
	// +optional
	Join *JoinSpec `json:"join,omitempty"`
}

// JoinSpec names the running etcd cluster to adopt (the source). Its members and their
// peer URLs are read from its member list.
type JoinSpec struct {
	// Endpoints are client URLs of the source's members, such as http://10.0.0.5:2379.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=9
	// +kubebuilder:validation:items:Pattern=`^https?://[^/]+$`
	Endpoints []string `json:"endpoints"`
	// TLSSecretName names a Secret in the cluster's namespace for the source's client
	// port: ca.crt, the CA that signed its server certificates, and, when the source asks
	// clients for certificates, tls.crt and tls.key, a client certificate it trusts.
	// +optional
	TLSSecretName string `json:"tlsSecretName,omitempty"`
	// CredentialsSecretName names a Secret with the keys username and password of a source
	// user with the root role, when the source has authentication on.
	// +optional
	CredentialsSecretName string `json:"credentialsSecretName,omitempty"`
}

// RestoreSpec names the snapshot a new cluster starts from: the seed member is restored
// from it (its checksum checked first), and the other members join the seed as learners.
// Once the cluster has formed it is ignored.
// +kubebuilder:validation:XValidation:rule="has(self.backupName) != has(self.source)",message="bootstrap.restore needs exactly one of backupName or source"
type RestoreSpec struct {
	// BackupName is an EtcdBackup in the cluster's namespace whose artifact seeds the cluster.
	// +optional
	BackupName string `json:"backupName,omitempty"`
	// Source reads the snapshot straight from storage.
	// +optional
	Source *SnapshotSource `json:"source,omitempty"`
}

// SnapshotSource is one snapshot object in backup storage.
type SnapshotSource struct {
	BackupDestination `json:",inline"`
	// Key is the snapshot's object key (or file path for pvc) under the destination.
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// Approval says whether plans run on their own.
// +kubebuilder:validation:Enum=Automatic;Manual
type Approval string

const (
	ApprovalAutomatic Approval = "Automatic"
	ApprovalManual    Approval = "Manual"
)

// UpdateStrategy says how plans are applied.
type UpdateStrategy struct {
	// Approval: Automatic runs plans as they are made; Manual shows each plan and runs it
	// only once the annotation etcdplan.io/approve carries the plan's ID.
	// +kubebuilder:default=Automatic
	// +optional
	Approval Approval `json:"approval,omitempty"`
	// ProgressDeadlineSeconds bounds each step; a step past it sets Stalled.
	// +kubebuilder:default=600
	// +kubebuilder:validation:Minimum=10
	// +optional
	ProgressDeadlineSeconds int32 `json:"progressDeadlineSeconds,omitempty"`
}

// MaintenanceSpec schedules routine maintenance.
type MaintenanceSpec struct {
	// Defrag reclaims space on members whose database is fragmented.
	// +optional
	Defrag *DefragSpec `json:"defrag,omitempty"`
}

// DefragSpec says when members are defragmented: one at a time, followers first and the
// leader last after leadership moved, each only while every voter is healthy. The schedule
// says when, the threshold which members: with a threshold alone, a member is defragmented
// whenever it reaches it; with a schedule, each time it comes, the members then at the
// threshold (without one, every member with at least 1 MiB to give back).
// +kubebuilder:validation:XValidation:rule="has(self.schedule) || has(self.thresholdPercent)",message="maintenance.defrag needs a schedule, a thresholdPercent or both"
type DefragSpec struct {
	// Schedule is a cron expression, such as "0 3 * * *" (five fields, minute first, in UTC
	// unless it starts with CRON_TZ=<zone>; a sixth field in front counts seconds), or a
	// descriptor such as "@daily". A time missed while the operator was away is caught up
	// once it is back.
	// +kubebuilder:validation:XValidation:rule="self.matches('^(@[a-z]+|@every [0-9a-z.]+|(CRON_TZ=[^ ]+ )?[^ ]+( [^ ]+){4,5})$')",message="schedule must be a cron expression of five fields (or six, seconds first) such as \"0 3 * * *\", or a descriptor such as @daily"
	// +optional
	Schedule string `json:"schedule,omitempty"`
	// ThresholdPercent: a member is defragmented once this share of its database (and at
	// least 1 MiB) is free space.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	ThresholdPercent int32 `json:"thresholdPercent,omitempty"`
}

// QuorumLossPolicy says whether a recovery from quorum loss waits for approval.
// +kubebuilder:validation:Enum=Manual;Automatic
type QuorumLossPolicy string

const (
	QuorumLossManual    QuorumLossPolicy = "Manual"
	QuorumLossAutomatic QuorumLossPolicy = "Automatic"
)

// RecoverySpec says what to do when a majority of voters lost their data. The operator
// plans the recovery: the surviving voter with the highest raft index restarts alone with
// etcd's --force-new-cluster, and new members join it; writes it had not received are
// lost. When no voter can restart alone, the cluster starts anew from its newest
// successful EtcdBackup; writes after it are lost.
// +kubebuilder:validation:XValidation:rule="!has(self.quorumLoss) || self.quorumLoss != 'Automatic' || (has(self.autoApproveDataLoss) && self.autoApproveDataLoss)",message="quorumLoss Automatic runs recoveries that can lose writes without approval: set autoApproveDataLoss: true to accept that"
type RecoverySpec struct {
	// QuorumLoss: Manual shows the recovery plan and runs it once the annotation
	// etcdplan.io/approve carries its ID (whatever spec.updateStrategy.approval says);
	// Automatic runs it as soon as it is made.
	// +kubebuilder:default=Manual
	// +optional
	QuorumLoss QuorumLossPolicy `json:"quorumLoss,omitempty"`
	// AutoApproveDataLoss accepts that plans which can lose writes run without approval;
	// quorumLoss Automatic needs it.
	// +optional
	AutoApproveDataLoss bool `json:"autoApproveDataLoss,omitempty"`
}

// RecoveryApproved: spec.recovery lets a recovery from quorum loss run without approval.
func (s *EtcdClusterSpec) RecoveryApproved() bool {
	rs := s.Recovery
	return rs != nil && rs.QuorumLoss == QuorumLossAutomatic && rs.AutoApproveDataLoss
}

// MemberRole is a member's place in etcd's membership.
type MemberRole string

const (
	RoleVoter   MemberRole = "voter"
	RoleLearner MemberRole = "learner"
)

// MemberStatus is one member as last observed.
type MemberStatus struct {
	Name string `json:"name"`
	// ID is etcd's member ID in hex.
	// +optional
	ID string `json:"id,omitempty"`
	// +optional
	Role MemberRole `json:"role,omitempty"`
	// +optional
	Leader bool `json:"leader,omitempty"`
	// +optional
	Version string `json:"version,omitempty"`
	// +optional
	Healthy bool `json:"healthy"`
	// Silent: the member accepted a connection but did not answer in time. It may be up (a
	// member publishing itself to the cluster serves raft before clients), so no step counts
	// on it being down.
	// +optional
	Silent bool `json:"silent,omitempty"`
	// +optional
	DBSize int64 `json:"dbSize,omitempty"`
	// +optional
	Pod string `json:"pod,omitempty"`
	// +optional
	PVC string `json:"pvc,omitempty"`
}

// EtcdClusterStatus is the observed state of an etcd cluster.
type EtcdClusterStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	Members []MemberStatus `json:"members,omitempty"`
	// MemberSummary is "ready/desired", for kubectl get.
	// +optional
	MemberSummary string `json:"memberSummary,omitempty"`
	// ClusterID is etcd's cluster ID in hex, set once the cluster has bootstrapped.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`
	// PreviousClusterID is the cluster ID before a recovery started the cluster anew from a
	// backup: that cluster's backups are the cluster's too.
	// +optional
	PreviousClusterID string `json:"previousClusterID,omitempty"`
	// TLS is what clients need to know of the cluster's TLS, when it has any.
	// +optional
	TLS *TLSStatus `json:"tls,omitempty"`
	// Auth is etcd's authentication as last read from the cluster, when it was asked for or
	// is on.
	// +optional
	Auth *AuthStatus `json:"auth,omitempty"`
	// Join is how the adoption of a running cluster (spec.bootstrap.join) stands.
	// +optional
	Join *JoinStatus `json:"join,omitempty"`
	// RestoredFrom is the snapshot the cluster's seed member was restored from
	// (spec.bootstrap.restore), as a URI.
	// +optional
	RestoredFrom string `json:"restoredFrom,omitempty"`
	// LastRecovery is the last recovery from quorum loss the operator started, and what came
	// of it. It is recorded when its step takes effect, whatever becomes of its plan.
	// +optional
	LastRecovery *RecoveryStatus `json:"lastRecovery,omitempty"`
	// ClusterVersion is etcd's cluster version (major.minor.0).
	// +optional
	ClusterVersion string `json:"clusterVersion,omitempty"`
	// Version is the lowest version any member runs.
	// +optional
	Version string `json:"version,omitempty"`
	// Replicas counts voting members, for the scale subresource.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// Selector selects member Pods, for the scale subresource.
	// +optional
	Selector string `json:"selector,omitempty"`
	// StalledLearners are the member IDs of learners whose promotion passed its progress
	// deadline; the next plan removes them and adds new members in their place.
	// +optional
	StalledLearners []string `json:"stalledLearners,omitempty"`
	// NextOrdinal is the ordinal the next new member gets; ordinals only grow.
	// +optional
	NextOrdinal int32 `json:"nextOrdinal,omitempty"`
	// Plan is the plan being shown or applied.
	// +optional
	Plan *PlanStatus `json:"plan,omitempty"`
	// Alarms are etcd's active alarms, such as "NOSPACE on member 8e9e05c52164694d". An alarm
	// is not a member's health: the members still answer.
	// +optional
	Alarms []string `json:"alarms,omitempty"`
	// Warnings are what the user should know of the spec, such as an even number of voters.
	// +optional
	Warnings []string `json:"warnings,omitempty"`
	// History holds the last plans with their outcome, newest first.
	// +optional
	History []PlanRecord `json:"history,omitempty"`
	// Defrag is the progress of scheduled defragmentation.
	// +optional
	Defrag *DefragStatus `json:"defrag,omitempty"`
	// LastHandledReconcileAt is the last reconcile.fluxcd.io/requestedAt value handled.
	// +optional
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
}

// JoinPhase is how far an adoption went.
type JoinPhase string

const (
	// JoinAdopting: the operator's members join the source, and its members leave.
	JoinAdopting JoinPhase = "Adopting"
	// JoinSourceRemoved: every source member left; the plan waits for the user to
	// acknowledge that their processes are stopped and their data directories wiped.
	JoinSourceRemoved JoinPhase = "SourceRemoved"
	// JoinAdopted: every source member left, and the user acknowledged it; the cluster is
	// the operator's alone.
	JoinAdopted JoinPhase = "Adopted"
	// JoinRolledBack: spec.bootstrap.join was removed before a source member left, and the
	// operator's members left the source again.
	JoinRolledBack JoinPhase = "RolledBack"
)

// JoinStatus is an adoption of a running cluster.
type JoinStatus struct {
	Phase JoinPhase `json:"phase"`
	// Source are the source's members as its member list first showed them.
	// +optional
	Source []SourceMember `json:"source,omitempty"`
	// SourceLeft: a source member left the membership; the adoption cannot be rolled back
	// from then on.
	// +optional
	SourceLeft bool `json:"sourceLeft,omitempty"`
	// UsersMade: the source has authentication on, and the operator's users (its client
	// certificates' common names) were made in it with the root role.
	// +optional
	UsersMade bool `json:"usersMade,omitempty"`
}

// SourceMember is a member of an adopted cluster that the operator does not run.
type SourceMember struct {
	ID string `json:"id"`
	// +optional
	Name string `json:"name,omitempty"`
	// +optional
	ClientURLs []string `json:"clientURLs,omitempty"`
	// +optional
	PeerURLs []string `json:"peerURLs,omitempty"`
}

// RecoveryStatus is a recovery from quorum loss: a survivor restarted alone
// (ForceNewCluster) or a new cluster restored from a backup on a seed (RestoreFromBackup).
type RecoveryStatus struct {
	// Plan is the ID of the plan whose step started it.
	Plan string `json:"plan"`
	// Action is ForceNewCluster or RestoreFromBackup.
	Action string `json:"action"`
	// Member is the survivor restarted alone, or the seed restored.
	Member string `json:"member"`
	// Backup is the EtcdBackup a restore started from.
	// +optional
	Backup string `json:"backup,omitempty"`
	// FromClusterID is the cluster ID when it started.
	// +optional
	FromClusterID string `json:"fromClusterID,omitempty"`
	// StartedAt is when its effect was applied.
	StartedAt *Instant `json:"startedAt"`
	// FinishedAt is when the cluster it started first answered through a quorum.
	// +optional
	FinishedAt *Instant `json:"finishedAt,omitempty"`
	// ClusterID is the cluster ID it answered with then (new after a restore).
	// +optional
	ClusterID string `json:"clusterID,omitempty"`
}

// DefragStatus is the progress of spec.maintenance.defrag.schedule.
type DefragStatus struct {
	// LastScheduleTime is the last time the schedule came (or when it was first seen).
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// Pending are the IDs of the members that time's defragmentation has still to do.
	// +optional
	Pending []string `json:"pending,omitempty"`
}

// GetConditions returns the status conditions.
func (c *EtcdCluster) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions sets the status conditions.
func (c *EtcdCluster) SetConditions(conds []metav1.Condition) { c.Status.Conditions = conds }

// EtcdCluster is an etcd cluster whose changes are planned and applied step by step.
// Its name names the headless Service, "<name>-client", and members "<name>-<ordinal>",
// which are DNS labels: so is the name, with room for the suffixes.
// +kubebuilder:object:root=true
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 50 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="metadata.name must be a DNS label of at most 50 characters that starts with a letter (lowercase letters, digits and '-'): it names Services and member Pods"
// +kubebuilder:validation:XValidation:rule="!self.metadata.name.endsWith('-client')",message="metadata.name cannot end in -client: the client Service of the cluster named without it would take that name"
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=etcd;etcds,categories=etcdplan
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Members",type=string,JSONPath=`.status.memberSummary`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="Plan",type=string,JSONPath=`.status.plan.summary`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Plan-ID",type=string,JSONPath=`.status.plan.id`,priority=1
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`,priority=1
type EtcdCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec EtcdClusterSpec `json:"spec"`
	// Status is what the operator observed and did. Until it first writes it, it reads as
	// observedGeneration 0, so kstatus (Flux health checks, kubectl wait) calls a
	// just-created object InProgress, not Current.
	// +kubebuilder:default={observedGeneration: 0}
	Status EtcdClusterStatus `json:"status,omitempty"`
}

// EtcdClusterList is a list of EtcdClusters.
// +kubebuilder:object:root=true
type EtcdClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdCluster `json:"items"`
}
