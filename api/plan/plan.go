// Package plan holds the plan's data types: the action vocabulary, steps, preconditions
// and blockers. It depends on nothing but the standard library, so the pure planner, the
// executor, the CLI and the API's status all share one definition.
// +kubebuilder:object:generate=true
package plan

// FormatVersion is the version of the plan's JSON form; it changes when a field's
// meaning does, so tools reading saved plans can refuse what they don't understand.
// Version 2 gave steps their reason code (why) and hashes it into the plan ID in place of
// the reason's words; version 1 steps have no code.
const FormatVersion = 2

// PreconditionKind names what must hold before a step starts.
type PreconditionKind string

const (
	// PreNone: the step can always start.
	PreNone PreconditionKind = "None"
	// PreMemberHealthy: the member answers health checks.
	PreMemberHealthy PreconditionKind = "MemberHealthy"
	// PreClusterHealthy: every voter is healthy, so one may go down without losing quorum.
	PreClusterHealthy PreconditionKind = "ClusterHealthy"
	// PreQuorumHealthy: the member list was read through a quorum of voters that answer
	// with a leader, and every other voter runs on its data (starting, or publishing
	// itself): a learner, which does not vote, may join.
	PreQuorumHealthy PreconditionKind = "QuorumHealthy"
	// PreLearnerCaughtUp: the learner is started and its raft log is close to the leader's.
	PreLearnerCaughtUp PreconditionKind = "LearnerCaughtUp"
	// PreQuorumWithout: the voters other than the member keep quorum of the smaller cluster.
	PreQuorumWithout PreconditionKind = "QuorumWithout"
	// PreNotLeader: the member is not the leader.
	PreNotLeader PreconditionKind = "NotLeader"
	// PreMemberGone: a linearizable member list shows neither the member's ID nor its name.
	PreMemberGone PreconditionKind = "MemberGone"
	// PreQuorumLost: a majority of voters lost their data, and of the voters that kept it
	// the member has the highest raft index.
	PreQuorumLost PreconditionKind = "QuorumLost"
	// PreAllDataLost: every voter lost its data (or keeps it in memory, and a majority lost
	// it), and the step's backup is the newest this cluster has.
	PreAllDataLost PreconditionKind = "AllDataLost"
	// PreSurvivorInMemory: a majority of voters lost their data, the member keeps its own
	// in memory and answers, and a destination for its snapshot is known.
	PreSurvivorInMemory PreconditionKind = "SurvivorInMemory"
	// PreSurvivorNewest: a majority of voters lost their data, the member kept its own on
	// its volume and answers, no other survivor is more recent, and a destination for its
	// snapshot is known.
	PreSurvivorNewest PreconditionKind = "SurvivorNewest"
	// PreQuorumDown: fewer than a quorum of voters answer and etcd's member list is not
	// read through a quorum; no recovery chose its survivor yet, the member answers and is
	// the most recent of the voters that do, it has no snapshot yet, and a destination for
	// one is known.
	PreQuorumDown PreconditionKind = "QuorumDown"
	// PrePeersConnected: every source member of an adoption exchanges raft messages with
	// the member (etcd counts it an active peer), and it with each of them.
	PrePeersConnected PreconditionKind = "PeersConnected"
)

// Precondition is what must hold before a step starts; the executor checks it against a
// fresh observation just before applying the step.
type Precondition struct {
	Kind PreconditionKind `json:"kind"`
	// +optional
	Member string `json:"member,omitempty"`
}

// Step is one action of a plan.
type Step struct {
	Action Action `json:"action"`
	// Member the action applies to.
	// +optional
	Member string `json:"member,omitempty"`
	// MemberID is the etcd member ID the action acts on, when the member has one: the
	// executor acts by ID, never by name.
	// +optional
	MemberID string `json:"memberID,omitempty"`
	// Target is the new leader for TransferLeadership.
	// +optional
	Target string `json:"target,omitempty"`
	// TargetID is the etcd member ID of Target.
	// +optional
	TargetID string `json:"targetID,omitempty"`
	// Version is the etcd version the member runs after the step.
	// +optional
	Version string `json:"version,omitempty"`
	// Backup is the EtcdBackup a RestoreFromBackup step restores, or the one a
	// SnapshotSurvivor or SnapshotSource step creates.
	// +optional
	Backup string `json:"backup,omitempty"`
	// Secret is the TLS Secret a RenewCertificate step issues again, or the CA Secret a
	// RotateCA step changes.
	// +optional
	Secret string `json:"secret,omitempty"`
	// Listen is how the member's new Pod serves clients and peers, when not as the spec
	// says: while TLS is switched on for a running cluster. For AddLearner, a peer side of
	// ListenBoth registers a plain-text peer URL.
	// +optional
	Listen Listen `json:"listen,omitzero"`
	// Precondition must hold before the step starts.
	Precondition Precondition `json:"precondition"`
	// Why is the reason code: why the step is needed, stable across versions. Plans
	// recorded before formatVersion 2 have none.
	// +optional
	Why Why `json:"why,omitempty"`
	// Reason says why the step is needed, for humans.
	Reason string `json:"reason"`
}

