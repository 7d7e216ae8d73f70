package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PlanFormatVersion is the version of the plan's JSON form; it changes when a field's
// meaning does, so tools reading saved plans can refuse what they don't understand.
const PlanFormatVersion = 1

// Action is one kind of step. The vocabulary is fixed: the executor knows how to apply
// each action and nothing else.
type Action string

const (
	// CreateSeed starts the first member of a new cluster on its own.
	ActionCreateSeed Action = "CreateSeed"
	// AddLearner adds a member to etcd's membership as a non-voting learner.
	ActionAddLearner Action = "AddLearner"
	// StartMember creates a member's volume and Pod (a new learner, or a member whose Pod is gone).
	ActionStartMember Action = "StartMember"
	// PromoteLearner makes a caught-up learner a voter.
	ActionPromoteLearner Action = "PromoteLearner"
	// TransferLeadership moves leadership from Member to Target.
	ActionTransferLeadership Action = "TransferLeadership"
	// RemoveMember removes a member from etcd's membership.
	ActionRemoveMember Action = "RemoveMember"
	// DeleteMember deletes the Pod and volume of a member that is no longer in the membership.
	ActionDeleteMember Action = "DeleteMember"
	// StopMember deletes a member's Pod and keeps its volume and membership (replicas 0).
	ActionStopMember Action = "StopMember"
	// RestartMember re-creates a member's Pod with the current configuration.
	ActionRestartMember Action = "RestartMember"
	// UpgradeMember re-creates a member's Pod on a new etcd version, keeping its data.
	ActionUpgradeMember Action = "UpgradeMember"
)

// PreconditionKind names what must hold before a step starts.
type PreconditionKind string

const (
	// PreNone: the step can always start.
	PreNone PreconditionKind = "None"
	// PreMemberHealthy: the member answers health checks.
	PreMemberHealthy PreconditionKind = "MemberHealthy"
	// PreClusterHealthy: every voter is healthy, so one may go down without losing quorum.
	PreClusterHealthy PreconditionKind = "ClusterHealthy"
	// PreLearnerCaughtUp: the learner is started and its raft log is close to the leader's.
	PreLearnerCaughtUp PreconditionKind = "LearnerCaughtUp"
	// PreQuorumWithout: the voters other than the member keep quorum of the smaller cluster.
	PreQuorumWithout PreconditionKind = "QuorumWithout"
	// PreNotLeader: the member is not the leader.
	PreNotLeader PreconditionKind = "NotLeader"
)

// Precondition is what must hold before a step starts; the executor checks it against a
// fresh observation just before applying the step.
type Precondition struct {
	Kind PreconditionKind `json:"kind"`
	// +optional
	Member string `json:"member,omitempty"`
}

// StepState is where a step is in its life.
type StepState string

const (
	StepPending   StepState = "Pending"
	StepRunning   StepState = "Running"
	StepSucceeded StepState = "Succeeded"
	StepFailed    StepState = "Failed"
)

// Step is one action of a plan. The planner fills the first block; the executor records
// the second while it applies the step.
type Step struct {
	Action Action `json:"action"`
	// Member the action applies to.
	// +optional
	Member string `json:"member,omitempty"`
	// Target is the new leader for TransferLeadership.
	// +optional
	Target string `json:"target,omitempty"`
	// Version is the etcd version the member runs after the step.
	// +optional
	Version string `json:"version,omitempty"`
	// Precondition must hold before the step starts.
	Precondition Precondition `json:"precondition"`
	// Reason says why the step is needed, for humans.
	Reason string `json:"reason"`

	// +optional
	State StepState `json:"state,omitempty"`
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	Deadline *metav1.Time `json:"deadline,omitempty"`
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
}

// BlockReason names why no plan can be made.
type BlockReason string

const (
	BlockDowngrade      BlockReason = "DowngradeRefused"
	BlockSkippedMinor   BlockReason = "MinorVersionSkipped"
	BlockQuorumLost     BlockReason = "QuorumLost"
	BlockUnreachable    BlockReason = "EtcdUnreachable"
	BlockMemberUnhealed BlockReason = "MemberCannotBeReplaced"
)

// Blocker says why the planner refuses to plan, and what the user can do.
type Blocker struct {
	Reason  BlockReason `json:"reason"`
	Message string      `json:"message"`
}

// Plan is an ordered list of steps from the observed state to the desired one.
type Plan struct {
	FormatVersion int `json:"formatVersion"`
	// ID identifies the plan: a hash of the generation, the observed fingerprint and the steps.
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
}

// PlanPhase is where a recorded plan is.
type PlanPhase string

const (
	PlanAwaitingApproval PlanPhase = "AwaitingApproval"
	PlanRunning          PlanPhase = "Running"
	PlanSucceeded        PlanPhase = "Succeeded"
	PlanFailed           PlanPhase = "Failed"
	PlanSuperseded       PlanPhase = "Superseded"
	PlanBlocked          PlanPhase = "Blocked"
)

// PlanStatus is the plan recorded in status, with its progress.
type PlanStatus struct {
	Plan `json:",inline"`
	// +optional
	Phase PlanPhase `json:"phase,omitempty"`
	// Current is the index of the step being applied.
	// +optional
	Current int32 `json:"current,omitempty"`
	// Summary is "k/n Action", for kubectl get.
	// +optional
	Summary string `json:"summary,omitempty"`
	// +optional
	CreatedAt *metav1.Time `json:"createdAt,omitempty"`
}

// PlanRecord is a finished plan in status.history.
type PlanRecord struct {
	ID    string    `json:"id"`
	Phase PlanPhase `json:"phase"`
	// Steps is the number of steps applied, of the plan's total ("3/7").
	Steps string `json:"steps"`
	// Actions lists the plan's actions in order, shortened.
	// +optional
	Actions string `json:"actions,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}
