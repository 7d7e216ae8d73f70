package v1alpha1

import (
	"path"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterReference names an EtcdCluster in the same namespace.
type ClusterReference struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// SecretKeyRef names one key of a Secret in the same namespace.
type SecretKeyRef struct {
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// +kubebuilder:validation:MinLength=1
	Key string `json:"key"`
}

// BackupDestination is where snapshots go: exactly one of s3, gcs or pvc.
// +kubebuilder:validation:XValidation:rule="(has(self.s3) ? 1 : 0) + (has(self.gcs) ? 1 : 0) + (has(self.pvc) ? 1 : 0) == 1",message="set exactly one backup destination: s3, gcs or pvc"
type BackupDestination struct {
	// +optional
	S3 *S3Destination `json:"s3,omitempty"`
	// +optional
	GCS *GCSDestination `json:"gcs,omitempty"`
	// +optional
	PVC *PVCDestination `json:"pvc,omitempty"`
}

// URI names the object under key at the destination: s3://bucket/prefix/key,
// gs://bucket/prefix/key or pvc://claim/subPath/key.
func (d BackupDestination) URI(key string) string {
	uri := func(scheme, bucket, prefix string) string {
		return scheme + "://" + bucket + "/" + path.Join(prefix, key)
	}
	switch {
	case d.S3 != nil:
		return uri("s3", d.S3.Bucket, d.S3.Prefix)
	case d.GCS != nil:
		return uri("gs", d.GCS.Bucket, d.GCS.Prefix)
	case d.PVC != nil:
		return uri("pvc", d.PVC.ClaimName, d.PVC.SubPath)
	}
	return key
}

// CredentialsSecret is the Secret the destination names for its credentials; "" for none.
func (d BackupDestination) CredentialsSecret() string {
	switch {
	case d.S3 != nil:
		return d.S3.CredentialsSecret
	case d.GCS != nil:
		return d.GCS.CredentialsSecret
	}
	return ""
}

// CredentialKeys are the keys the destination's credentials Secret must hold.
func (d BackupDestination) CredentialKeys() []string {
	switch {
	case d.S3 != nil:
		return []string{"accessKeyID", "secretAccessKey"}
	case d.GCS != nil:
		return []string{"serviceAccount.json"}
	}
	return nil
}

// KeyOf is the key of the object uri names at the destination; false when it is not there.
func (d BackupDestination) KeyOf(uri string) (string, bool) {
	return strings.CutPrefix(uri, strings.TrimSuffix(d.URI("k"), "k"))
}

// S3Destination is a bucket on S3 or an S3-compatible store.
type S3Destination struct {
	// +kubebuilder:validation:MinLength=3
	Bucket string `json:"bucket"`
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// +optional
	Region string `json:"region,omitempty"`
	// Endpoint of an S3-compatible store; empty uses AWS.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// ForcePathStyle addresses buckets by path, as most S3-compatible stores want.
	// +optional
	ForcePathStyle bool `json:"forcePathStyle,omitempty"`
	// CredentialsSecret holds accessKeyID and secretAccessKey; empty uses the ambient credentials.
	// +optional
	CredentialsSecret string `json:"credentialsSecret,omitempty"`
}

// GCSDestination is a Google Cloud Storage bucket.
type GCSDestination struct {
	// +kubebuilder:validation:MinLength=3
	Bucket string `json:"bucket"`
	// +optional
	Prefix string `json:"prefix,omitempty"`
	// Endpoint overrides the storage API endpoint.
	// +optional
	Endpoint string `json:"endpoint,omitempty"`
	// CredentialsSecret holds a service account key under serviceAccount.json; empty uses the ambient credentials.
	// +optional
	CredentialsSecret string `json:"credentialsSecret,omitempty"`
}

// PVCDestination is a PersistentVolumeClaim in the backup's namespace: Pods that mount it
// store, read and delete snapshots there.
type PVCDestination struct {
	// +kubebuilder:validation:MinLength=1
	ClaimName string `json:"claimName"`
	// +optional
	SubPath string `json:"subPath,omitempty"`
}

// EtcdBackupSpec asks for one snapshot of a cluster.
type EtcdBackupSpec struct {
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterRef is immutable"
	ClusterRef ClusterReference `json:"clusterRef"`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="destination is immutable: create a new EtcdBackup"
	Destination BackupDestination `json:"destination"`
	// Verify runs a restore drill once the snapshot is stored: a scratch etcd that joins
	// nothing is restored from the stored object, and its revision, key count and history
	// hash are checked against what the cluster held. The outcome is the Verified
	// condition. Set on a backup that succeeded earlier, it drills that backup.
	// +optional
	Verify bool `json:"verify,omitempty"`
	// Member is the etcd member ID (hex) to snapshot, whatever its view of the cluster:
	// set by a recovery from quorum loss on the member that still runs with its data in
	// memory (a snapshot needs no quorum). Empty reads a voter chosen on a member list
	// read through a quorum.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="member is immutable: create a new EtcdBackup"
	// +optional
	Member string `json:"member,omitempty"`
}

// Contents is what a cluster held at a snapshot's revision, as etcd tells it.
type Contents struct {
	// Keys is how many keys there were at the revision.
	Keys int64 `json:"keys"`
	// HashKV is etcd's hash of the key-value history up to the revision, since
	// CompactRevision: two stores with the same history give the same hash. (A 32-bit
	// unsigned value, kept in 64 bits: the schema's integers are signed.)
	HashKV int64 `json:"hashKV"`
	// CompactRevision is the revision the history was compacted at.
	CompactRevision int64 `json:"compactRevision"`
}

// Artifact is a stored snapshot.
type Artifact struct {
	URI    string `json:"uri"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Revision is the revision the member had applied when the snapshot began: the
	// snapshot holds it, or a later one when writes came in meanwhile.
	Revision int64 `json:"revision"`
	// EtcdVersion is the version of the member the snapshot was taken from.
	EtcdVersion string `json:"etcdVersion"`
	// Member is the name of that member.
	// +optional
	Member string `json:"member,omitempty"`
	// ClusterID is the etcd cluster ID of that member: a recovery from quorum loss
	// restores only backups of the cluster it recovers.
	// +optional
	ClusterID string      `json:"clusterID,omitempty"`
	TakenAt   metav1.Time `json:"takenAt"`
	// Contents is what the cluster held at Revision, read from the same member right
	// after the snapshot; a restore drill checks the restored data against it.
	// +optional
	Contents *Contents `json:"contents,omitempty"`
}

// VerifiedCondition is True on a backup whose restore drill found what the cluster held,
// False when the drill ran and found it wrong (the message says where), Unknown while a
// drill runs or could not run (DrillBlocked, DrillDeadlineExceeded) and is tried again.
const VerifiedCondition = "Verified"

// BackupPhase is where a backup is.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
type BackupPhase string

const (
	// BackupPending waits for its cluster, credentials or store.
	BackupPending BackupPhase = "Pending"
	// BackupRunning streams a snapshot to the store.
	BackupRunning BackupPhase = "Running"
	// BackupSucceeded stored a snapshot that matched etcd's integrity hash.
	BackupSucceeded BackupPhase = "Succeeded"
	// BackupFailed will not be tried again: the store refused it, or its deadline passed.
	BackupFailed BackupPhase = "Failed"
)

// EtcdBackupStatus is the outcome of a backup.
type EtcdBackupStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	Phase BackupPhase `json:"phase,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// +optional
	Artifact *Artifact `json:"artifact,omitempty"`
	// DrillTries counts the restore drills that could not run (a Pod in the way, or a
	// scratch etcd that never served) since the last verdict: each waits twice as long.
	// +optional
	DrillTries int32 `json:"drillTries,omitempty"`
	// NextDrillTime is when a restore drill that could not run is tried again.
	// +optional
	NextDrillTime *metav1.Time `json:"nextDrillTime,omitempty"`
}

// EtcdBackup is one snapshot of an EtcdCluster, stored at a destination.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=etcdplan
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.status.artifact.size`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.artifact.revision`
// +kubebuilder:printcolumn:name="Verified",type=string,JSONPath=`.status.conditions[?(@.type=="Verified")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdBackup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec EtcdBackupSpec `json:"spec"`
	// Status is what the operator observed and did. Until it first writes it, it reads as
	// observedGeneration 0, so kstatus (Flux health checks, kubectl wait) calls a
	// just-created object InProgress, not Current.
	// +kubebuilder:default={observedGeneration: 0}
	Status EtcdBackupStatus `json:"status,omitempty"`
}

