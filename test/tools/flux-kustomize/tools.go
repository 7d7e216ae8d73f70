//go:build tools

// Package tools pins Flux's kustomize-controller built by test/stack.mk (make flux-bins).
package tools

import _ "github.com/fluxcd/kustomize-controller"
