// Package e2e runs the operator against the local Kubernetes stack: a real kube-apiserver,
// real etcd members in Pods run by the local kubelet.
package e2e

import (
	"os"
	"testing"

	"github.com/etcdplan/etcdplan/test/framework"
)

func TestMain(m *testing.M) {
	os.Exit(framework.Run(m))
}
