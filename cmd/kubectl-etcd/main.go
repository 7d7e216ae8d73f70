// Command kubectl-etcd plans changes to EtcdClusters before they are applied. On the PATH
// it is also a kubectl plugin: `kubectl etcd plan -k overlays/prod --observed state.json`.
package main

import (
	"os"

	"github.com/etcdplan/etcdplan/cmd/kubectl-etcd/cli"
)

func main() {
	os.Exit(cli.Run(os.Args[1:], os.Stdout, os.Stderr))
}
