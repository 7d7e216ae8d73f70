package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Instant is a moment a plan or step reached, recorded to the microsecond so step timings
// can be measured (RFC 3339 with microseconds, as metav1.MicroTime). It also reads the
// whole-second times that earlier operators wrote, so a plan in flight survives an upgrade.
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:Format=date-time
type Instant struct {
	metav1.MicroTime `json:",inline"`
}

// At is t as an Instant.
func At(t time.Time) *Instant { return &Instant{metav1.NewMicroTime(t)} }

// UnmarshalJSON reads microsecond and whole-second times alike.
func (t *Instant) UnmarshalJSON(b []byte) error {
	if err := t.MicroTime.UnmarshalJSON(b); err == nil {
		return nil
	}
	var s metav1.Time
	if err := s.UnmarshalJSON(b); err != nil {
		return err
	}
	t.MicroTime = metav1.NewMicroTime(s.Time)
	return nil
}

// When is the moment, or the zero time when none was recorded.
func (t *Instant) When() time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}
