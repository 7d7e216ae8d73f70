package adoption

import (
	"crypto/tls"
	"crypto/x509"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/pki"
	"github.com/etcdplan/etcdplan/planner"
)

func server(t *testing.T, ca pki.KeyPair, name string) tls.ConnectionState {
	leaf, err := pki.Issue(ca, pki.Request{CommonName: name, DNSNames: []string{name}, Server: true, NotBefore: time.Now(), Validity: time.Hour})
	require.NoError(t, err)
	certs, err := pki.Certificates(leaf.Cert)
	require.NoError(t, err)
	return tls.ConnectionState{PeerCertificates: certs}
}

// One connection reaches the source's members and the cluster's own: a certificate of the
// source's CA passes whatever its names, one of the cluster's CA only for the name the
// operator checks its members against, and one of any other CA never.
func TestOneConnectionTrustsBothClusters(t *testing.T) {
	now := time.Now()
	src, err := pki.NewCA("source CA", now, time.Hour)
	require.NoError(t, err)
	own, err := pki.NewCA("cluster CA", now, time.Hour)
	require.NoError(t, err)
	other, err := pki.NewCA("other CA", now, time.Hour)
	require.NoError(t, err)
	srcPool, err := pki.Pool(src.Cert)
	require.NoError(t, err)
	ownPool, err := pki.Pool(own.Cert)
	require.NoError(t, err)
	check := verify(srcPool, &tls.Config{RootCAs: ownPool, ServerName: "demo-client.ns.svc"})

	require.NoError(t, check(server(t, src, "old-0.elsewhere")))
	require.NoError(t, check(server(t, own, "demo-client.ns.svc")))
	require.Error(t, check(server(t, own, "another.ns.svc")))
	require.Error(t, check(server(t, other, "demo-client.ns.svc")))
	require.Error(t, verify(srcPool, nil)(server(t, own, "demo-client.ns.svc")))
	require.Error(t, check(tls.ConnectionState{PeerCertificates: []*x509.Certificate{}}))
}

// Spec's endpoints are reached until the source's members are recorded, each then at the
// endpoint it answered at; a member list through a quorum shows the adoption done once every
// recorded source member is gone from it.
func TestSourceEndpointsAndItsEnd(t *testing.T) {
	c := &v1alpha1.EtcdCluster{}
	c.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Join: &v1alpha1.JoinSpec{Endpoints: []string{"http://10.88.0.5:2379", "http://10.88.0.6:2379"}}}
	require.Equal(t, map[string]string{"join-0": "http://10.88.0.5:2379", "join-1": "http://10.88.0.6:2379"}, Endpoints(c))

	view := &planner.EtcdView{Linearizable: true, Members: []planner.EtcdMember{
		{ID: "a1", Name: "old-0", ClientURLs: []string{"http://old-0.elsewhere:2379", "http://10.88.0.5:2379"}},
		{ID: "a2", Name: "old-1", ClientURLs: []string{"http://old-1.elsewhere:2379"}},
	}}
	require.Equal(t, "", unreached(view, map[string]string{"a1": "http://10.88.0.5:2379"}), "each answered, or lists a client URL")
	unpublished := append(slices.Clone(view.Members), planner.EtcdMember{ID: "a3", PeerURLs: []string{"http://old-2.elsewhere:2380"}})
	require.Equal(t, "old-2", unreached(&planner.EtcdView{Members: unpublished}, map[string]string{"a1": "http://10.88.0.5:2379"}),
		"a member that has not published itself and answered at no endpoint cannot be reached: the record waits for it")
	record(c, view, map[string]string{"a1": "http://10.88.0.5:2379"})
	require.Equal(t, map[string]string{"old-0": "http://10.88.0.5:2379", "old-1": "http://old-1.elsewhere:2379"}, Endpoints(c))
	require.True(t, Running(c))

	require.Nil(t, Track(c, view))
	require.False(t, c.Status.Join.SourceLeft)
	view.Members = view.Members[1:]
	require.Nil(t, Track(c, view))
	require.True(t, c.Status.Join.SourceLeft)
	view.Members = []planner.EtcdMember{{ID: "1", Name: "demo-0"}}
	view.Linearizable = false
	require.Nil(t, Track(c, view), "not on one member's own view")
	view.Linearizable = true
	require.Equal(t, []string{"old-0", "old-1"}, Track(c, view))
	require.Equal(t, v1alpha1.JoinSourceRemoved, c.Status.Join.Phase)
	require.False(t, Running(c))
}

// The preflight of spec against the source: clients are reached with one connection, so
// their schemes agree; a source whose peers talk TLS trusts its own peer CA alone, so the
// cluster's peer certificates must be the user's (Provided), never of the cluster's own CA.
func TestProblemsOfSpecAgainstTheSource(t *testing.T) {
	adopt := func(tls *v1alpha1.TLSSpec, endpoint, peerURL string) *v1alpha1.EtcdCluster {
		c := &v1alpha1.EtcdCluster{}
		c.Spec.TLS = tls
		c.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Join: &v1alpha1.JoinSpec{Endpoints: []string{endpoint}}}
		if peerURL != "" {
			c.Status.Join = &v1alpha1.JoinStatus{Phase: v1alpha1.JoinAdopting, Source: []v1alpha1.SourceMember{
				{ID: "a1", Name: "old-0", ClientURLs: []string{endpoint}, PeerURLs: []string{peerURL}}}}
		}
		return c
	}
	peer := func(mode v1alpha1.TLSMode) *v1alpha1.TLSSpec {
		return &v1alpha1.TLSSpec{Mode: v1alpha1.TLSDisabled, Peer: &v1alpha1.TLSSideSpec{Mode: mode}, PeerSecretName: "demo-peer"}
	}
	for _, tc := range []struct {
		name              string
		tls               *v1alpha1.TLSSpec
		endpoint, peerURL string
		want              string
	}{
		{"plain text", nil, "http://10.88.0.5:2379", "http://old-0.elsewhere:2380", ""},
		{"before the source is read", peer(v1alpha1.TLSAuto), "http://10.88.0.5:2379", "", ""},
		{"the user's peer certificates", peer(v1alpha1.TLSProvided), "http://10.88.0.5:2379", "https://old-0.elsewhere:2380", ""},
		{"the cluster's own CA", peer(v1alpha1.TLSAuto), "http://10.88.0.5:2379", "https://old-0.elsewhere:2380",
			"tls.peer.mode is Auto: the cluster's own CA would issue its members' peer certificates, which the source does not trust; set tls.peer.mode Provided"},
		{"cert-manager's", peer(v1alpha1.TLSCertManager), "http://10.88.0.5:2379", "https://old-0.elsewhere:2380", "tls.peer.mode is CertManager"},
		{"peers plain text in spec", nil, "http://10.88.0.5:2379", "https://old-0.elsewhere:2380", ""}, // the planner says so
		{"client TLS off", nil, "https://10.88.0.5:2379", "", "the cluster's own client TLS (tls.client.mode) differ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Problems(adopt(tc.tls, tc.endpoint, tc.peerURL))
			if tc.want == "" {
				require.Empty(t, got)
				return
			}
			require.Len(t, got, 1)
			require.Contains(t, got[0], tc.want)
		})
	}
}
