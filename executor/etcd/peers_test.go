package etcd

import (
	"bufio"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseActivePeers(t *testing.T) {
	metrics := `# HELP etcd_network_active_peers The current number of active peer connections.
# TYPE etcd_network_active_peers gauge
etcd_network_active_peers{Local="8e9e05c52164694d",Remote="91bc3c398fb3c146"} 1
etcd_network_active_peers{Local="8e9e05c52164694d",Remote="fd422379fda50e48"} 0
etcd_network_active_peers{Local="8e9e05c52164694d",Remote="a1b2c3d4e5f60718"} 2
etcd_network_peer_sent_bytes_total{To="fd422379fda50e48"} 12
`
	peers, err := parseActivePeers(bufio.NewScanner(strings.NewReader(metrics)), "8e9e05c52164694d")
	require.NoError(t, err)
	require.Equal(t, []string{"91bc3c398fb3c146", "a1b2c3d4e5f60718"}, peers,
		"a peer whose gauge is 0 is not active; one at 2 (a joined member's catch-up remote counted too) is")

	_, err = parseActivePeers(bufio.NewScanner(strings.NewReader(metrics)), "91bc3c398fb3c146")
	require.ErrorContains(t, err, "answered where", "another member's metrics are not taken for the one expected")

	peers, err = parseActivePeers(bufio.NewScanner(strings.NewReader("etcd_server_has_leader 1\n")), "8e9e05c52164694d")
	require.NoError(t, err)
	require.Empty(t, peers, "a member alone has no active peer")
}
