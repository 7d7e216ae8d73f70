//go:build tools

// Package tools pins the MinIO server built by test/stack.mk (make backup-bins).
package tools

import _ "github.com/minio/minio"