// Verified: the backup's restore drill found what the cluster held.
func (b *EtcdBackup) Verified() bool {
	return apimeta.IsStatusConditionTrue(b.Status.Conditions, VerifiedCondition)
}

// DrillFailed: the backup's restore drill ran and found the data wrong, so it may not
// restore. A drill that could not run leaves Verified Unknown: that fails nothing.
func (b *EtcdBackup) DrillFailed() bool {
	return apimeta.IsStatusConditionFalse(b.Status.Conditions, VerifiedCondition)
}

// GetConditions returns the status conditions.
func (b *EtcdBackup) GetConditions() []metav1.Condition { return b.Status.Conditions }

// SetConditions sets the status conditions.
func (b *EtcdBackup) SetConditions(c []metav1.Condition) { b.Status.Conditions = c }

// EtcdBackupList is a list of EtcdBackups.
// +kubebuilder:object:root=true
type EtcdBackupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdBackup `json:"items"`
}

// Retention says which of a schedule's successful backups to keep: a backup goes when either
// rule says so, its stored object first. Always kept: the newest successful backup, the
// newest verified one, and any a restore names (spec.bootstrap.restore, a recovery under
// way). Failed backups, and those a restore drill found wrong, count for neither rule; a
// drill that could not run makes no backup failed.
type Retention struct {
	// KeepLast keeps this many newest successful backups.
	// +kubebuilder:validation:Minimum=1
	// +optional
	KeepLast *int32 `json:"keepLast,omitempty"`
	// MaxAge deletes successful backups taken longer ago than this, such as "168h".
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// EtcdBackupScheduleSpec takes backups on a cron schedule.
type EtcdBackupScheduleSpec struct {
	ClusterRef ClusterReference `json:"clusterRef"`
	// Schedule is a cron expression, such as "0 */6 * * *" (five fields, minute first, in UTC
	// unless it starts with CRON_TZ=<zone>; a sixth field in front counts seconds), or a
	// descriptor such as "@daily". A time that comes while the previous backup still runs is
	// taken once it ends, never two at once; times missed while the operator was away are
	// caught up with one backup.
	// +kubebuilder:validation:XValidation:rule="self.matches('^(@[a-z]+|@every [0-9a-z.]+|(CRON_TZ=[^ ]+ )?[^ ]+( [^ ]+){4,5})$')",message="schedule must be a cron expression of five fields (or six, seconds first) such as \"0 3 * * *\", or a descriptor such as @daily"
	// +kubebuilder:validation:MinLength=1
	Schedule string `json:"schedule"`
	// Destination is where each backup goes; a change applies to the next backup.
	Destination BackupDestination `json:"destination"`
	// +optional
	Retention Retention `json:"retention,omitempty"`
	// Suspend stops new backups; retention still applies.
	// +optional
	Suspend bool `json:"suspend,omitempty"`
	// Verify runs a restore drill on the schedule's backups (spec.verify of each
	// EtcdBackup); a recovery from quorum loss prefers the newest verified backup.
	// +optional
	Verify *VerifyPolicy `json:"verify,omitempty"`
}

// VerifyPolicy says which of a schedule's backups are drilled.
type VerifyPolicy struct {
	// Every drills one backup in so many, starting with the first: 1 drills each one.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:default=1
	// +optional
	Every int32 `json:"every,omitempty"`
}

// EtcdBackupScheduleStatus is the schedule's progress.
type EtcdBackupScheduleStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// LastScheduleTime is the schedule's time the last backup was taken for.
	// +optional
	LastScheduleTime *metav1.Time `json:"lastScheduleTime,omitempty"`
	// LastSuccessfulBackup names the newest EtcdBackup of this schedule that succeeded.
	// +optional
	LastSuccessfulBackup string `json:"lastSuccessfulBackup,omitempty"`
	// LastSuccessfulTime is when that backup's snapshot was taken.
	// +optional
	LastSuccessfulTime *metav1.Time `json:"lastSuccessfulTime,omitempty"`
	// LastVerifiedBackup names the newest EtcdBackup of this schedule whose restore drill
	// passed, among those that exist; retention keeps it.
	// +optional
	LastVerifiedBackup string `json:"lastVerifiedBackup,omitempty"`
	// LastVerifiedTime is when that backup's snapshot was taken.
	// +optional
	LastVerifiedTime *metav1.Time `json:"lastVerifiedTime,omitempty"`
	// BackupsTaken counts the backups the schedule created: spec.verify.every picks by it.
	// +optional
	BackupsTaken int64 `json:"backupsTaken,omitempty"`
}

