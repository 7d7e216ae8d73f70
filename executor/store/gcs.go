package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
	"google.golang.org/api/option"
	htransport "google.golang.org/api/transport/http"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// GCSConfig is a Google Cloud Storage bucket.
type GCSConfig struct {
	Bucket, Prefix string
	// Endpoint of the JSON API, such as https://host:4443 for an emulator; empty is Google's.
	Endpoint string
	// ServiceAccountJSON is a service account key. Empty uses the ambient credentials
	// (workload identity), or none when Endpoint is set: emulators take no credentials.
	ServiceAccountJSON []byte
}

// GCS is a Google Cloud Storage bucket, under a prefix.
type GCS struct {
	c              *storage.Client
	bucket, prefix string
}

// NewGCS prepares a client of the bucket; it does not call the store.
func NewGCS(ctx context.Context, cfg GCSConfig) (*GCS, error) {
	// Reads by the JSON API like the rest, not the XML one: emulators and gateways serve it.
	opts := []option.ClientOption{option.WithTelemetryDisabled(), storage.WithJSONReads()}
	switch {
	case len(cfg.ServiceAccountJSON) > 0:
		opts = append(opts, option.WithAuthCredentialsJSON(option.ServiceAccount, cfg.ServiceAccountJSON))
	case cfg.Endpoint != "":
		opts = append(opts, option.WithoutAuthentication())
	}
	if cfg.Endpoint != "" {
		opts = append(opts, option.WithEndpoint(strings.TrimSuffix(cfg.Endpoint, "/")+"/storage/v1/"))
	}
	// The bounded transport under the library's own (authentication, headers).
	rt, err := htransport.NewTransport(ctx, transport(), opts...)
	var c *storage.Client
	if err == nil {
		c, err = storage.NewClient(ctx, append(opts, option.WithHTTPClient(&http.Client{Transport: rt}))...)
	}
	switch {
	case err != nil && len(cfg.ServiceAccountJSON) > 0:
		// The library's message may quote the key it could not read.
		return nil, fmt.Errorf("%w: GCS client for bucket %s: the service account key is not one", ErrRefused, cfg.Bucket)
	case err != nil:
		return nil, fmt.Errorf("%w: GCS client for bucket %s: no ambient credentials: %v", ErrRefused, cfg.Bucket, err)
	}
	c.SetRetry(storage.WithMaxAttempts(Attempts))
	return &GCS{c: c, bucket: cfg.Bucket, prefix: cfg.Prefix}, nil
}

// Close closes the client and its connections.
func (g *GCS) Close() error { return g.c.Close() }

func (g *GCS) object(k string) *storage.ObjectHandle {
	return g.c.Bucket(g.bucket).Object(path.Join(g.prefix, k))
}

// URI is gs://bucket/prefix/key.
func (g *GCS) URI(k string) string {
	return v1alpha1.BackupDestination{GCS: &v1alpha1.GCSDestination{Bucket: g.bucket, Prefix: g.prefix}}.URI(k)
}

// Put writes a resumable upload one chunk at a time, so at most a chunk is in memory; the
// object appears only when the last chunk is in, and a failed upload is cancelled.
func (g *GCS) Put(ctx context.Context, k string, r io.Reader) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := g.object(k).NewWriter(ctx)
	w.ChunkSize = partSize
	w.ContentType = "application/octet-stream"
	if _, err := io.Copy(w, r); err != nil {
		cancel() // before Close, so the upload is abandoned rather than finished short
		_ = w.Close()
		return g.err(err)
	}
	return g.err(w.Close())
}

// Get reads an object.
func (g *GCS) Get(ctx context.Context, k string) (io.ReadCloser, error) {
	r, err := g.object(k).NewReader(ctx)
	if err != nil {
		return nil, g.err(err)
	}
	return r, nil
}

// Delete deletes an object; one already gone is no error.
func (g *GCS) Delete(ctx context.Context, k string) error {
	err := g.object(k).Delete(ctx)
	if errors.Is(err, storage.ErrObjectNotExist) {
		return nil
	}
	return g.err(err)
}

// List lists the objects under prefix, keys relative to the store's prefix.
func (g *GCS) List(ctx context.Context, prefix string) ([]Object, error) {
	var out []Object
	it := g.c.Bucket(g.bucket).Objects(ctx, &storage.Query{Prefix: path.Join(g.prefix, prefix)})
	for {
		a, err := it.Next()
		if err == iterator.Done {
			return out, nil
		}
		if err != nil {
			return nil, g.err(err)
		}
		out = append(out, Object{Key: strings.TrimPrefix(strings.TrimPrefix(a.Name, g.prefix), "/"), Size: a.Size, Modified: a.Updated})
	}
}

// err says which bucket, and marks what retrying will not change.
func (g *GCS) err(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, storage.ErrBucketNotExist) || errors.Is(err, storage.ErrObjectNotExist) {
		return fmt.Errorf("%w: bucket %s: %v", ErrRefused, g.bucket, err)
	}
	var api *googleapi.Error
	if errors.As(err, &api) {
		switch api.Code {
		case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
			return fmt.Errorf("%w: bucket %s: %d %s", ErrRefused, g.bucket, api.Code, api.Message)
		}
		return fmt.Errorf("bucket %s: %d %s", g.bucket, api.Code, api.Message)
	}
	return fmt.Errorf("bucket %s: %w", g.bucket, err)
}
