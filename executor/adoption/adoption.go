// Package adoption is the executor's side of an adoption (spec.bootstrap.join): the
// source's members are reached at their client URLs beside the cluster's own, recorded in
// status when first read, and found gone once they left. The operator and kubectl etcd plan
// both read a source through it.
package adoption

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/certs"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/pki"
	"github.com/etcdplan/etcdplan/planner"
)

// Spec is spec.bootstrap.join; nil when none.
func Spec(c *v1alpha1.EtcdCluster) *v1alpha1.JoinSpec {
	if c.Spec.Bootstrap == nil {
		return nil
	}
	return c.Spec.Bootstrap.Join
}

// Running: an adoption is asked for or under way, and has not ended: the source's members
// are reached beside the cluster's own.
func Running(c *v1alpha1.EtcdCluster) bool {
	j := c.Status.Join
	if j == nil {
		return Spec(c) != nil && c.Status.ClusterID == ""
	}
	return j.Phase == v1alpha1.JoinAdopting
}

// Endpoints are the source members' client URLs by name: for each member status recorded,
// the first of its client URLs (the one of spec's endpoints it answered at, when one did);
// before any is recorded, spec's endpoints as join-<i>.
func Endpoints(c *v1alpha1.EtcdCluster) map[string]string {
	out := map[string]string{}
	if c.Status.Join == nil || len(c.Status.Join.Source) == 0 {
		if j := Spec(c); j != nil {
			for i, u := range j.Endpoints {
				out[fmt.Sprintf("join-%d", i)] = u
			}
		}
		return out
	}
	for _, m := range c.Status.Join.Source {
		if len(m.ClientURLs) > 0 {
			out[m.Name] = m.ClientURLs[0]
		}
	}
	return out
}

// TLS is the configuration to dial the cluster's members and the source's with: own (the
// operator's, nil for plain text), with the source's CA trusted for the source's members
// (verify) and its client certificate added to the ones offered (Go offers the one whose
// issuer the member asks for). version changes with the Secret.
func TLS(ctx context.Context, kube client.Reader, c *v1alpha1.EtcdCluster, own *tls.Config) (cfg *tls.Config, version string, err error) {
	j := Spec(c)
	if j == nil || j.TLSSecretName == "" {
		return own, "", nil
	}
	sec := &corev1.Secret{}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: j.TLSSecretName}, sec); err != nil {
		return nil, "", fmt.Errorf("spec.bootstrap.join.tlsSecretName %s: %w", j.TLSSecretName, err)
	}
	cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	if own != nil {
		cfg = own.Clone()
	}
	source, err := pki.Pool(sec.Data["ca.crt"])
	if err != nil {
		return nil, "", fmt.Errorf("spec.bootstrap.join.tlsSecretName %s: key ca.crt: %w", j.TLSSecretName, err)
	}
	cfg.InsecureSkipVerify, cfg.VerifyConnection = true, verify(source, own) // verify checks every chain
	if len(sec.Data["tls.crt"]) > 0 {
		cert, err := tls.X509KeyPair(sec.Data["tls.crt"], sec.Data["tls.key"])
		if err != nil {
			return nil, "", fmt.Errorf("spec.bootstrap.join.tlsSecretName %s: tls.crt and tls.key: %w", j.TLSSecretName, err)
		}
		cfg.Certificates = append(slices.Clone(cfg.Certificates), cert)
	}
	return cfg, sec.ResourceVersion, nil
}

// verify accepts a server certificate of the source's CA, whatever names it holds (every
// answer is checked for the cluster's ID besides), and one of the cluster's own CA for the
// name the operator checks its members' against: the one connection dials both, under one
// server name.
func verify(source *x509.CertPool, own *tls.Config) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("the server presented no certificate")
		}
		leaf, inter := cs.PeerCertificates[0], x509.NewCertPool()
		for _, c := range cs.PeerCertificates[1:] {
			inter.AddCert(c)
		}
		_, err := leaf.Verify(x509.VerifyOptions{Roots: source, Intermediates: inter})
		if err == nil || own == nil {
			return err
		}
		_, err = leaf.Verify(x509.VerifyOptions{Roots: own.RootCAs, Intermediates: inter, DNSName: own.ServerName})
		return err
	}
}

// FirstLook records the source's members from its first answer read through a quorum
// (view, read through spec's endpoints: none of the cluster's own members joined yet) in c's
// status, and reads the
// view again with each member reached under its name, beside the members at own.
func FirstLook(ctx context.Context, cli etcd.Cluster, c *v1alpha1.EtcdCluster, own map[string]string, view *planner.EtcdView, cfg *tls.Config) (*planner.EtcdView, error) {
	if !view.Linearizable { // one member's own view may miss members: all are recorded, or none
		return nil, errors.New("the source's member list could not be read through a quorum")
	}
	at := membersAt(ctx, Spec(c).Endpoints, cfg)
	if name := unreached(view, at); name != "" {
		return nil, fmt.Errorf("source member %s answered at none of spec.bootstrap.join.endpoints and lists no client URL yet "+
			"(it has not published itself, or it is down): waiting for it, as every source member must be healthy", name)
	}
	record(c, view, at)
	endpoints := Endpoints(c)
	maps.Copy(endpoints, own)
	cli.SetCluster(view.ClusterID, endpoints)
	view, err := cli.View(ctx)
	if err == nil && len(view.Members) == 0 {
		err = errors.New("the source lists no member")
	}
	return view, err
}

