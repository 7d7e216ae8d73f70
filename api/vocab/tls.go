package vocab

import "strings"

// The Secrets a cluster's TLS reads when the operator issues its certificates (mode Auto),
// each with the keys tls.crt, tls.key and ca.crt (the CA's Secret has no ca.crt: its
// tls.crt is the CA). They are named after the cluster and the member, so they are found
// again by name alone.

// CASecret holds the cluster's CA and its key. No Pod mounts it.
func CASecret(cluster string) string { return cluster + "-ca" }

// ServerSecret holds the certificate members serve clients with.
func ServerSecret(cluster string) string { return cluster + "-server-tls" }

// PeerSecret holds a member's peer certificate, which names that member alone.
func PeerSecret(member string) string { return member + "-peer-tls" }

// OperatorSecret holds the operator's client certificate.
func OperatorSecret(cluster string) string { return cluster + "-operator-tls" }

// ClientSecret holds a client certificate for applications (status.tls.clientSecretName).
func ClientSecret(cluster string) string { return cluster + "-client-tls" }

// UserSecret holds the client certificate of a user of spec.auth.users.
func UserSecret(cluster, user string) string { return cluster + "-user-" + user + "-tls" }

// TrustSecret holds the trust bundle (ca.crt) members and the operator check certificates
// against when the cluster's own CA issues them (modes Auto and CertManager): that CA alone,
// never an issuer above it, so a certificate of an organisation's CA is no etcd client.
func TrustSecret(cluster string) string { return cluster + "-trust" }

// Mounts of a member Pod's TLS Secrets, each a whole Secret volume: a Secret volume is
// updated in place when its Secret changes (a subPath mount never is), and etcd reads its
// certificate and key again at every handshake.
const (
	ServerTLSMount = "/etc/etcd/tls/server"
	PeerTLSMount   = "/etc/etcd/tls/peer"
	TrustTLSMount  = "/etc/etcd/tls/trust"
	// OperatorTLSMount is where a Pod that dials members as the operator (a claim
	// snapshot's) mounts the operator's client certificate.
	OperatorTLSMount = "/etc/etcdplan/tls"
)

// Keys of a TLS Secret, as Kubernetes' kubernetes.io/tls type and cert-manager write them.
const (
	TLSCertKey = "tls.crt"
	TLSKeyKey  = "tls.key"
	CACertKey  = "ca.crt"
)

// AnnotationUnserved on a TLS Secret the operator renewed holds the new certificate's
// serial until every member that mounts it serves it.
const AnnotationUnserved = "etcdplan.io/unserved-serial"

// AnnotationTrust on a member Pod is the hash of the trust bundles it mounted when it was
// made (pki.BundleHash of each side's, joined): etcd reads them only at start, so it says
// which CAs the member trusts until it restarts.
const AnnotationTrust = "etcdplan.io/trust"

// A rotation of the cluster's own CA keeps its state in the CA Secret: the new CA beside
// the one that issues until every member trusts both (NextCertKey, NextKeyKey), then the
// old one's certificate beside the new until no member trusts it alone (PreviousCertKey).
// AnnotationCARotation on the CA Secret is the value of the EtcdCluster's
// etcdplan.io/rotate-ca the CA was made or last rotated for.
const (
	NextCertKey          = "next.crt"
	NextKeyKey           = "next.key"
	PreviousCertKey      = "previous.crt"
	AnnotationCARotation = "etcdplan.io/ca-rotation"
)

// AnnotationSourceChange on the trust Secret is where a change of spec.tls's source stands:
// its stage (Trusting, Issuing, Retiring), a space, and the change in words ("Auto to
// Provided"). Absent when none runs.
const AnnotationSourceChange = "etcdplan.io/source-change"

// AnnotationClientScheme on a member Pod says how its client port is reached: "https"
// when it serves TLS, absent for plain text.
const AnnotationClientScheme = "etcdplan.io/client-scheme"

// TLSURL: the URL's scheme is https.
func TLSURL(u string) bool { return strings.HasPrefix(u, Scheme(true)+"://") }

// Scheme is a URL's scheme for traffic that is TLS or not.
func Scheme(tls bool) string {
	if tls {
		return "https"
	}
	return "http"
}
