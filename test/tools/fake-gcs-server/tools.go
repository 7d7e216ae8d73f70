//go:build tools

// Package tools pins fake-gcs-server built by test/stack.mk (make backup-bins).
package tools

import _ "github.com/fsouza/fake-gcs-server"
