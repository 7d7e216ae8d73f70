package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// S3Config is a bucket on S3 or an S3-compatible store.
type S3Config struct {
	Bucket, Prefix, Region string
	// Endpoint of an S3-compatible store; empty is AWS.
	Endpoint       string
	ForcePathStyle bool
	// AccessKeyID and SecretAccessKey; empty uses the ambient credentials (environment,
	// web identity).
	AccessKeyID, SecretAccessKey string
}

// S3 is a bucket on S3 or an S3-compatible store.
type S3 struct {
	c              *s3.Client
	bucket, prefix string
}

// NewS3 prepares a client of the bucket; it does not call the store.
func NewS3(ctx context.Context, cfg S3Config) (*S3, error) {
	region := cfg.Region
	if region == "" {
		region = "us-east-1"
	}
	opts := []func(*config.LoadOptions) error{config.WithRegion(region),
		// Checksums only where S3 requires them: S3-compatible stores differ in the ones they
		// take, and a snapshot carries its own hash.
		config.WithRequestChecksumCalculation(aws.RequestChecksumCalculationWhenRequired),
		config.WithResponseChecksumValidation(aws.ResponseChecksumValidationWhenRequired),
		config.WithHTTPClient(awshttp.NewBuildableClient().WithTransportOptions(bound)),
		config.WithRetryer(func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) { o.MaxAttempts, o.MaxBackoff = Attempts, 2*time.Second })
		})}
	if cfg.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, "")))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("S3 configuration: %w", err)
	}
	c := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		o.UsePathStyle = cfg.ForcePathStyle
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
	})
	return &S3{c: c, bucket: cfg.Bucket, prefix: cfg.Prefix}, nil
}

// Close does nothing: the SDK's client holds no more than idle connections, which its
// transport closes after 90 s.
func (s *S3) Close() error { return nil }

func (s *S3) key(k string) string { return path.Join(s.prefix, k) }

// URI is s3://bucket/prefix/key.
func (s *S3) URI(k string) string {
	return v1alpha1.BackupDestination{S3: &v1alpha1.S3Destination{Bucket: s.bucket, Prefix: s.prefix}}.URI(k)
}

// Put uploads one part at a time (a single PutObject when the object fits in one), so at
// most a part is in memory; a failed upload is aborted.
func (s *S3) Put(ctx context.Context, k string, r io.Reader) error {
	buf := make([]byte, partSize)
	n, err := io.ReadFull(r, buf)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		_, err = s.c.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: aws.String(s.key(k)),
			Body: bytes.NewReader(buf[:n]), ContentLength: aws.Int64(int64(n))})
		return s.err(err)
	}
	if err != nil {
		return err
	}
	up, err := s.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: aws.String(s.key(k))})
	if err != nil {
		return s.err(err)
	}
	done := false
	defer func() {
		if !done {
			_, _ = s.c.AbortMultipartUpload(context.WithoutCancel(ctx), &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: up.Key, UploadId: up.UploadId})
		}
	}()
	var parts []types.CompletedPart
	for num := int32(1); ; num++ {
		out, err := s.c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &s.bucket, Key: up.Key, UploadId: up.UploadId,
			PartNumber: aws.Int32(num), Body: bytes.NewReader(buf[:n]), ContentLength: aws.Int64(int64(n))})
		if err != nil {
			return s.err(err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
		n, err = io.ReadFull(r, buf)
		if err == io.EOF {
			break
		}
		if err != nil && err != io.ErrUnexpectedEOF {
			return err
		}
	}
	_, err = s.c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &s.bucket, Key: up.Key, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	done = err == nil
	return s.err(err)
}

// Get reads an object.
func (s *S3) Get(ctx context.Context, k string) (io.ReadCloser, error) {
	out, err := s.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: aws.String(s.key(k))})
	if err != nil {
		return nil, s.err(err)
	}
	return out.Body, nil
}

// Delete deletes an object; S3 answers the same for one already gone.
func (s *S3) Delete(ctx context.Context, k string) error {
	_, err := s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(s.key(k))})
	return s.err(err)
}

// List lists the objects under prefix, keys relative to the store's prefix.
func (s *S3) List(ctx context.Context, prefix string) ([]Object, error) {
	var out []Object
	p := s3.NewListObjectsV2Paginator(s.c, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: aws.String(s.key(prefix))})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.err(err)
		}
		for _, o := range page.Contents {
			out = append(out, Object{Key: strings.TrimPrefix(strings.TrimPrefix(aws.ToString(o.Key), s.prefix), "/"),
				Size: aws.ToInt64(o.Size), Modified: aws.ToTime(o.LastModified)})
		}
	}
	return out, nil
}

// refusals are S3's error codes that retrying does not change.
var refusals = map[string]bool{"NoSuchBucket": true, "AccessDenied": true, "InvalidAccessKeyId": true,
	"SignatureDoesNotMatch": true, "InvalidBucketName": true, "AllAccessDisabled": true, "NoSuchKey": true}

// full are the codes of a store out of space (MinIO's, and HTTP 507's).
var full = map[string]bool{"XMinioStorageFull": true, "InsufficientStorage": true}

// err says which bucket, and marks what retrying will not change and a store out of space.
func (s *S3) err(err error) error {
	if err == nil {
		return nil
	}
	var api smithy.APIError
	if errors.As(err, &api) {
		if refusals[api.ErrorCode()] {
			return fmt.Errorf("%w: bucket %s: %s: %s", ErrRefused, s.bucket, api.ErrorCode(), api.ErrorMessage())
		}
		if full[api.ErrorCode()] {
			return fmt.Errorf("%w: bucket %s: %s: %s", ErrFull, s.bucket, api.ErrorCode(), api.ErrorMessage())
		}
		return fmt.Errorf("bucket %s: %s: %s", s.bucket, api.ErrorCode(), api.ErrorMessage())
	}
	return fmt.Errorf("bucket %s: %w", s.bucket, err)
}