// Listen is how a member serves each side: ListenPlain, ListenTLS or, while TLS is
// switched on for a running cluster, ListenBoth. Empty: as the spec says.
type Listen struct {
	// +optional
	Client string `json:"client,omitempty"`
	// +optional
	Peer string `json:"peer,omitempty"`
}

// How a member serves one side.
const (
	ListenPlain = "http"
	ListenTLS   = "https"
	// ListenBoth: plain text and TLS side by side; clients on the one port, peers on two
	// (plain text on the first, TLS on the second).
	ListenBoth = "http+https"
	// ListenTLSFirst: peers TLS on the first port and plain text on the second, while TLS
	// is switched off for a member whose peer URL is TLS on the first port.
	ListenTLSFirst = "https+http"
)

// OneWay is how a side is served alone: TLS or plain text.
func OneWay(tls bool) string {
	if tls {
		return ListenTLS
	}
	return ListenPlain
}

// BothWays: a side served so takes plain text and TLS.
func BothWays(side string) bool { return side == ListenBoth || side == ListenTLSFirst }

// Subject is what the step acts on, as plans and events name it: its member, or the
// Secret of a certificate step.
func (s Step) Subject() string {
	if s.Member == "" {
		return s.Secret
	}
	return s.Member
}

// BlockReason names why no plan can be made.
type BlockReason string

const (
	BlockDowngrade    BlockReason = "DowngradeRefused"
	BlockSkippedMinor BlockReason = "MinorVersionSkipped"
	// BlockPatchTooOld: a minor upgrade from a patch release older than etcd's upgrade
	// guide allows.
	BlockPatchTooOld BlockReason = "PatchReleaseTooOld"
	BlockQuorumLost  BlockReason = "QuorumLost"
	// BlockSurvivorInMemory: a majority lost its data, and a member that keeps its data in
	// memory still runs: a restore would lose its writes, and two clusters would serve.
	BlockSurvivorInMemory BlockReason = "SurvivorInMemory"
	// BlockSurvivorSnapshotFailed: the snapshot of such a member failed; the message says
	// why and what to do.
	BlockSurvivorSnapshotFailed BlockReason = "SurvivorSnapshotFailed"
	// BlockDuplicateMember: two etcd members claim one member name, or a volume records
	// another ID than etcd gives the name.
	BlockDuplicateMember BlockReason = "DuplicateMember"
	// BlockForeignMember: etcd lists a member this cluster does not manage.
	BlockForeignMember BlockReason = "ForeignMember"
	// BlockAdoptionPreflight: the running cluster spec.bootstrap.join names cannot be
	// adopted as it is (the message says what to fix).
	BlockAdoptionPreflight BlockReason = "AdoptionPreflight"
	// BlockAdoptionRolledBack: the adoption was rolled back; the source runs as it was.
	BlockAdoptionRolledBack BlockReason = "AdoptionRolledBack"
	// BlockInvalidSpec: the spec cannot be planned (a version that does not parse).
	BlockInvalidSpec BlockReason = "InvalidSpec"
	// BlockCorrupt: etcd raised a CORRUPT alarm; nothing changes until a person clears it.
	BlockCorrupt BlockReason = "DataCorrupted"
	// BlockQuotaTooSmall: a NOSPACE alarm stays after compaction and defragmentation.
	BlockQuotaTooSmall BlockReason = "QuotaTooSmall"
	// BlockRestoreOnRetained: spec.bootstrap.restore asks for a new cluster, and volume
	// claims of an earlier cluster of the name hold members' data.
	BlockRestoreOnRetained BlockReason = "RestoreOverRetainedVolumes"
)

// Blocker says why the planner refuses to plan, and what the user can do.
type Blocker struct {
	Reason  BlockReason `json:"reason"`
	Message string      `json:"message"`
}

// Plan is an ordered list of steps from the observed state to the desired one.
type Plan struct {
	FormatVersion int `json:"formatVersion"`
	// ID identifies the plan: a hash of the generation, the observed fingerprint, the steps
	// (their reason codes, not their words) and the blocker's reason.
	ID string `json:"id"`
	// Generation of the EtcdCluster spec the plan was made for.
	Generation int64 `json:"generation"`
	// Fingerprint of the observed state the plan was made from.
	Fingerprint string `json:"fingerprint"`
	// +optional
	Steps []Step `json:"steps,omitempty"`
	// Blocked is set when the planner refuses to plan.
	// +optional
	Blocked *Blocker `json:"blocked,omitempty"`
	// Warnings are facts about the cluster the user should know, such as an even number of
	// voters, which tolerates no more failures than one voter fewer.
	// +optional
	Warnings []string `json:"warnings,omitempty"`
}
