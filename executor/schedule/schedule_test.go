package schedule

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestLast(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339, s)
		require.NoError(t, err)
		return v
	}
	for _, c := range []struct {
		expr, since, now, want string
	}{
		{"0 3 * * *", "2026-11-20T03:00:00Z", "2026-11-20T12:00:00Z", ""},
		{"0 3 * * *", "2026-11-20T03:00:00Z", "2026-11-21T03:00:00Z", "2026-11-21T03:00:00Z"},
		{"0 3 * * *", "2026-11-01T00:00:00Z", "2026-11-21T02:59:59Z", "2026-11-20T03:00:00Z"},
		{"* * * * *", "2020-01-01T00:00:00Z", "2026-11-21T10:20:30Z", "2026-11-21T10:20:00Z"},
		{"*/10 * * * * *", "2026-11-21T10:20:00Z", "2026-11-21T10:20:25Z", "2026-11-21T10:20:20Z"},
		{"@yearly", "2024-06-01T00:00:00Z", "2026-11-21T00:00:00Z", "2026-01-01T00:00:00Z"},
		{"CRON_TZ=Europe/Berlin 0 3 * * *", "2026-11-20T12:00:00Z", "2026-11-21T12:00:00Z", "2026-11-21T02:00:00Z"},
		{"0 0 30 2 *", "2020-01-01T00:00:00Z", "2026-11-21T00:00:00Z", ""},
	} {
		s, err := Parse(c.expr)
		require.NoError(t, err, c.expr)
		got := Last(s, at(c.since), at(c.now))
		if c.want == "" {
			require.True(t, got.IsZero(), "%s since %s: got %v", c.expr, c.since, got)
			continue
		}
		require.True(t, got.Equal(at(c.want)), "%s since %s until %s: got %v, want %s", c.expr, c.since, c.now, got, c.want)
	}
}

func TestParseRefuses(t *testing.T) {
	for _, expr := range []string{"", "* * *", "61 * * * *", "@sometimes", "0 3 * * * * *"} {
		_, err := Parse(expr)
		require.Error(t, err, expr)
	}
}
