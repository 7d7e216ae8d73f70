package store_test

import (
	"context"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/executor/store"
)

// silentAddr is a loopback address that takes no new connection and refuses none: its
// listener never accepts, and once its queue is full the kernel drops the SYNs, as a
// firewall that drops packets does.
func silentAddr(t *testing.T) string {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	require.NoError(t, err)
	t.Cleanup(func() { _ = syscall.Close(fd) })
	require.NoError(t, syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}))
	require.NoError(t, syscall.Listen(fd, 0))
	sa, err := syscall.Getsockname(fd)
	require.NoError(t, err)
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	for i := 0; ; i++ {
		require.Less(t, i, 16, "the listener's queue never filled")
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err != nil {
			return addr
		}
		t.Cleanup(func() { _ = c.Close() })
	}
}

// A store whose address drops connections is said unavailable after its bounded tries, not
// after the kernel's minutes of retries.
func TestSilentStoreIsUnavailableWithinItsBounds(t *testing.T) {
	defer func(d time.Duration) { store.DialTimeout = d }(store.DialTimeout)
	store.DialTimeout = 300 * time.Millisecond
	addr := silentAddr(t)
	ctx := context.Background()
	s3, err := store.NewS3(ctx, store.S3Config{Bucket: "b", Endpoint: "http://" + addr, ForcePathStyle: true, AccessKeyID: "k", SecretAccessKey: "s"})
	require.NoError(t, err)
	gcs, err := store.NewGCS(ctx, store.GCSConfig{Bucket: "b", Endpoint: "http://" + addr})
	require.NoError(t, err)
	for name, st := range map[string]store.Store{"s3": s3, "gcs": gcs} {
		// Far above the bounds (3 tries of 300 ms, a few seconds of backoff), far below the
		// kernel's SYN retries.
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		start := time.Now()
		_, err := st.List(ctx, "")
		require.ErrorContains(t, err, "i/o timeout", name)
		require.NoError(t, ctx.Err(), "%s: the store's own bounds end the call, not the caller's (%v after %v)", name, err, time.Since(start))
		cancel()
		require.NotErrorIs(t, err, store.ErrRefused, "%s: a silent store may come back", name)
	}
}