// EtcdBackupSchedule takes EtcdBackups of a cluster on a schedule and prunes old ones.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=etcdplan
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.spec.clusterRef.name`
// +kubebuilder:printcolumn:name="Schedule",type=string,JSONPath=`.spec.schedule`
// +kubebuilder:printcolumn:name="Suspend",type=boolean,JSONPath=`.spec.suspend`
// +kubebuilder:printcolumn:name="Last",type=date,JSONPath=`.status.lastScheduleTime`
// +kubebuilder:printcolumn:name="Last Success",type=date,JSONPath=`.status.lastSuccessfulTime`
// +kubebuilder:printcolumn:name="Last Verified",type=date,JSONPath=`.status.lastVerifiedTime`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type EtcdBackupSchedule struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec EtcdBackupScheduleSpec `json:"spec"`
	// Status is what the operator observed and did. Until it first writes it, it reads as
	// observedGeneration 0, so kstatus (Flux health checks, kubectl wait) calls a
	// just-created object InProgress, not Current.
	// +kubebuilder:default={observedGeneration: 0}
	Status EtcdBackupScheduleStatus `json:"status,omitempty"`
}

// EtcdBackupScheduleList is a list of EtcdBackupSchedules.
// +kubebuilder:object:root=true
type EtcdBackupScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []EtcdBackupSchedule `json:"items"`
}

// GetConditions returns the status conditions.
func (s *EtcdBackupSchedule) GetConditions() []metav1.Condition { return s.Status.Conditions }

// SetConditions sets the status conditions.
func (s *EtcdBackupSchedule) SetConditions(c []metav1.Condition) { s.Status.Conditions = c }
