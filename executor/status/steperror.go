package status

import "fmt"

// StepError is a step (or a backup) that cannot go on for now, with what it waits for and
// the reason its condition gives ("" for the general one): a step's Stalled reason once it
// passes its deadline, a backup's reason while it is retried.
type StepError struct{ Reason, Msg string }

func (e *StepError) Error() string { return e.Msg }

// Stuck is a StepError with a reason: something a person must fix.
func Stuck(reason, format string, args ...any) error {
	return &StepError{Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// Waiting is a StepError without a reason: the step waits on something that comes by itself.
func Waiting(format string, args ...any) error {
	return &StepError{Msg: fmt.Sprintf(format, args...)}
}
