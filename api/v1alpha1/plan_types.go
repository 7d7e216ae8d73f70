package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdplan/etcdplan/api/plan"
)

// StepState is where a step is in its life.
type StepState string

const (
	StepPending   StepState = "Pending"
	StepRunning   StepState = "Running"
	StepSucceeded StepState = "Succeeded"
	StepFailed    StepState = "Failed"
)

// StepProgress is the executor's record of one step while it is applied.
type StepProgress struct {
	State StepState `json:"state"`
	// +optional
	StartedAt *Instant `json:"startedAt,omitempty"`
	// +optional
	Deadline *metav1.Time `json:"deadline,omitempty"`
	// AppliedAt is when the step's precondition first held and its effect was applied.
	// +optional
	AppliedAt *Instant `json:"appliedAt,omitempty"`
	// FinishedAt is when the operator saw the step's effect in the cluster.
	// +optional
	FinishedAt *Instant `json:"finishedAt,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// Errors counts the step's failed attempts in a row; retries back off exponentially.
	// +optional
	Errors int32 `json:"errors,omitempty"`
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
	plan.Plan `json:",inline"`
	// Progress holds one entry per step started so far.
	// +optional
	Progress []StepProgress `json:"progress,omitempty"`
	// +optional
	Phase PlanPhase `json:"phase,omitempty"`
	// Current is the index of the step being applied.
	// +optional
	Current int32 `json:"current,omitempty"`
	// Summary is "k/n Action", for kubectl get.
	// +optional
	Summary string `json:"summary,omitempty"`
	// +optional
	CreatedAt *Instant `json:"createdAt,omitempty"`
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
	StartedAt *Instant `json:"startedAt,omitempty"`
	// +optional
	FinishedAt *Instant `json:"finishedAt,omitempty"`
}
