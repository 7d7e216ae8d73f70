package v1alpha1

// StalledReason is why an EtcdCluster is Stalled: something a person must look at or fix.
// Each has a row in docs/operations.md, "Stalled reasons and what to do"; a blocked plan's
// plan.BlockReason is one too (TestStalledReasonsHaveARunbook).
type StalledReason string

// Reasons an EtcdCluster is Stalled for. The cluster as a whole:
const (
	ReasonInvalidSchedule StalledReason = "InvalidSchedule"
	// EtcdUnreachable, MembersUnhealthy and ClusterVersionPending give Ready=False at once,
	// and Stalled once they last past the progress deadline with no plan to mend them.
	ReasonEtcdUnreachable       StalledReason = "EtcdUnreachable"
	ReasonMembersUnhealthy      StalledReason = "MembersUnhealthy"
	ReasonClusterVersionPending StalledReason = "ClusterVersionPending"
	// TLSSecretNotFound and TLSSecretInvalid: a Secret spec.tls names (or one the operator
	// issued) is missing, lacks a key, or is not the cluster's.
	ReasonTLSSecretNotFound StalledReason = "TLSSecretNotFound"
	ReasonTLSSecretInvalid  StalledReason = "TLSSecretInvalid"
	// AuthSecretInvalid: the Secret spec.auth.rootPasswordSecret names has no password.
	ReasonAuthSecretInvalid StalledReason = "AuthSecretInvalid"
	// CertManagerNotInstalled: spec.tls mode CertManager, and cert-manager's kinds are not
	// served.
	ReasonCertManagerNotInstalled StalledReason = "CertManagerNotInstalled"
	// TLSSourceChange: spec.tls changed a side's source on a running cluster in a way the
	// operator does not plan yet (it plans Auto to Provided).
	ReasonTLSSourceChange StalledReason = "TLSSourceChange"
)

// Reasons a step passed its deadline for: the general one, and what a step's effect found
// only a person can fix.
const (
	ReasonProgressDeadlineExceeded StalledReason = "ProgressDeadlineExceeded"
	ReasonNameTaken                StalledReason = "NameTaken"
	ReasonStorageClassNotFound     StalledReason = "StorageClassNotFound"
	ReasonPodStuckTerminating      StalledReason = "PodStuckTerminating"
	ReasonPreflightFailed          StalledReason = "PreflightFailed"
	ReasonNoBackupDestination      StalledReason = "NoBackupDestination"
	ReasonRestoreFailed            StalledReason = "RestoreFailed"
	ReasonRestoreSourceNotFound    StalledReason = "RestoreSourceNotFound"
	ReasonRestoreSourceFailed      StalledReason = "RestoreSourceFailed"
	ReasonRestoreSourceRefused     StalledReason = "RestoreSourceRefused"
	ReasonRestoreVersionTooOld     StalledReason = "RestoreVersionTooOld"
)

// ConditionCertificateExpiring is True while a certificate of the cluster's TLS is close to
// its end: a tenth of its life left for one the operator renews (its renewal did not
// happen), a week for others (cert-manager's, the user's).
const ConditionCertificateExpiring = "CertificateExpiring"

// Reasons of CertificateExpiring.
const (
	ReasonExpiresSoon       = "ExpiresSoon"
	ReasonCertificatesValid = "CertificatesValid"
)

// Other reasons of an EtcdCluster's conditions.
const (
	ReasonSuspended        = "Suspended"
	ReasonParked           = "Parked"
	ReasonAwaitingApproval = "AwaitingApproval"
	ReasonProgressing      = "Progressing"
	ReasonSucceeded        = "Succeeded"
)

// Reasons of an EtcdCluster's Events.
const (
	ReasonPlanCreated     = "PlanCreated"
	ReasonPlanSuperseded  = "PlanSuperseded"
	ReasonStepStarted     = "StepStarted"
	ReasonStepSucceeded   = "StepSucceeded"
	ReasonStepStalled     = "StepStalled"
	ReasonRecoveryStarted = "RecoveryStarted"
	ReasonRecovered       = "Recovered"
	// ReasonSnapshotForgotten: a survivor's snapshot no recovery restored is deleted, its
	// member serving in a quorum again (its stored object stays).
	ReasonSnapshotForgotten = "SnapshotForgotten"
	// ReasonStoppedAtOnce: a member's Pod that was going has its grace period cut to a
	// second, no quorum answering for etcd's graceful stop to wait on (planner.StopAtOnce).
	ReasonStoppedAtOnce = "StoppedAtOnce"
	// etcd's leader refused a member add for long, every voter answering: leadership moved.
	ReasonLeaderUnconnected = "LeaderUnconnected"
	// ReasonSourceRemoved: every source member of an adoption left; the plan waits for the
	// user to acknowledge that they are stopped.
	ReasonSourceRemoved = "SourceRemoved"
	// ReasonAdopted: the user acknowledged that the source members are stopped: the
	// adoption is done.
	ReasonAdopted = "Adopted"
)

// Reasons of an EtcdBackup's Ready and Reconciling conditions (docs/backup-restore.md).
// ReasonSucceeded when it stored its snapshot.
const (
	ReasonRunning = "Running"
	// Retried until the backup's deadline:
	ReasonClusterNotFound     = "ClusterNotFound"
	ReasonClusterNotReady     = "ClusterNotReady"
	ReasonNoMemberAnswers     = "NoMemberAnswers"
	ReasonCredentialsNotFound = "CredentialsNotFound"
	ReasonClaimNotFound       = "ClaimNotFound"
	ReasonPodInTheWay         = "PodInTheWay"
	ReasonSnapshotFailed      = "SnapshotFailed"
	ReasonSnapshotCorrupt     = "SnapshotCorrupt"
	ReasonStoreFull           = "StoreFull"
	ReasonStoreUnavailable    = "StoreUnavailable"
	// Failed:
	ReasonStoreRefused     = "StoreRefused"
	ReasonDeadlineExceeded = "DeadlineExceeded"
)

// Reasons of an EtcdBackup's restore drill, on its Verified condition (and Ready).
const (
	ReasonDrilling = "Drilling"
	ReasonVerified = "Verified"
	// Verified True:
	ReasonRestored = "Restored"
	// Verified False: the drill ran and found the backup does not restore.
	ReasonDrillFailed    = "DrillFailed"
	ReasonContentsDiffer = "ContentsDiffer"
	// Verified Unknown: the drill could not run; it says nothing of the data and is tried
	// again.
	ReasonDrillBlocked          = "DrillBlocked"
	ReasonDrillDeadlineExceeded = "DrillDeadlineExceeded"
)

// Reasons of an EtcdBackupSchedule's conditions; ReasonInvalidSchedule and ReasonSuspended
// too.
const (
	ReasonScheduled        = "Scheduled"
	ReasonBackupRunning    = "BackupRunning"
	ReasonRetentionFailed  = "RetentionFailed"
	ReasonLastBackupFailed = "LastBackupFailed"
	ReasonLastDrillFailed  = "LastDrillFailed"
)
