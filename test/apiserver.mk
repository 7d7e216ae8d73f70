# kube-apiserver and etcd for the API admission tests (api/v1alpha1), built from the tools
# modules under test/tools into bin/, keyed by version. test/stack.mk builds the same
# binaries (and more) for the local stack; these rules stand in only while it does not.
APISERVER_BINS := $(BIN)/kube-v1.36.3/kube-apiserver $(BIN)/etcd-v3.6.16/etcd
ifndef STACK_BINS
$(BIN)/kube-v1.36.3/kube-apiserver: test/tools/kube/go.mod test/tools/kube/go.sum
	cd test/tools/kube && $(GO) build -trimpath -p 2 -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=v1.36.3 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36" -o $@ k8s.io/kubernetes/cmd/kube-apiserver
$(BIN)/etcd-v3.6.16/etcd: test/tools/etcd-3.6/go.mod test/tools/etcd-3.6/go.sum
	cd test/tools/etcd-3.6 && $(GO) build -trimpath -p 2 -ldflags "-s -w" -o $@ go.etcd.io/etcd/server/v3
endif
TEST_DEPS += $(APISERVER_BINS)
