package resources

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
)

// ServerSecret names the Secret members serve clients with: the user's (Provided) or the
// one the operator issues (Auto).
func ServerSecret(c *v1alpha1.EtcdCluster) string {
	if c.Spec.TLS.ClientMode() == v1alpha1.TLSProvided {
		return c.Spec.TLS.ServerSecretName
	}
	return vocab.ServerSecret(c.Name)
}

// PeerSecret names the Secret a member talks to its peers with: the user's one for every
// member (Provided), or the member's own (Auto).
func PeerSecret(c *v1alpha1.EtcdCluster, member string) string {
	if c.Spec.TLS.PeerMode() == v1alpha1.TLSProvided {
		return c.Spec.TLS.PeerSecretName
	}
	return vocab.PeerSecret(member)
}

// OperatorSecret names the Secret with the client certificate the operator dials members
// with.
func OperatorSecret(c *v1alpha1.EtcdCluster) string {
	if c.Spec.TLS.ClientMode() == v1alpha1.TLSProvided {
		return c.Spec.TLS.ClientSecretName
	}
	return vocab.OperatorSecret(c.Name)
}

// PeerURL is the address other members reach a member at, https when peers talk TLS.
func PeerURL(c *v1alpha1.EtcdCluster, member string) string {
	return vocab.PeerURL(c.Name, c.Namespace, member, c.Spec.TLS.PeerTLS())
}

// NewPeerURL is the peer URL a member registers when it joins serving peers so: plain
// text while it serves TLS beside it (its peers may not dial TLS yet).
func NewPeerURL(c *v1alpha1.EtcdCluster, member string, l plan.Listen) string {
	return vocab.PeerURL(c.Name, c.Namespace, member, Serving(c, l).Peer == plan.ListenTLS)
}

// ClientURL is the address a member advertises to clients, https when they talk TLS.
func ClientURL(c *v1alpha1.EtcdCluster, member string) string {
	return vocab.ClientURL(c.Name, c.Namespace, member, c.Spec.TLS.ClientTLS())
}

// ServerName is the name the operator checks members' server certificates for. It dials
// members at their Pod IPs, which no certificate names; every member serves one
// certificate, which names the client Service.
func ServerName(c *v1alpha1.EtcdCluster) string {
	return vocab.ClientService(c.Name) + "." + c.Namespace + ".svc"
}

// InUse is the cluster with the TLS its members serve by: its spec's, except for a side
// the spec switched off while a member still serves TLS on it, which keeps the TLS last in
// use (status.tls.inUse): its Secrets, trust and the operator's certificate.
func InUse(c *v1alpha1.EtcdCluster, pods []corev1.Pod) *v1alpha1.EtcdCluster {
	var was *v1alpha1.TLSSpec
	if c.Status.TLS != nil {
		was = c.Status.TLS.InUse
	}
	client := !c.Spec.TLS.ClientTLS() && was.ClientTLS() && slices.ContainsFunc(pods, func(p corev1.Pod) bool { return servesTLS(Served(&p).Client) })
	peer := !c.Spec.TLS.PeerTLS() && was.PeerTLS() && slices.ContainsFunc(pods, func(p corev1.Pod) bool { return servesTLS(Served(&p).Peer) })
	if !client && !peer {
		return c
	}
	t := cmp.Or(c.Spec.TLS, &v1alpha1.TLSSpec{Mode: v1alpha1.TLSDisabled}).DeepCopy()
	t.Client, t.Peer = &v1alpha1.TLSSideSpec{Mode: c.Spec.TLS.ClientMode()}, &v1alpha1.TLSSideSpec{Mode: c.Spec.TLS.PeerMode()}
	if client {
		t.Client.Mode, t.ServerSecretName, t.ClientSecretName = was.ClientMode(), was.ServerSecretName, was.ClientSecretName
	}
	if peer {
		t.Peer.Mode, t.PeerSecretName = was.PeerMode(), was.PeerSecretName
	}
	t.IssuerRef, t.CertificateValidity = cmp.Or(t.IssuerRef, was.IssuerRef), cmp.Or(t.CertificateValidity, was.CertificateValidity)
	out := c.DeepCopy()
	out.Spec.TLS = t
	return out
}

