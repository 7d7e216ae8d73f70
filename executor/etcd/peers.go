package etcd

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ActivePeers reads, for each member named (name -> member ID), the members etcd counts as
// its active peers (raft messages pass between them), from the metrics its client URL
// serves (etcd_network_active_peers), by member ID. A member that does not answer, or
// answers as another member (its Pod IP now another's), is left out.
func (c *Client) ActivePeers(ctx context.Context, members map[string]string) map[string][]string {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: c.tls}}
	defer hc.CloseIdleConnections()
	out := map[string][]string{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for name, id := range members {
		ep, ok := c.endpoint(name)
		if !ok {
			continue
		}
		wg.Go(func() {
			if peers, err := activePeers(ctx, hc, ep, id); err == nil {
				mu.Lock()
				out[id] = peers
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// activePeerMetric is the gauge etcd raises for each peer it exchanges raft messages with,
// labelled Local (itself) and Remote (the peer), by member ID. It counts what became active
// towards the peer: most often 1, but 2 on a member that joined, when the remote it used
// to catch up with that peer also sent a message; etcd never takes that count back (its
// remotes stop without deactivating). Any count above 0 is an active peer.
const activePeerMetric = "etcd_network_active_peers{"

// activePeers reads the active peers of member id from its metrics at ep.
func activePeers(ctx context.Context, hc *http.Client, ep, id string) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ep+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s/metrics: %s", ep, resp.Status)
	}
	return parseActivePeers(bufio.NewScanner(resp.Body), id)
}

// parseActivePeers takes the peers member id's metrics count active.
func parseActivePeers(sc *bufio.Scanner, id string) ([]string, error) {
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	peers := []string{}
	for sc.Scan() {
		labels, ok := strings.CutPrefix(sc.Text(), activePeerMetric)
		if !ok {
			continue
		}
		labels, value, _ := strings.Cut(labels, "} ")
		local, remote := label(labels, "Local"), label(labels, "Remote")
		switch {
		case local != id:
			return nil, fmt.Errorf("member %s answered where %s was expected", local, id)
		case active(value):
			peers = append(peers, remote)
		}
	}
	return peers, sc.Err()
}

// active: a gauge's value above 0.
func active(value string) bool {
	v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
	return err == nil && v > 0
}

// label is the value of a Prometheus text label name="value" in labels.
func label(labels, name string) string {
	for l := range strings.SplitSeq(labels, ",") {
		if v, ok := strings.CutPrefix(l, name+`="`); ok {
			return strings.TrimSuffix(v, `"`)
		}
	}
	return ""
}
