package cli

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcdplan/etcdplan/planner"
)

// A Pod whose preflight check found the data gone and one that could not read it read
// differently: the second member is down, not lost.
func TestPodStateOfAFailedPreflight(t *testing.T) {
	p := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodFailed}}
	require.Equal(t, "DataLost", podState(p, &planner.Pod{Failed: true, DataLost: true}))
	require.Equal(t, "PreflightFailed", podState(p, &planner.Pod{Failed: true, PreflightError: "exit code 5: permission denied"}))
}
