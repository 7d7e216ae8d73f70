// Package bench measures the operator on the local Kubernetes stack against the floor (the
// same Pod and etcd operations driven directly) and writes docs/benchmarks.md: make bench.
package bench

import (
	"os"
	"testing"

	"github.com/etcdplan/etcdplan/test/framework"
)

// TestMain sets up the stack only when BENCH is set: under a plain `go test ./...` every
// benchmark skips itself, and the end-to-end suite has the stack.
func TestMain(m *testing.M) {
	if os.Getenv("BENCH") == "" {
		os.Exit(m.Run())
	}
	os.Exit(framework.Run(m))
}
