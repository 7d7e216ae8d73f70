# etcdplan: build, test, generate, demo.
SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/bin
CONTROLLER_GEN := $(GO) run sigs.k8s.io/controller-tools/cmd/controller-gen@v0.21.0

# test/stack.mk builds the local Kubernetes stack and adds its binaries to TEST_DEPS.
TEST_DEPS :=
include test/stack.mk

.PHONY: all build test lint generate demo bench fuzz
all: build

build:
	$(GO) build -o $(BIN)/manager ./cmd/manager
	$(GO) build -o $(BIN)/kubectl-etcd ./cmd/kubectl-etcd

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); [ -z "$$out" ] || { echo "gofmt: $$out"; exit 1; }
	$(GO) vet ./...

generate:
	$(CONTROLLER_GEN) object paths=./api/...
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=kustomize/crd/bases

test: lint $(TEST_DEPS)
	$(GO) test ./...

demo:
	GO=$(GO) BIN=$(BIN) examples/demo.sh

fuzz:
	$(GO) test -run '^$$' -fuzz FuzzPlan -fuzztime 60s ./planner/
