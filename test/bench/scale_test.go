package bench

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	"github.com/etcdplan/etcdplan/test/framework"
)

// scaleResult is one operator managing many clusters at rest, then restarted.
type scaleResult struct {
	Clusters, Members    int
	AllReady             time.Duration // from creating them all until all were Ready
	RSS, PeakRSS         int64         // bytes, at rest
	CPU                  float64       // cores used on average at rest
	Requests             map[string]float64
	Writes               map[string]float64 // per minute, by the API server's count
	Window               time.Duration
	ReconciledAfterStart time.Duration // from the new operator's start until it reconciled every cluster
	// FirstAfterStart is until its first reconcile ended (the lease taken, caches synced);
	// Reconcile and QueueWait are the mean reconcile and wait in its queue until then.
	FirstAfterStart, Reconcile, QueueWait time.Duration
	// Restarts counts the operator's exits on its own (a leader lease lost under load)
	// before the measured restart.
	Restarts int
}

const operatorMetrics = "127.0.0.1:18081"

// slowAPILease lets the operator keep its lease while 150 members starting on two cores
// slow the API server down past client-go's 10 s renew deadline.
var slowAPILease = []string{"--leader-elect-lease-duration=60s", "--leader-elect-renew-deadline=45s"}

// scale creates n clusters of benchMembers() members under one operator, measures it at rest for a
// minute (memory, CPU, its API requests, and the API server's count of writes to what it
// manages), then restarts it and measures how long until it reconciled every cluster.
func (b *bench) scale(n int) scaleResult {
	t := b.t
	t.Logf("bench: %d clusters", n)
	ns := framework.Namespace(t)
	op := b.managerWith(ns, operatorMetrics, slowAPILease...)
	r := scaleResult{Clusters: n, Members: benchMembers()}
	start := time.Now()
	// Ten at a time, each ten Ready before the next: 50 clusters created at once (150 members
	// starting together) overload a 2-core machine.
	for first := 0; first < n; first += 10 {
		for i := first; i < min(first+10, n); i++ {
			c := framework.NewCluster(ns, fmt.Sprintf("s%02d", i), int32(r.Members))
			// Idle members still heartbeat: at etcd's default of 10 a second, 150 of them
			// keep a 2-core machine so busy that elections time out. A slower beat fits
			// them; the operator's work is the same.
			c.Spec.Options.HeartbeatInterval, c.Spec.Options.ElectionTimeout = ptr.To[int32](500), ptr.To[int32](5000)
			require.NoError(t, framework.Env.Client.Create(context.Background(), c))
		}
		for i := first; i < min(first+10, n); i++ {
			framework.WaitFor(t, ns, fmt.Sprintf("s%02d", i), 20*time.Minute, "Ready", framework.Ready)
		}
	}
	r.AllReady = time.Since(start)
	time.Sleep(30 * time.Second) // let the last status writes and requeues pass

	r.Window = time.Minute
	opBefore, apiBefore, cpuBefore := scrape(t), apiMetrics(t), cpuTicks(t, op.pid())
	time.Sleep(r.Window)
	opAfter, apiAfter, cpuAfter := scrape(t), apiMetrics(t), cpuTicks(t, op.pid())
	r.CPU = float64(cpuAfter-cpuBefore) / 100 / r.Window.Seconds()
	r.RSS, r.PeakRSS = memory(t, op.pid())
	r.Requests = map[string]float64{}
	for _, m := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
		r.Requests[m] = framework.Sum(opAfter, "rest_client_requests_total", `method="`+m+`"`) - framework.Sum(opBefore, "rest_client_requests_total", `method="`+m+`"`)
	}
	r.Writes = map[string]float64{}
	for _, res := range []string{"etcdclusters", "pods", "persistentvolumeclaims", "services", "poddisruptionbudgets"} {
		for _, verb := range []string{"POST", "PUT", "PATCH", "DELETE"} {
			sel := []string{`resource="` + res + `"`, `verb="` + verb + `"`}
			r.Writes[res] += framework.Sum(apiAfter, "apiserver_request_total", sel...) - framework.Sum(apiBefore, "apiserver_request_total", sel...)
		}
	}

	op.stop()
	r.Restarts = op.restarts
	start = time.Now()
	op = b.managerWith(ns, operatorMetrics, slowAPILease...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		text, _ := operatorMetricsText()
		done := framework.Sum(text, "controller_runtime_reconcile_total", `controller="etcdcluster"`)
		if done > 0 && r.FirstAfterStart == 0 {
			r.FirstAfterStart = time.Since(start)
		}
		if done >= float64(n) {
			r.ReconciledAfterStart = time.Since(start)
			r.Reconcile = mean(text, "controller_runtime_reconcile_time_seconds", `controller="etcdcluster"`)
			r.QueueWait = mean(text, "workqueue_queue_duration_seconds", `name="etcdcluster"`)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	require.NoError(t, ctx.Err(), "the restarted operator reconciled every cluster")
	op.stop()
	t.Logf("bench: %d clusters: all Ready in %v (the operator exited %d times on its own), RSS %d MiB, CPU %.3f cores, requests %v, writes %v, reconciled all %v after a restart (first %v; mean reconcile %v, mean queue wait %v)",
		n, r.AllReady.Round(time.Second), r.Restarts, r.RSS>>20, r.CPU, r.Requests, r.Writes, r.ReconciledAfterStart.Round(time.Millisecond),
		r.FirstAfterStart.Round(time.Millisecond), r.Reconcile.Round(time.Millisecond), r.QueueWait.Round(time.Millisecond))
	return r
}

// operatorMetricsText is the operator's metrics; it fails while the operator starts.
func operatorMetricsText() (string, error) {
	return framework.MetricsText("http://" + operatorMetrics + "/metrics")
}

func scrape(t require.TestingT) string {
	text, err := operatorMetricsText()
	require.NoError(t, err)
	return text
}

// apiMetrics is the API server's own metrics.
func apiMetrics(t require.TestingT) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := framework.Env.Stack.Client().Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	require.NoError(t, err)
	return string(b)
}