// Serving is how a member's Pod serves each side, spelled out: the step's Listen where it
// says, else as the spec says.
func Serving(c *v1alpha1.EtcdCluster, l plan.Listen) plan.Listen {
	return plan.Listen{
		Client: cmp.Or(l.Client, plan.OneWay(c.Spec.TLS.ClientTLS())),
		Peer:   cmp.Or(l.Peer, plan.OneWay(c.Spec.TLS.PeerTLS())),
	}
}

// servesTLS: a side served so takes TLS.
func servesTLS(side string) bool { return side != plan.ListenPlain && side != "" }

// Served reads how a member Pod serves each side from its etcd's listen flags; zero for a
// Pod without them.
func Served(p *corev1.Pod) plan.Listen {
	var l plan.Listen
	for _, ctr := range p.Spec.Containers {
		if ctr.Name != vocab.ContainerEtcd {
			continue
		}
		for _, arg := range ctr.Command {
			if v, ok := strings.CutPrefix(arg, "--listen-client-urls="); ok {
				l.Client = served(v, vocab.ClientPort, vocab.ClientPort)
			}
			if v, ok := strings.CutPrefix(arg, "--listen-peer-urls="); ok {
				l.Peer = served(v, vocab.PeerPort, vocab.PeerTLSPort)
			}
		}
	}
	return l
}

// served says how a listen flag's URLs serve a side on its first and second port: one way
// on both (or on the first alone, as Pods of earlier versions listen), else both ways, which
// way the first port serves telling ListenBoth from ListenTLSFirst. Clients have one port.
func served(urls string, first, second int) string {
	ways := map[int]map[string]bool{first: {}, second: {}}
	for _, u := range strings.Split(urls, ",") {
		scheme, hostPort, _ := strings.Cut(u, "://")
		_, port, _ := strings.Cut(hostPort, ":")
		if n, err := strconv.Atoi(port); err == nil && ways[n] != nil {
			ways[n][scheme] = true
		}
	}
	on := func(port int) string {
		switch w := ways[port]; {
		case w["http"] && w["https"]:
			return plan.ListenBoth
		case w["https"]:
			return plan.ListenTLS
		case w["http"]:
			return plan.ListenPlain
		}
		return ""
	}
	a, b := on(first), on(second)
	switch {
	case b == "" || a == b:
		return a
	case a == plan.ListenTLS:
		return plan.ListenTLSFirst
	}
	return plan.ListenBoth
}

// listenURLs are what a member listens on for each side. Peers are served on both peer
// ports: one way on each while they are served both ways (ListenBoth: plain text on the
// first; ListenTLSFirst: TLS on the first), else the one way on both, so a member is reached
// at any peer URL a switch of TLS leaves it.
func listenURLs(l plan.Listen) (client, peer string) {
	client = listenURL(false, vocab.ClientPort) + "," + listenURL(true, vocab.ClientPort)
	if !plan.BothWays(l.Client) {
		client = listenURL(l.Client == plan.ListenTLS, vocab.ClientPort)
	}
	tls := map[string][2]bool{
		plan.ListenPlain: {false, false}, plan.ListenTLS: {true, true}, plan.ListenBoth: {false, true}, plan.ListenTLSFirst: {true, false},
	}[l.Peer]
	return client, listenURL(tls[0], vocab.PeerPort) + "," + listenURL(tls[1], vocab.PeerTLSPort)
}

// SourceChange is the change of the cluster's TLS source under way
// (status.tls.caRotation with a source, as the look found it); nil when none.
func SourceChange(c *v1alpha1.EtcdCluster) *v1alpha1.CARotationStatus {
	if c.Status.TLS == nil || c.Status.TLS.CARotation == nil || c.Status.TLS.CARotation.Source == "" {
		return nil
	}
	return c.Status.TLS.CARotation
}

// SourceChanging: a change of the TLS source went past its first step: members trust the
// trust Secret on both sides, which holds the union of the old and the new source's CAs
// until the last pass. Before (Asked), they trust as the old source says.
func SourceChanging(c *v1alpha1.EtcdCluster) bool {
	r := SourceChange(c)
	return r != nil && r.Stage != "Asked"
}

