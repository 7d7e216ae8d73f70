// Package objstore runs the object stores backup tests write to: a MinIO server for S3 and
// a fake-gcs-server for Google Cloud Storage, built by test/stack.mk.
package objstore

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/etcdplan/etcdplan/test/stack"
)

// MinIO is a MinIO server of the test's own, with its data in a temporary directory.
type MinIO struct {
	Endpoint, User, Password string
}

// StartMinIO starts a MinIO server listening on addr ("" for a free local port) and stops
// it when the test ends. It fails the test when bin/ has no MinIO: make test builds it.
func StartMinIO(t testing.TB, addr string) *MinIO {
	t.Helper()
	bin := serverBin(t, "minio", stack.MinioVersion)
	if addr == "" {
		addr = FreeAddr(t)
	}
	m := &MinIO{Endpoint: "http://" + addr, User: "etcdplan-test", Password: "etcdplan-test-secret"}
	cmd := exec.Command(bin, "server", "--quiet", "--address", addr, "--console-address", FreeAddr(t), t.TempDir())
	cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+m.User, "MINIO_ROOT_PASSWORD="+m.Password, "MINIO_BROWSER=off",
		"MINIO_UPDATE=off", "HOME="+t.TempDir())
	startServer(t, cmd, "minio", m.Endpoint+"/minio/health/ready")
	return m
}

// Client is an S3 client of the server, as its root user.
func (m *MinIO) Client() *s3.Client {
	return s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String(m.Endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(m.User, m.Password, "")})
}

// Bucket creates a bucket.
func (m *MinIO) Bucket(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := m.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("creating bucket %s: %v", name, err)
	}
}

// FreeAddr is a local address no one listens on.
func FreeAddr(t testing.TB) string { return FreeAddrOn(t, "127.0.0.1") }

// FreeAddrOn is an address of host no one listens on.
func FreeAddrOn(t testing.TB, host string) string {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return fmt.Sprint(l.Addr())
}