// benchMembers is how many members each of the many clusters has: BENCH_CLUSTER_MEMBERS,
// 1 by default. Two cores fit 20 clusters of three; 50 of three (150 etcd members probed
// every second) keep the machine so busy that the API server itself times out, so the 50
// clusters a restarted operator must reconcile within 10 s have one member each.
func benchMembers() int {
	if n, err := strconv.Atoi(os.Getenv("BENCH_CLUSTER_MEMBERS")); err == nil && n > 0 {
		return n
	}
	return 1
}

// mean is a histogram's mean, in seconds, over the samples whose labels contain every
// selector.
func mean(text, metric string, selectors ...string) time.Duration {
	n := framework.Sum(text, metric+"_count", selectors...)
	if n == 0 {
		return 0
	}
	return time.Duration(framework.Sum(text, metric+"_sum", selectors...) / n * float64(time.Second))
}

// cpuTicks is the CPU time a process used, in clock ticks (1/100 s).
func cpuTicks(t require.TestingT, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	require.NoError(t, err)
	f := strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+2:])
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return utime + stime
}

// memory is a process's resident memory now and at its peak, in bytes.
func memory(t require.TestingT, pid int) (rss, peak int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "VmHWM:":
			peak = kb << 10
		}
	}
	return rss, peak
}

// scaleReport is the docs' section on the many-clusters run.
func scaleReport(r scaleResult) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n## One operator, %d clusters\n\n", r.Clusters)
	fmt.Fprintf(&b, "%d clusters of %d members (%d etcd members, heartbeat 500 ms and election timeout 5 s so that many idle members fit on the machine) created ten at a time under one operator, each ten Ready before the next; then a minute at rest.\n\n", r.Clusters, r.Members, r.Members*r.Clusters)
	fmt.Fprintf(&b, "| figure | value |\n|---|---|\n")
	fmt.Fprintf(&b, "| all %d Ready, from the first creation | %.0f s |\n", r.Clusters, r.AllReady.Seconds())
	if r.Restarts > 0 {
		fmt.Fprintf(&b, "| operator exits on its own meanwhile (leader lease lost under load; started again) | %d |\n", r.Restarts)
	}
	fmt.Fprintf(&b, "| operator memory at rest (RSS / peak) | %d MiB / %d MiB |\n", r.RSS>>20, r.PeakRSS>>20)
	fmt.Fprintf(&b, "| operator CPU at rest | %.3f cores |\n", r.CPU)
	per := 60 / r.Window.Seconds()
	fmt.Fprintf(&b, "| operator API requests per minute at rest | %s |\n", perMinute(r.Requests, per))
	fmt.Fprintf(&b, "| writes per minute at rest to EtcdClusters, Pods, claims, Services, PDBs (API server's count) | %s |\n", perMinute(r.Writes, per))
	fmt.Fprintf(&b, "| restarted operator (lease released by the old one) reconciled every cluster | %.2f s after its start (the first %.2f s after; a reconcile took %s and waited %s in the queue on average) |\n",
		r.ReconciledAfterStart.Seconds(), r.FirstAfterStart.Seconds(), ms(r.Reconcile), ms(r.QueueWait))
	return b.String()
}

func perMinute(m map[string]float64, per float64) string {
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %.0f", k, m[k]*per))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys(m map[string]float64) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
