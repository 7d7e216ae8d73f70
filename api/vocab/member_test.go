package vocab

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOrdinal(t *testing.T) {
	require.Equal(t, 12, Ordinal("a-b", "a-b-12"))
	require.Equal(t, -1, Ordinal("a", "a-01"))
	require.Equal(t, -1, Ordinal("a", "b-1"))
	require.Equal(t, 3, Ordinal("demo", MemberName("demo", 3)))
}

// A member is this cluster's to manage only when its one peer URL is the one the operator
// gives it.
func TestManagedName(t *testing.T) {
	require.Equal(t, "http://demo-3.demo.ns.svc:2380", PeerURL("demo", "ns", "demo-3", false))
	require.Equal(t, "https://demo-3.demo.ns.svc:2380", PeerURL("demo", "ns", "demo-3", true))
	require.Equal(t, "http://demo-3.demo.ns.svc:2379", ClientURL("demo", "ns", "demo-3", false))
	require.Equal(t, "https://demo-3.demo.ns.svc:2379", ClientURL("demo", "ns", "demo-3", true))
	for _, tls := range []bool{false, true} {
		require.Equal(t, "demo-3", ManagedName("demo", "ns", []string{PeerURL("demo", "ns", "demo-3", tls)}))
		require.Equal(t, "demo-3", ManagedName("demo", "", []string{PeerURL("demo", "ns", "demo-3", tls)}))
	}
	require.Equal(t, "https://demo-3.demo.ns.svc:2382", PeerURLAt("demo", "ns", "demo-3", true, PeerTLSPort))
	require.Equal(t, "demo-3", ManagedName("demo", "ns", []string{PeerURLAt("demo", "ns", "demo-3", true, PeerTLSPort)}))
	require.Equal(t, "demo-3", ManagedName("demo", "ns", []string{"http://demo-3.demo.ns.svc:2382"}))
	for _, urls := range [][]string{
		{PeerURL("demo", "other", "demo-3", false)},
		{PeerURL("other", "ns", "other-3", false)},
		{"http://demo-3.demo.ns.svc:2379"},
		{"http://10.88.0.9:2380"},
		{"ftp://demo-3.demo.ns.svc:2380"},
		{"https://demo-3.demo.ns.svc:2381"},
		{"https://demo-3.demo.ns.svc"},
		{PeerURL("demo", "ns", "demo-3", false), "http://10.88.0.9:2380"},
	} {
		require.Empty(t, ManagedName("demo", "ns", urls), "%v", urls)
	}
	require.Equal(t, "demo-3", HostLabel("http://demo-3.demo.ns.svc:2380"))
}