// tlsFlags are a member's TLS flags: client certificates are required on each side that
// talks TLS (etcd's --trusted-ca-file alone would already ask for them; the flags say so).
func tlsFlags(c *v1alpha1.EtcdCluster, l plan.Listen, flags map[string]string) {
	if t := c.Spec.TLS; servesTLS(l.Client) {
		flags["cert-file"] = vocab.ServerTLSMount + "/" + vocab.TLSCertKey
		flags["key-file"] = vocab.ServerTLSMount + "/" + vocab.TLSKeyKey
		flags["trusted-ca-file"] = trustFile(c, t.ClientMode(), vocab.ServerTLSMount)
		flags["client-cert-auth"] = "true"
	}
	if t := c.Spec.TLS; servesTLS(l.Peer) {
		flags["peer-cert-file"] = vocab.PeerTLSMount + "/" + vocab.TLSCertKey
		flags["peer-key-file"] = vocab.PeerTLSMount + "/" + vocab.TLSKeyKey
		flags["peer-trusted-ca-file"] = trustFile(c, t.PeerMode(), vocab.PeerTLSMount)
		flags["peer-client-cert-auth"] = "true"
	}
}

// trustFile is the trust bundle of a side: the user's Secret's ca.crt (Provided), else (or
// while the source changes) the cluster's trust Secret.
func trustFile(c *v1alpha1.EtcdCluster, mode v1alpha1.TLSMode, mount string) string {
	if mode == v1alpha1.TLSProvided && !SourceChanging(c) {
		return mount + "/" + vocab.CACertKey
	}
	return vocab.TrustTLSMount + "/" + vocab.CACertKey
}

// Trusted is a trust bundle a member reads at start: the Secret whose ca.crt it is, and the
// file the member reads it at.
type Trusted struct{ Secret, File string }

// TrustedBy are the trust bundles of a member that serves as l, client side then peer side,
// for each side it serves TLS on: the user's Secret's (Provided), else the cluster's trust
// Secret.
func TrustedBy(c *v1alpha1.EtcdCluster, l plan.Listen) []Trusted {
	var out []Trusted
	if t := c.Spec.TLS; servesTLS(l.Client) {
		out = append(out, Trusted{cmp.Or(providedSecret(c, t.ClientMode(), ServerSecret(c)), vocab.TrustSecret(c.Name)), trustFile(c, t.ClientMode(), vocab.ServerTLSMount)})
	}
	if t := c.Spec.TLS; servesTLS(l.Peer) {
		out = append(out, Trusted{cmp.Or(providedSecret(c, t.PeerMode(), PeerSecret(c, "")), vocab.TrustSecret(c.Name)), trustFile(c, t.PeerMode(), vocab.PeerTLSMount)})
	}
	return out
}

// providedSecret is the user's Secret of a side in mode Provided, "" in any other mode or
// while the source changes.
func providedSecret(c *v1alpha1.EtcdCluster, mode v1alpha1.TLSMode, secret string) string {
	if mode == v1alpha1.TLSProvided && !SourceChanging(c) {
		return secret
	}
	return ""
}

// listenURL is what a member listens on for one side.
func listenURL(tls bool, port int) string {
	return fmt.Sprintf("%s://0.0.0.0:%d", vocab.Scheme(tls), port)
}

// tlsVolumes are the Secret volumes of a member's TLS, and their mounts in etcd's
// container. Each Secret is mounted whole (never through subPath), so that a renewed
// certificate reaches the running member.
func tlsVolumes(c *v1alpha1.EtcdCluster, member string, l plan.Listen) ([]corev1.Volume, []corev1.VolumeMount) {
	var vols []corev1.Volume
	var mounts []corev1.VolumeMount
	add := func(name, secret, path string) {
		v, m := secretVolume(name, secret, path)
		vols, mounts = append(vols, v), append(mounts, m)
	}
	if servesTLS(l.Client) {
		add("server-tls", ServerSecret(c), vocab.ServerTLSMount)
	}
	if servesTLS(l.Peer) {
		add("peer-tls", PeerSecret(c, member), vocab.PeerTLSMount)
	}
	if (c.Spec.TLS.OwnCA() || SourceChanging(c)) && (servesTLS(l.Client) || servesTLS(l.Peer)) {
		add("trust", vocab.TrustSecret(c.Name), vocab.TrustTLSMount)
	}
	return vols, mounts
}

// secretVolume mounts a whole Secret read-only at path, readable by the Pods' group.
func secretVolume(name, secret, path string) (corev1.Volume, corev1.VolumeMount) {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: secret, DefaultMode: ptr.To[int32](0o440)}}},
		corev1.VolumeMount{Name: name, MountPath: path, ReadOnly: true}
}
