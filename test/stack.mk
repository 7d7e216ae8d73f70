# Local Kubernetes stack for end-to-end tests and the demo (docs/development.md).
#
# Every binary is built from the Go module proxy into bin/, one directory per version. Binaries
# from a tools module are file targets that depend on that module's go.mod/go.sum, so a second
# run rebuilds nothing. Binaries from the test module (test/go.mod) are always handed to `go
# build`, which relinks only when a source changed.

KUBE_VERSION := v1.36.3
ETCD_VERSION := v3.6.16
ETCD_PREV_VERSION := v3.5.35
MINIO_VERSION := v0.0.0-20260212201848-7aac2a2c5b7c
FAKE_GCS_VERSION := v1.56.1

# At most two packages at a time: CI machines have two cores. Each slow build says when it
# starts and how long it took (test/build-step.sh NAME DIR COMMAND...).
STACK_GOBUILD := $(GO) build -trimpath -p 2
BUILD_STEP := @$(CURDIR)/test/build-step.sh

# --- Kubernetes: kube-apiserver, kube-controller-manager, kube-scheduler, kubectl -----------
KUBE_BIN := $(BIN)/kube-$(KUBE_VERSION)
KUBE_CMDS := kube-apiserver kube-controller-manager kube-scheduler kubectl
KUBE_MAJOR := $(word 1,$(subst ., ,$(patsubst v%,%,$(KUBE_VERSION))))
KUBE_MINOR := $(word 2,$(subst ., ,$(patsubst v%,%,$(KUBE_VERSION))))
KUBE_VERSION_X := $(foreach p,k8s.io/component-base/version k8s.io/client-go/pkg/version,\
	-X $(p).gitVersion=$(KUBE_VERSION) -X $(p).gitMajor=$(KUBE_MAJOR) \
	-X $(p).gitMinor=$(KUBE_MINOR) -X $(p).gitTreeState=clean)
KUBE_TOOLS := test/tools/kube

$(KUBE_BIN)/%: $(KUBE_TOOLS)/go.mod $(KUBE_TOOLS)/go.sum
	$(BUILD_STEP) "$* $(KUBE_VERSION)" $(KUBE_TOOLS) $(STACK_GOBUILD) -ldflags "-s -w $(KUBE_VERSION_X)" -o $@ k8s.io/kubernetes/cmd/$*

# --- etcd, etcdctl, etcdutl: one tools module per minor version ------------------------------
# $(1): version (v3.6.16), $(2): tools module directory.
define ETCD_RULES
$(BIN)/etcd-$(1)/etcd: $(2)/go.mod $(2)/go.sum
	$(BUILD_STEP) "etcd $(1)" $(2) $(STACK_GOBUILD) -ldflags "-s -w" -o $$@ go.etcd.io/etcd/server/v3
$(BIN)/etcd-$(1)/etcdctl: $(2)/go.mod $(2)/go.sum
	$(BUILD_STEP) "etcdctl $(1)" $(2) $(STACK_GOBUILD) -ldflags "-s -w" -o $$@ go.etcd.io/etcd/etcdctl/v3
$(BIN)/etcd-$(1)/etcdutl: $(2)/go.mod $(2)/go.sum
	$(BUILD_STEP) "etcdutl $(1)" $(2) $(STACK_GOBUILD) -ldflags "-s -w" -o $$@ go.etcd.io/etcd/etcdutl/v3
endef
$(eval $(call ETCD_RULES,$(ETCD_VERSION),test/tools/etcd-3.6))
$(eval $(call ETCD_RULES,$(ETCD_PREV_VERSION),test/tools/etcd-3.5))
ETCD_BINS := $(foreach v,$(ETCD_VERSION) $(ETCD_PREV_VERSION),$(addprefix $(BIN)/etcd-$(v)/,etcd etcdctl etcdutl))

# --- Convenience links: bin/kubectl and bin/etcdctl ------------------------------------------
$(BIN)/kubectl: $(KUBE_BIN)/kubectl
	ln -sfn kube-$(KUBE_VERSION)/kubectl $@
$(BIN)/etcdctl: $(BIN)/etcd-$(ETCD_VERSION)/etcdctl
	ln -sfn etcd-$(ETCD_VERSION)/etcdctl $@

