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
	dir                      string
	cmd                      *exec.Cmd
}

// StartMinIO starts a MinIO server listening on addr ("" for a free local port) and stops
// it when the test ends. It fails the test when bin/ has no MinIO: make test builds it.
func StartMinIO(t testing.TB, addr string) *MinIO {
	t.Helper()
	m := minio(t, addr)
	startServer(t, m.cmd, "minio", m.Endpoint+"/minio/health/ready")
	return m
}

// StartSmallMinIO is StartMinIO on a volume of size bytes, to see a store fill up: a tmpfs
// in a mount namespace of the server's own, so nothing stays mounted once it ends. It
// needs root, as the local stack does.
func StartSmallMinIO(t testing.TB, addr string, size int64) *MinIO {
	t.Helper()
	m := minio(t, addr)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		t.Fatal(err)
	}
	// unshare and sh exec what follows: the server keeps the process, and its namespace.
	m.cmd.Args = append([]string{"unshare", "--mount", "--propagation", "private", "sh", "-c",
		fmt.Sprintf(`mount -t tmpfs -o size=%d etcdplan-test "%s" && exec "$@"`, size, m.dir), "sh"}, m.cmd.Args...)
	m.cmd.Path = unshare
	startServer(t, m.cmd, "minio", m.Endpoint+"/minio/health/ready")
	return m
}

// Resize gives a StartSmallMinIO's volume size bytes, as freeing space there would.
func (m *MinIO) Resize(t testing.TB, size int64) {
	t.Helper()
	out, err := exec.Command("nsenter", "--target", fmt.Sprint(m.cmd.Process.Pid), "--mount",
		"mount", "-o", fmt.Sprintf("remount,size=%d", size), m.dir).CombinedOutput()
	if err != nil {
		t.Fatalf("resizing MinIO's volume: %v: %s", err, out)
	}
}

// minio is the command of a MinIO server listening on addr, not started.
func minio(t testing.TB, addr string) *MinIO {
	bin := serverBin(t, "minio", stack.MinioVersion)
	if addr == "" {
		addr = FreeAddr(t)
	}
	m := &MinIO{Endpoint: "http://" + addr, User: "etcdplan-test", Password: "etcdplan-test-secret", dir: t.TempDir()}
	m.cmd = exec.Command(bin, "server", "--quiet", "--address", addr, "--console-address", FreeAddr(t), m.dir)
	m.cmd.Env = append(os.Environ(), "MINIO_ROOT_USER="+m.User, "MINIO_ROOT_PASSWORD="+m.Password, "MINIO_BROWSER=off",
		"MINIO_UPDATE=off", "HOME="+t.TempDir())
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
