# etcdplan: build, test, generate, demo.
SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/bin
CONTROLLER_GEN := $(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.21.0

# test/ is a module of its own (test/go.mod): the local stack, the local kubelet, and the
# end-to-end, chaos and benchmark suites. `go test ./...` here does not descend into it, so
# each target below that runs its tests changes into test/ first.
#
# test/stack.mk builds the local Kubernetes stack (and the kube-apiserver and etcd the API
# admission tests use) and adds its binaries to TEST_DEPS.
TEST_DEPS :=
include test/stack.mk

.PHONY: all build test lint generate demo demo-offline deploy undeploy e2e bench fuzz chaos release-manifests
all: build

# One `go build` for both commands: it links them side by side.
build:
	$(GO) build -o $(BIN)/ ./cmd/manager ./cmd/kubectl-etcd

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt: $$out"; exit 1; }
	@echo "go vet ./... and (cd test && go vet ./...), side by side"; \
	$(GO) vet ./... & product=$$!; (cd test && $(GO) vet ./...); tests=$$?; \
	wait $$product && [ $$tests -eq 0 ]

generate:
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=kustomize/crd/bases

# The end-to-end tests run many clusters side by side; each waits mostly on etcd and Pods.
# The tests that need the stack to themselves (nodes cut off the API server, a node
# stopped, the stack taken down and checked for leftovers) run after all the others: the
# stack is down at the end. The exclusive end-to-end tests add node-4, the real node, to the
# stack (ETCDPLAN_REAL_NODE=1) and run the operator's cluster there too.
# The product module's tests run beside the test module's (they need no stack and mostly
# wait); their output is printed whole once both are done.
test: lint build build-plan $(TEST_DEPS)
	@out=$$(mktemp); trap 'rm -f $$out' EXIT; \
	$(GO) test -timeout 60m -parallel 4 ./... > $$out 2>&1 & product=$$!; \
	(cd test && $(GO) test -timeout 60m -parallel 4 ./...); tests=$$?; \
	wait $$product; rc=$$?; echo "the product module's tests (go test ./...):"; cat $$out; \
	[ $$tests -eq 0 ] && [ $$rc -eq 0 ]
	cd test/tools/promrules && $(GO) test -count=1 ./...
	cd test && CHAOS_SEEDS=1,2 $(GO) test -count=1 -timeout 30m -parallel 4 -run '^TestChaos$$' ./e2e/
	cd test && ETCDPLAN_STACK_EXCLUSIVE=1 ETCDPLAN_REAL_NODE=1 $(GO) test -count=1 -timeout 10m -run '^TestExclusive' ./e2e/
	$(MAKE) --no-print-directory stack-selftest-exclusive

KUBECTL := $(BIN)/kubectl --kubeconfig $(CURDIR)/.stack/kubeconfig

# deploy installs the operator into the local stack with its own kustomize manifests; the
# stack maps the operator image to bin/manager.
deploy: build stack-up
	$(KUBECTL) apply --server-side --force-conflicts -k kustomize/default
	$(KUBECTL) -n etcdplan-system rollout restart deployment/etcdplan
	$(KUBECTL) -n etcdplan-system rollout status deployment/etcdplan --timeout=180s

# e2e runs the operator's end-to-end tests on the local stack.
e2e: build $(TEST_DEPS)
	cd test && $(GO) test -timeout 60m -parallel 4 -v ./e2e/

# release-manifests writes dist/etcdplan.yaml (the operator and its CRDs, for the whole
# cluster) and dist/etcdplan-crds.yaml (the CRDs alone, for namespace-scoped installs), with
# the operator's image IMAGE.
IMAGE ?= ghcr.io/etcdplan/etcdplan:$(shell git describe --tags --always --dirty)
release-manifests:
	$(GO) run ./tools/release-manifests -image $(IMAGE) -o dist/etcdplan.yaml
	$(GO) run ./tools/release-manifests -image $(IMAGE) -k kustomize/crd -o dist/etcdplan-crds.yaml
	@echo "wrote dist/etcdplan.yaml and dist/etcdplan-crds.yaml for $(IMAGE)"

undeploy:
	$(KUBECTL) delete --ignore-not-found -k kustomize/default

# demo starts the local stack, installs the operator and scales an example cluster while
# `kubectl get` shows the plan move; demo-offline prints plans without a cluster.
demo:
	MAKE="$(MAKE)" examples/demo-live.sh

demo-offline:
	GO=$(GO) BIN=$(BIN) examples/demo.sh

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzPlan -fuzztime 60s ./planner/

# chaos runs randomized schedules of operations and faults on the local stack, seeds 1 to
# SEEDS (or CHAOS_SEEDS=a,b,c), checking the clients' history for linearizability; make test
# runs seeds 1 and 2 after the other tests. Then NODE_SEEDS seeds run one at a time with
# nodes stopped among the faults, and QL_SEEDS seeds of quorum loss (two members' volumes
# wiped, or all three) recovered automatically. Reports go to .stack/chaos.
SEEDS ?= 20
NODE_SEEDS ?= 101,102,103
QL_SEEDS ?= 10
chaos: build $(TEST_DEPS)
	cd test && CHAOS_SEEDS=$${CHAOS_SEEDS:-$(SEEDS)} $(GO) test -count=1 -timeout 120m -parallel 4 -run '^TestChaos$$' -v ./e2e/
	cd test && CHAOS_SEEDS=$(NODE_SEEDS) CHAOS_NODE_STOPS=1 $(GO) test -count=1 -timeout 60m -parallel 1 -run '^TestChaos$$' -v ./e2e/
	cd test && CHAOS_SEEDS=$(QL_SEEDS) $(GO) test -count=1 -timeout 60m -parallel 4 -run '^TestChaosQuorumLoss$$' -v ./e2e/

# bench prints the planner's speed and allocations (plans of 1 to 9 members, cold and
# converged), then measures each scenario on the local stack against
# the floor and writes docs/benchmarks.md with its plots.
bench: build $(TEST_DEPS)
	$(GO) test -run '^$$' -bench . -benchmem ./planner/
	cd test && BENCH=1 $(GO) test -count=1 -timeout 60m -run '^TestBench(Backup)?$$' -v ./bench/
