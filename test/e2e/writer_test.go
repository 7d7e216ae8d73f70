package e2e

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdplan/etcdplan/test/framework"
)

// writer puts keys throughout an operation and remembers which writes etcd acknowledged.
// The member endpoints change as members come and go, so it follows the Pods.
type writer struct {
	t      *testing.T
	ns, cl string
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	acked  []string
	revs   map[string]int64 // the revision each acknowledged write was made at
	failed int
	errs   map[string]int // why writes failed, by error
	maxLat time.Duration
}

func startWriter(t *testing.T, ns, cluster string) *writer {
	t.Helper()
	return startWriterWith(t, ns, cluster, framework.ClientTLS(t, ns, cluster))
}

// startWriterWith starts a writer that dials with cfg (nil: plain text).
func startWriterWith(t *testing.T, ns, cluster string, cfg *tls.Config) *writer {
	t.Helper()
	id := framework.Get(t, ns, cluster).Status.ClusterID
	return startWriterOn(t, ns, cluster, id, func() []string { return framework.EndpointsAs(t, ns, cluster, cfg != nil) }, cfg)
}

// startWriterOn starts a writer of the cluster of that etcd ID, at the endpoints eps gives
// now and then; stopAndVerify reads its writes back from the EtcdCluster named cluster.
func startWriterOn(t *testing.T, ns, cluster, id string, endpoints func() []string, cfg *tls.Config) *writer {
	t.Helper()
	cli, err := clientv3.New(framework.EtcdConfig(endpoints(), cfg))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{t: t, ns: ns, cl: cluster, cancel: cancel, done: make(chan struct{}), revs: map[string]int64{}, errs: map[string]int{}}
	go func() {
		defer close(w.done)
		defer cli.Close()
		for i := 0; ctx.Err() == nil; i++ {
			if i%20 == 0 {
				if eps := endpoints(); len(eps) > 0 {
					cli.SetEndpoints(eps...)
				}
			}
			key := fmt.Sprintf("/writer/%06d", i)
			start := time.Now()
			wctx, wcancel := context.WithTimeout(ctx, 5*time.Second)
			resp, err := cli.Put(wctx, key, key)
			wcancel()
			if err == nil {
				err = framework.SameCluster(resp.Header, id)
			}
			lat := time.Since(start)
			w.mu.Lock()
			if err == nil {
				w.acked, w.revs[key] = append(w.acked, key), resp.Header.Revision
				w.maxLat = max(w.maxLat, lat)
			} else if ctx.Err() == nil {
				w.failed++
				w.errs[err.Error()]++
			}
			w.mu.Unlock()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return w
}

// stop stops writing and returns the acknowledged writes with their revisions.
func (w *writer) stop() map[string]int64 {
	w.cancel()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.revs
}

// stopAndVerify stops writing and checks every acknowledged write is readable.
func (w *writer) stopAndVerify() {
	w.t.Helper()
	w.cancel()
	<-w.done
	cli := framework.ClusterClient(w.t, w.ns, w.cl)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := cli.Get(ctx, "/writer/", clientv3.WithPrefix())
	require.NoError(w.t, err)
	require.NoError(w.t, framework.SameCluster(resp.Header, framework.Get(w.t, w.ns, w.cl).Status.ClusterID))
	have := map[string]bool{}
	for _, kv := range resp.Kvs {
		have[string(kv.Key)] = true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	require.NotEmpty(w.t, w.acked, "no write was acknowledged")
	for _, k := range w.acked {
		require.True(w.t, have[k], "acknowledged write %s is lost", k)
	}
	w.t.Logf("writer: %d writes acknowledged and readable, %d failed %v, slowest %v", len(w.acked), w.failed, w.errs, w.maxLat)
}

// writeAWhile writes for a second (longer, up to 15 s, until a write is acknowledged) and
// checks every acknowledged write is readable.
func writeAWhile(t *testing.T, ns, cluster string) *writer {
	t.Helper()
	w := startWriter(t, ns, cluster)
	w.waitAcked()
	w.stopAndVerify()
	return w
}

// waitAcked lets the writer write for a second, and on until a write is acknowledged.
func (w *writer) waitAcked() {
	time.Sleep(time.Second)
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		w.mu.Lock()
		n := len(w.acked)
		w.mu.Unlock()
		if n > 0 {
			return
		}
	}
}

// ackedCount is the number of writes acknowledged so far.
func (w *writer) ackedCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// stillThere writes for a second more and checks that the writes before are readable too.
func (w *writer) stillThere() {
	w.t.Helper()
	w2 := startWriter(w.t, w.ns, w.cl)
	w2.waitAcked()
	w2.acked = append(w2.acked, w.acked...)
	w2.stopAndVerify()
}
