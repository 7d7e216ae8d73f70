package store

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
)

// Credentials are the data of the destination's credentials Secret; nil when it names none.
type Credentials map[string][]byte

// Open prepares the store a destination names. It does not call the store: wrong
// credentials or a missing bucket show at the first call.
func Open(ctx context.Context, d v1alpha1.BackupDestination, creds Credentials) (Store, error) {
	if creds != nil {
		keys := d.CredentialKeys()
		for _, k := range keys {
			if len(creds[k]) == 0 {
				return nil, fmt.Errorf("%w: Secret %s needs the keys %s", ErrRefused, d.CredentialsSecret(), strings.Join(keys, " and "))
			}
		}
	}
	switch {
	case d.S3 != nil:
		cfg := S3Config{Bucket: d.S3.Bucket, Prefix: d.S3.Prefix, Region: d.S3.Region, Endpoint: d.S3.Endpoint, ForcePathStyle: d.S3.ForcePathStyle}
		if creds != nil {
			cfg.AccessKeyID, cfg.SecretAccessKey = string(creds["accessKeyID"]), string(creds["secretAccessKey"])
		}
		return NewS3(ctx, cfg)
	case d.GCS != nil:
		return NewGCS(ctx, GCSConfig{Bucket: d.GCS.Bucket, Prefix: d.GCS.Prefix, Endpoint: d.GCS.Endpoint, ServiceAccountJSON: creds["serviceAccount.json"]})
	case d.PVC != nil:
		// Only a Pod that mounts the claim at vocab.BackupMount opens it.
		return NewDir(filepath.Join(vocab.BackupMount, d.PVC.SubPath), d.URI), nil
	}
	return nil, fmt.Errorf("%w: the destination names no store", ErrRefused)
}
