package status

import "time"

// Now reads a reconciler's clock, the system's when it has none.
func Now(clock func() time.Time) time.Time {
	if clock != nil {
		return clock()
	}
	return time.Now()
}
