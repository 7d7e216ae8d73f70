//go:build tools

// Package tools pins the etcd 3.6 commands built by test/stack.mk: the upstream main
// packages (the server's is etcdmain.Main(os.Args)).
package tools

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/etcdutl/v3"
	_ "go.etcd.io/etcd/server/v3"
)
