// Package store keeps backups in object stores: S3 and S3-compatible stores, and Google
// Cloud Storage. Objects stream in and out; none is held whole in memory.
package store

import (
	"context"
	"errors"
	"io"
	"time"
)

// Object is one stored object.
type Object struct {
	Key      string
	Size     int64
	Modified time.Time
}

// Store is a bucket, under a prefix.
type Store interface {
	// Put stores what r yields under key. When r or the store fails, nothing is left under
	// key.
	Put(ctx context.Context, key string, r io.Reader) error
	// Get reads the object under key.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Close releases the client; the store is not used after.
	Close() error
	// Delete deletes the object under key; one already gone is no error.
	Delete(ctx context.Context, key string) error
	// List lists the objects whose keys start with prefix.
	List(ctx context.Context, prefix string) ([]Object, error)
	// URI names the object under key, such as s3://bucket/prefix/key.
	URI(key string) string
}

// Refused errors are the store's answer that retrying will not change: no such bucket,
// access denied, credentials it does not accept.
var ErrRefused = errors.New("refused by the store")

// ErrFull is the store out of space: a try after space is freed there can succeed.
var ErrFull = errors.New("the destination is full")

// partSize is what a store holds in memory of an object being written.
const partSize = 8 << 20