# --- Test-module binaries (test/go.mod): the local kubelet and the stack orchestrator -------
.PHONY: $(BIN)/localkubelet $(BIN)/stackctl
$(BIN)/localkubelet $(BIN)/stackctl &:
	cd test && $(GO) build -o $(BIN)/ ./kubelet/cmd/localkubelet ./stack/cmd/stackctl

STACK_BINS := $(addprefix $(KUBE_BIN)/,$(KUBE_CMDS)) $(ETCD_BINS) $(BIN)/kubectl $(BIN)/etcdctl \
	$(BIN)/localkubelet $(BIN)/stackctl

# --- Backup test servers: MinIO (make test's S3 tests) and fake-gcs-server -------------------
MINIO_BIN := $(BIN)/minio-$(MINIO_VERSION)/minio
FAKE_GCS_BIN := $(BIN)/fake-gcs-server-$(FAKE_GCS_VERSION)/fake-gcs-server
$(MINIO_BIN): test/tools/minio/go.mod test/tools/minio/go.sum
	$(BUILD_STEP) "minio (S3 for the backup tests)" test/tools/minio $(STACK_GOBUILD) -ldflags "-s -w" -o $@ github.com/minio/minio
$(FAKE_GCS_BIN): test/tools/fake-gcs-server/go.mod test/tools/fake-gcs-server/go.sum
	$(BUILD_STEP) "fake-gcs-server (GCS for the backup tests)" test/tools/fake-gcs-server $(STACK_GOBUILD) -ldflags "-s -w" -o $@ github.com/fsouza/fake-gcs-server