// unreached names a member of view the operator has no client URL for: it answered at none
// of spec's endpoints (at), and etcd lists none for it, as for a member that has not
// published itself yet. The record is made once, so it waits for such a member.
func unreached(view *planner.EtcdView, at map[string]string) string {
	for _, m := range view.Members {
		if _, ok := at[m.ID]; !ok && len(m.ClientURLs) == 0 {
			return m.MemberName()
		}
	}
	return ""
}

// record puts the source's members in status, each member's client URLs starting with the
// one of spec's endpoints it answered at (at, by member ID): the operator reaches it there,
// whatever names it advertises.
func record(c *v1alpha1.EtcdCluster, view *planner.EtcdView, at map[string]string) {
	j := &v1alpha1.JoinStatus{Phase: v1alpha1.JoinAdopting}
	for _, m := range view.Members {
		urls := m.ClientURLs
		if u, ok := at[m.ID]; ok {
			urls = append([]string{u}, slices.DeleteFunc(slices.Clone(urls), func(x string) bool { return x == u })...)
		}
		j.Source = append(j.Source, v1alpha1.SourceMember{ID: m.ID, Name: m.Name, ClientURLs: urls, PeerURLs: m.PeerURLs})
	}
	c.Status.Join = j
}

// membersAt asks each of the endpoints which member answers there: member ID -> endpoint.
func membersAt(ctx context.Context, eps []string, cfg *tls.Config) map[string]string {
	out := map[string]string{}
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, TLS: cfg, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return out
	}
	defer func() { _ = cli.Close() }()
	for _, ep := range eps {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := cli.Status(sctx, ep)
		cancel()
		if err == nil {
			out[etcd.ID(st.Header.MemberId)] = ep
		}
	}
	return out
}

// Track records, from a member list read through a quorum, that a source member left (no
// rollback from then on), and that every one did: the plan then asks the user to
// acknowledge that they are stopped. It returns the members that left when the last one
// left now, else nil.
func Track(c *v1alpha1.EtcdCluster, view *planner.EtcdView) (done []string) {
	j := c.Status.Join
	if j == nil || j.Phase != v1alpha1.JoinAdopting || !view.Linearizable {
		return nil
	}
	var left []string
	for _, m := range j.Source {
		if !slices.ContainsFunc(view.Members, func(em planner.EtcdMember) bool { return em.ID == m.ID }) {
			left = append(left, m.Name)
		}
	}
	j.SourceLeft = j.SourceLeft || len(left) > 0
	if len(left) < len(j.Source) {
		return nil
	}
	j.Phase = v1alpha1.JoinSourceRemoved
	return left
}

// Problems is the preflight of spec against the source, before any of the cluster's
// members joined: the source's client URLs are of the scheme the cluster's own members
// serve (one connection reaches both), and when the source's peers talk TLS (as its
// members recorded in status say), the cluster's peer certificates are the user's
// (tls.peer.mode Provided): the source trusts only certificates of its own peer CA. The
// planner checks that the two sides' peers talk TLS alike.
func Problems(c *v1alpha1.EtcdCluster) []string {
	j := Spec(c)
	if j == nil {
		return nil
	}
	var out []string
	for _, u := range j.Endpoints {
		if vocab.TLSURL(u) != c.Spec.TLS.ClientTLS() {
			out = append(out, fmt.Sprintf("endpoint %s and the cluster's own client TLS (tls.client.mode) differ: the operator reaches both with one connection; "+
				"set spec.tls so members serve clients as the source does, then change it after the adoption", u))
			break
		}
	}
	if mode := c.Spec.TLS.PeerMode(); mode.OwnCA() && sourcePeersTLS(c) {
		out = append(out, fmt.Sprintf("the source's peers talk TLS, and tls.peer.mode is %s: the cluster's own CA would issue its members' peer certificates, "+
			"which the source does not trust; set tls.peer.mode Provided, with peerSecretName a Secret whose certificate the source's peer CA issued, "+
			"naming this cluster's members' peer DNS names, and whose ca.crt is the source's peer CA", mode))
	}
	return out
}

// sourcePeersTLS: a source member recorded in status has a TLS peer URL.
func sourcePeersTLS(c *v1alpha1.EtcdCluster) bool {
	if c.Status.Join == nil {
		return false
	}
	for _, m := range c.Status.Join.Source {
		if slices.ContainsFunc(m.PeerURLs, vocab.TLSURL) {
			return true
		}
	}
	return false
}

// Credentials are the username and password spec.bootstrap.join.credentialsSecretName
// holds: a source user with the root role.
func Credentials(ctx context.Context, kube client.Reader, c *v1alpha1.EtcdCluster) (user, password string, err error) {
	j := Spec(c)
	if j == nil || j.CredentialsSecretName == "" {
		return "", "", errors.New("the source has authentication on: set spec.bootstrap.join.credentialsSecretName to a Secret with the username and password of a source user with the root role")
	}
	sec := &corev1.Secret{}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: j.CredentialsSecretName}, sec); err != nil {
		return "", "", fmt.Errorf("spec.bootstrap.join.credentialsSecretName %s: %w", j.CredentialsSecretName, err)
	}
	user, password = string(sec.Data["username"]), string(sec.Data["password"])
	if user == "" || password == "" {
		return "", "", fmt.Errorf("spec.bootstrap.join.credentialsSecretName %s: keys username and password are needed", j.CredentialsSecretName)
	}
	return user, password, nil
}

// Users are the common names of the client certificates cfg offers: the operator's etcd
// users in a cluster whose auth is on, whichever member its certificate reaches.
func Users(cfg *tls.Config) []string {
	var out []string
	for _, c := range cfg.Certificates {
		if user := certs.User(&tls.Config{Certificates: []tls.Certificate{c}}); user != "" && !slices.Contains(out, user) {
			out = append(out, user)
		}
	}
	return out
}
