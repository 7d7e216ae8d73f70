package status

import (
	"github.com/fluxcd/pkg/apis/meta"
	"github.com/fluxcd/pkg/runtime/conditions"
)

// Progressing marks an object Reconciling and, as kstatus and Flux expect meanwhile, not Ready.
func Progressing(obj conditions.Setter, reason, msg string) {
	conditions.MarkReconciling(obj, reason, "%s", msg)
	conditions.MarkFalse(obj, meta.ReadyCondition, reason, "%s", msg)
}

// Stall marks an object Stalled (which ends Reconciling) and not Ready, for a reason
// retrying will not cure.
func Stall(obj conditions.Setter, reason, msg string) {
	conditions.MarkStalled(obj, reason, "%s", msg)
	conditions.MarkFalse(obj, meta.ReadyCondition, reason, "%s", msg)
}