# --- Flux's source-controller and kustomize-controller (make test's GitOps tests) -----------
# Each binary's directory also holds its CRDs, copied from the module it is built from.
# $(1): name (source-controller), $(2): version, $(3): tools module directory.
define FLUX_RULES
$(BIN)/flux-$(1)-$(2)/$(1): $(3)/go.mod $(3)/go.sum
	mkdir -p $$(@D)/crds && dir=$$$$(GO=$(GO) $(CURDIR)/test/module-dir.sh $(3) github.com/fluxcd/$(1)) && \
		cp -f "$$$$dir"/config/crd/bases/*.yaml $$(@D)/crds/ && chmod u+w $$(@D)/crds/*
	$(BUILD_STEP) "$(1) $(2) (Flux, for the GitOps tests)" $(3) $(STACK_GOBUILD) -ldflags "-s -w" -o $$@ github.com/fluxcd/$(1)
endef
FLUX_SOURCE_VERSION := v1.9.6
FLUX_KUSTOMIZE_VERSION := v1.9.5
$(eval $(call FLUX_RULES,source-controller,$(FLUX_SOURCE_VERSION),test/tools/flux-source))
$(eval $(call FLUX_RULES,kustomize-controller,$(FLUX_KUSTOMIZE_VERSION),test/tools/flux-kustomize))
FLUX_BINS := $(BIN)/flux-source-controller-$(FLUX_SOURCE_VERSION)/source-controller \
	$(BIN)/flux-kustomize-controller-$(FLUX_KUSTOMIZE_VERSION)/kustomize-controller

# --- cert-manager (make test's TLS tests): the project's own main over cert-manager's
# controller packages (test/tools/cert-manager), CA and self-signed issuers only, no webhook.
# Its directory also holds the CRDs of the module it is built from.
CERT_MANAGER_VERSION := v1.21.2
CERT_MANAGER_TOOLS := test/tools/cert-manager
CERT_MANAGER_BIN := $(BIN)/cert-manager-$(CERT_MANAGER_VERSION)/cert-manager
$(CERT_MANAGER_BIN): $(CERT_MANAGER_TOOLS)/go.mod $(CERT_MANAGER_TOOLS)/go.sum $(CERT_MANAGER_TOOLS)/main.go
	mkdir -p $(@D)/crds && dir=$$(GO=$(GO) $(CURDIR)/test/module-dir.sh $(CERT_MANAGER_TOOLS) github.com/cert-manager/cert-manager) && \
		cp -f "$$dir"/deploy/crds/cert-manager.io_*.yaml $(@D)/crds/ && chmod u+w $(@D)/crds/*
	$(BUILD_STEP) "cert-manager $(CERT_MANAGER_VERSION) (for the TLS tests)" $(CERT_MANAGER_TOOLS) $(STACK_GOBUILD) -ldflags "-s -w" -o $@ .

# --- The real node (node-4, ETCDPLAN_REAL_NODE=1): the kubelet, containerd, CNI plugins -----
# containerd and its shim are built without cgo (no btrfs, devmapper or zfs snapshotters: the
# node uses overlayfs); runc needs cgo and libseccomp, so it is Debian's (real-node-deps).
CONTAINERD_VERSION := v2.2.9
CNI_PLUGINS_VERSION := v1.9.1
CONTAINERD_BIN := $(BIN)/containerd-$(CONTAINERD_VERSION)
CONTAINERD_CMDS := containerd containerd-shim-runc-v2 ctr
CNI_BIN := $(BIN)/cni-plugins-$(CNI_PLUGINS_VERSION)
CNI_PLUGINS := main/bridge ipam/host-local main/loopback
$(CONTAINERD_BIN)/%: test/tools/containerd/go.mod test/tools/containerd/go.sum
	$(BUILD_STEP) "$* $(CONTAINERD_VERSION) (the real node)" test/tools/containerd env CGO_ENABLED=0 $(STACK_GOBUILD) \
		-tags "no_btrfs no_devmapper no_zfs" -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$(CONTAINERD_VERSION)" \
		-o $@ github.com/containerd/containerd/v2/cmd/$*
define CNI_RULE
$(CNI_BIN)/$(notdir $(1)): test/tools/cni/go.mod test/tools/cni/go.sum
	$(BUILD_STEP) "CNI $(notdir $(1)) $(CNI_PLUGINS_VERSION) (the real node)" test/tools/cni env CGO_ENABLED=0 $(STACK_GOBUILD) \
		-ldflags "-s -w" -o $$@ github.com/containernetworking/plugins/plugins/$(1)
endef
$(foreach p,$(CNI_PLUGINS),$(eval $(call CNI_RULE,$(p))))
REAL_NODE_BINS := $(KUBE_BIN)/kubelet $(addprefix $(CONTAINERD_BIN)/,$(CONTAINERD_CMDS)) \
	$(addprefix $(CNI_BIN)/,$(notdir $(CNI_PLUGINS)))

.PHONY: real-node-bins real-node-deps
real-node-bins: $(REAL_NODE_BINS)
# runc from Debian's package, installed as root like any other dependency of the real node.
real-node-deps:
	@command -v runc >/dev/null || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runc; }

# The real node's images hold static builds (CGO_ENABLED=0): the stack's own binaries use cgo
# and find no C library inside an image. The stack writes them into OCI archives under
# bin/images and imports them when node-4 starts (test/stack/realnode_images.go).
STATIC_BIN := $(BIN)/static
define STATIC_ETCD_RULES
$(STATIC_BIN)/etcd-$(1)/etcd: $(2)/go.mod $(2)/go.sum
	$(BUILD_STEP) "etcd $(1), static (the real node's image)" $(2) env CGO_ENABLED=0 $(STACK_GOBUILD) -ldflags "-s -w" -o $$@ go.etcd.io/etcd/server/v3
$(STATIC_BIN)/etcd-$(1)/etcdctl: $(2)/go.mod $(2)/go.sum
	$(BUILD_STEP) "etcdctl $(1), static (the real node's image)" $(2) env CGO_ENABLED=0 $(STACK_GOBUILD) -ldflags "-s -w" -o $$@ go.etcd.io/etcd/etcdctl/v3
$(STATIC_BIN)/etcd-$(1)/etcdutl: $(2)/go.mod $(2)/go.sum
	$(BUILD_STEP) "etcdutl $(1), static (the real node's image)" $(2) env CGO_ENABLED=0 $(STACK_GOBUILD) -ldflags "-s -w" -o $$@ go.etcd.io/etcd/etcdutl/v3
endef
$(eval $(call STATIC_ETCD_RULES,$(ETCD_VERSION),test/tools/etcd-3.6))
$(eval $(call STATIC_ETCD_RULES,$(ETCD_PREV_VERSION),test/tools/etcd-3.5))
# The operator and the sandbox's pause: handed to `go build` every time, like bin/manager.
.PHONY: $(STATIC_BIN)/manager $(STATIC_BIN)/pause
$(STATIC_BIN)/manager:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $@ ./cmd/manager
$(STATIC_BIN)/pause:
	cd test && CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w" -o $@ ./stack/cmd/pause
REAL_NODE_BINS += $(foreach v,$(ETCD_VERSION) $(ETCD_PREV_VERSION),$(addprefix $(STATIC_BIN)/etcd-$(v)/,etcd etcdctl etcdutl)) \
	$(STATIC_BIN)/manager $(STATIC_BIN)/pause
REAL_NODE_SLOW_BINS := $(filter-out $(STATIC_BIN)/manager $(STATIC_BIN)/pause,$(REAL_NODE_BINS))
real-node-bins: $(REAL_NODE_BINS)

# REAL_NODE=1 (or ETCDPLAN_REAL_NODE=1 in the environment) adds node-4 to a stack that starts:
# `make stack-up REAL_NODE=1`, `make demo REAL_NODE=1`. make test runs node-4's self-tests in
# stack-selftest-exclusive, which asks for it itself.
ifeq ($(REAL_NODE),1)
export ETCDPLAN_REAL_NODE := 1
endif
ifeq ($(ETCDPLAN_REAL_NODE),1)
stack-up: $(REAL_NODE_BINS) real-node-deps
endif
stack-selftest-exclusive: $(REAL_NODE_BINS) real-node-deps

# build-plan (make test) and stack-build-plan (the stack alone) say, before the slow builds,
# which binaries a first run builds and roughly how long each takes, or that all are built.
STACK_SLOW_BINS := $(addprefix $(KUBE_BIN)/,$(KUBE_CMDS)) $(ETCD_BINS)
build-plan:
	@$(CURDIR)/test/build-plan.sh $(STACK_SLOW_BINS) $(MINIO_BIN) $(FAKE_GCS_BIN) $(FLUX_BINS) $(CERT_MANAGER_BIN) $(REAL_NODE_SLOW_BINS)
stack-build-plan:
	@$(CURDIR)/test/build-plan.sh $(STACK_SLOW_BINS)

.PHONY: build-plan stack-build-plan kube-bins etcd-bins stack-bins backup-bins flux-bins certmgr-bins stack-up stack-down stack-status stack-selftest-exclusive
kube-bins: $(addprefix $(KUBE_BIN)/,$(KUBE_CMDS)) $(BIN)/kubectl
etcd-bins: $(ETCD_BINS) $(BIN)/etcdctl
stack-bins: $(STACK_BINS)
backup-bins: $(MINIO_BIN) $(FAKE_GCS_BIN)
flux-bins: $(FLUX_BINS)
certmgr-bins: $(CERT_MANAGER_BIN)

# Starts the stack in the background (or reuses a running one) and waits until it is ready.
stack-up: stack-build-plan $(STACK_BINS)
	$(BIN)/stackctl --root $(CURDIR) up

# Stops every process of the stack and removes its network namespaces, mounts, bridge and state.
stack-down: $(BIN)/stackctl $(BIN)/localkubelet
	$(BIN)/stackctl --root $(CURDIR) down

stack-status: $(BIN)/stackctl
	$(BIN)/stackctl --root $(CURDIR) status

# Self-tests that need the stack to themselves (a node is stopped, one is cut off the API
# server, node-4 runs its Pods; the stack is taken down and checked for leftovers). `make
# test` runs them after `go test ./...`, alone.
stack-selftest-exclusive: $(STACK_BINS)
	cd test && ETCDPLAN_STACK_EXCLUSIVE=1 ETCDPLAN_REAL_NODE=1 $(GO) test -count=1 -timeout 20m -run '^TestExclusive' ./stack/selftest/

TEST_DEPS += $(STACK_BINS) $(MINIO_BIN) $(FAKE_GCS_BIN) $(FLUX_BINS) $(CERT_MANAGER_BIN) $(REAL_NODE_BINS) real-node-deps
