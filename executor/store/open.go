package store

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// ErrUnsupported is a destination this version cannot write to.
var ErrUnsupported = errors.New("unsupported destination")

// Credentials are the data of the destination's credentials Secret; nil when it names none.
type Credentials map[string][]byte

// Open prepares the store a destination names. It does not call the store: wrong
// credentials or a missing bucket show at the first call.
func Open(ctx context.Context, d v1alpha1.BackupDestination, creds Credentials) (Store, error) {
	switch {
	case d.S3 != nil:
		cfg := S3Config{Bucket: d.S3.Bucket, Prefix: d.S3.Prefix, Region: d.S3.Region, Endpoint: d.S3.Endpoint, ForcePathStyle: d.S3.ForcePathStyle}
		if creds != nil {
			cfg.AccessKeyID, cfg.SecretAccessKey = string(creds["accessKeyID"]), string(creds["secretAccessKey"])
			if cfg.AccessKeyID == "" || cfg.SecretAccessKey == "" {
				return nil, fmt.Errorf("%w: Secret %s needs the keys accessKeyID and secretAccessKey", ErrRefused, d.S3.CredentialsSecret)
			}
		}
		return NewS3(ctx, cfg)
	case d.GCS != nil:
		cfg := GCSConfig{Bucket: d.GCS.Bucket, Prefix: d.GCS.Prefix, Endpoint: d.GCS.Endpoint}
		if creds != nil {
			if cfg.ServiceAccountJSON = creds["serviceAccount.json"]; len(cfg.ServiceAccountJSON) == 0 {
				return nil, fmt.Errorf("%w: Secret %s needs the key serviceAccount.json", ErrRefused, d.GCS.CredentialsSecret)
			}
		}
		return NewGCS(ctx, cfg)
	case d.PVC != nil:
		return nil, fmt.Errorf("%w: pvc destinations are not supported yet", ErrUnsupported)
	}
	return nil, fmt.Errorf("%w: the destination names no store", ErrRefused)
}

// URIOf names the object under key at a destination, as its store's URI does.
func URIOf(d v1alpha1.BackupDestination, key string) string {
	switch {
	case d.S3 != nil:
		return uri("s3", d.S3.Bucket, d.S3.Prefix, key)
	case d.GCS != nil:
		return uri("gs", d.GCS.Bucket, d.GCS.Prefix, key)
	case d.PVC != nil:
		return uri("pvc", d.PVC.ClaimName, d.PVC.SubPath, key)
	}
	return key
}

func uri(scheme, bucket, prefix, key string) string {
	return scheme + "://" + bucket + "/" + path.Join(prefix, key)
}

// KeyOf is the key of the object uri names at a destination; false when it is not there.
func KeyOf(d v1alpha1.BackupDestination, uri string) (string, bool) {
	return strings.CutPrefix(uri, strings.TrimSuffix(URIOf(d, "k"), "k"))
}

// SecretName is the credentials Secret a destination names, "" for none.
func SecretName(d v1alpha1.BackupDestination) string {
	switch {
	case d.S3 != nil:
		return d.S3.CredentialsSecret
	case d.GCS != nil:
		return d.GCS.CredentialsSecret
	}
	return ""
}
