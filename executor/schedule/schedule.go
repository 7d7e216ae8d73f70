// Package schedule reads the API's cron expressions and finds when they came.
package schedule

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// parser reads five fields (minute first) or six (seconds first), descriptors such as
// @daily, and a CRON_TZ= prefix.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse parses a cron expression as the API documents it.
func Parse(expr string) (cron.Schedule, error) { return parser.Parse(expr) }

// windows are how far back Last looks, nearest first, so that a schedule that comes
// often is not stepped through since a time long ago.
var windows = []time.Duration{time.Second, time.Minute, time.Hour, 24 * time.Hour, 32 * 24 * time.Hour, 366 * 24 * time.Hour, 5 * 366 * 24 * time.Hour}

// Last is the last time the schedule came after since and no later than now; zero when
// it did not.
func Last(s cron.Schedule, since, now time.Time) time.Time {
	for _, w := range windows {
		from := now.Add(-w)
		if from.Before(since) {
			from = since
		}
		var last time.Time
		for t := s.Next(from); !t.IsZero() && !t.After(now); t = s.Next(t) {
			last = t
		}
		if !last.IsZero() || from.Equal(since) {
			return last
		}
	}
	return time.Time{}
}

// DefragInvalid says what is wrong with spec.maintenance.defrag.schedule; "" when nothing.
func DefragInvalid(s *v1alpha1.EtcdClusterSpec) string {
	if s.Maintenance == nil || s.Maintenance.Defrag == nil || s.Maintenance.Defrag.Schedule == "" {
		return ""
	}
	if _, err := Parse(s.Maintenance.Defrag.Schedule); err != nil {
		return fmt.Sprintf("spec.maintenance.defrag.schedule %q: %v", s.Maintenance.Defrag.Schedule, err)
	}
	return ""
}
