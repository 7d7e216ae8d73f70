package v1alpha1

import (
	"encoding/json"
	"testing"
	"time"
)

// Step times keep microseconds, and a plan recorded with whole seconds still reads.
func TestInstantReadsBothPrecisions(t *testing.T) {
	at := time.Date(2026, 11, 22, 19, 50, 21, 123456000, time.UTC)
	b, err := json.Marshal(StepProgress{State: StepRunning, StartedAt: At(at)})
	if err != nil {
		t.Fatal(err)
	}
	var back StepProgress
	if err := json.Unmarshal(b, &back); err != nil || !back.StartedAt.Time.Equal(at) {
		t.Fatalf("round trip of %s: %v, %v", b, back.StartedAt, err)
	}
	var old StepProgress
	if err := json.Unmarshal([]byte(`{"state":"Running","startedAt":"2026-11-22T19:50:21Z"}`), &old); err != nil {
		t.Fatal(err)
	}
	if want := at.Truncate(time.Second); !old.StartedAt.Time.Equal(want) {
		t.Fatalf("whole seconds read as %v, want %v", old.StartedAt.Time, want)
	}
	if err := json.Unmarshal([]byte(`{"state":"Running","startedAt":"yesterday"}`), &old); err == nil {
		t.Fatal("a time that is not RFC 3339 was read")
	}
	if !(*Instant)(nil).When().IsZero() {
		t.Fatal("no time recorded is the zero time")
	}
}
