package vocab

import (
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// A cluster's members are named <cluster>-<ordinal> and reached through the headless
// Service named after the cluster: <member>.<cluster>.<namespace>.svc.

// MemberName returns the name of the member with the given ordinal.
func MemberName(cluster string, ordinal int) string {
	return cluster + "-" + strconv.Itoa(ordinal)
}

// Ordinal returns the ordinal of a member named <cluster>-<ordinal>, or -1.
func Ordinal(cluster, member string) int {
	rest, ok := strings.CutPrefix(member, cluster+"-")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n < 0 || strconv.Itoa(n) != rest {
		return -1
	}
	return n
}

// HeadlessService names the Service that gives members their DNS names.
func HeadlessService(cluster string) string { return cluster }

// ClientService names the Service clients connect through.
func ClientService(cluster string) string { return cluster + "-client" }

// MemberHost is a member's stable DNS name through the headless Service: the host of its
// peer and client URLs.
func MemberHost(cluster, namespace, member string) string {
	return member + "." + HeadlessService(cluster) + "." + namespace + ".svc"
}

// PeerURL is the address other members reach a member at, https when peers talk TLS.
func PeerURL(cluster, namespace, member string, tls bool) string {
	return PeerURLAt(cluster, namespace, member, tls, PeerPort)
}

// PeerURLAt is a member's peer URL on a given peer port: a switch of TLS for a running
// cluster moves a member's peer URL to the port that serves it the new way.
func PeerURLAt(cluster, namespace, member string, tls bool, port int) string {
	return fmt.Sprintf("%s://%s:%d", Scheme(tls), MemberHost(cluster, namespace, member), port)
}

// ClientURL is the address a member advertises to clients, https when they talk TLS.
func ClientURL(cluster, namespace, member string, tls bool) string {
	return fmt.Sprintf("%s://%s:%d", Scheme(tls), MemberHost(cluster, namespace, member), ClientPort)
}

// ManagedName returns the name of the member a peer URL list belongs to when it is of this
// cluster's form, <scheme>://<cluster>-<ordinal>.<cluster>.<namespace>.svc:2380 (or on
// the second peer port, 2382, where a switch of TLS moves it), and "" when it is not: such
// a member is not this cluster's to manage. An empty namespace accepts any.
func ManagedName(cluster, namespace string, peerURLs []string) string {
	if len(peerURLs) != 1 {
		return ""
	}
	u, err := url.Parse(peerURLs[0])
	ports := []string{strconv.Itoa(PeerPort), strconv.Itoa(PeerTLSPort)}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || !slices.Contains(ports, u.Port()) || u.Path != "" {
		return ""
	}
	member, rest, _ := strings.Cut(u.Hostname(), ".")
	if Ordinal(cluster, member) < 0 {
		return ""
	}
	ns, ok := strings.CutPrefix(rest, HeadlessService(cluster)+".")
	if !ok || !strings.HasSuffix(ns, ".svc") {
		return ""
	}
	ns = strings.TrimSuffix(ns, ".svc")
	if ns == "" || strings.Contains(ns, ".") || (namespace != "" && ns != namespace) {
		return ""
	}
	return member
}

// HostLabel returns the first label of a peer URL's host: the name of a member added but
// not yet started, which etcd knows only by its peer URL.
func HostLabel(peerURL string) string {
	host := peerURL
	if i := strings.Index(host, "://"); i >= 0 {
		host = host[i+3:]
	}
	if i := strings.IndexAny(host, ".:/"); i >= 0 {
		host = host[:i]
	}
	return host
}
