package v1alpha1

import (
	"cmp"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TLSMode says where a side's certificates come from, or that it is plain text.
// +kubebuilder:validation:Enum=Disabled;Auto;Provided;CertManager
type TLSMode string

const (
	// TLSDisabled: plain text.
	TLSDisabled TLSMode = "Disabled"
	// TLSAuto: a CA the operator makes for the cluster issues every certificate.
	TLSAuto TLSMode = "Auto"
	// TLSProvided: Secrets the user makes (serverSecretName, peerSecretName, clientSecretName).
	TLSProvided TLSMode = "Provided"
	// TLSCertManager: cert-manager issues a CA for the cluster from issuerRef, and the
	// certificates from that CA.
	TLSCertManager TLSMode = "CertManager"
)

// TLSSpec secures client traffic (applications and the operator to members) and peer
// traffic (members to one another), each side on its own. Mode sets both sides; client and
// peer, when set, override it for their side. Secrets carry tls.crt, tls.key and ca.crt.
// +kubebuilder:validation:XValidation:rule="(has(self.client) ? self.client.mode : self.mode) != 'Provided' || (has(self.serverSecretName) && has(self.clientSecretName))",message="tls.mode Provided for clients needs serverSecretName and clientSecretName"
// +kubebuilder:validation:XValidation:rule="(has(self.peer) ? self.peer.mode : self.mode) != 'Provided' || has(self.peerSecretName)",message="tls.mode Provided for peers needs peerSecretName"
// +kubebuilder:validation:XValidation:rule="!((has(self.client) ? self.client.mode : self.mode) == 'CertManager' || (has(self.peer) ? self.peer.mode : self.mode) == 'CertManager') || has(self.issuerRef)",message="tls.mode CertManager needs issuerRef: the cert-manager Issuer or ClusterIssuer that issues the cluster's CA"
// +kubebuilder:validation:XValidation:rule="!((has(self.client) ? self.client.mode : self.mode) in ['Auto', 'CertManager'] && (has(self.peer) ? self.peer.mode : self.mode) in ['Auto', 'CertManager']) || (has(self.client) ? self.client.mode : self.mode) == (has(self.peer) ? self.peer.mode : self.mode)",message="tls: client and peer cannot mix Auto and CertManager: each makes the cluster's own CA"
type TLSSpec struct {
	// Mode: Disabled serves plain text; Auto has the operator's own CA for the cluster issue
	// every certificate; Provided uses the Secrets named below; CertManager has cert-manager
	// issue the cluster's CA from issuerRef.
	// +kubebuilder:default=Disabled
	Mode TLSMode `json:"mode"`
	// Client overrides mode for client traffic.
	// +optional
	Client *TLSSideSpec `json:"client,omitempty"`
	// Peer overrides mode for peer traffic.
	// +optional
	Peer *TLSSideSpec `json:"peer,omitempty"`
	// ServerSecretName holds the certificate members serve clients with (Provided). It names
	// every member's DNS name and the client Service's, and has both server and client
	// usage: etcd's gateway dials the member itself with it.
	// +optional
	ServerSecretName string `json:"serverSecretName,omitempty"`
	// PeerSecretName holds the certificate members talk to each other with (Provided). etcd
	// checks a dialing member's certificate against its address: the certificate names every
	// member's DNS name.
	// +optional
	PeerSecretName string `json:"peerSecretName,omitempty"`
	// ClientSecretName holds the client certificate the operator uses (Provided).
	// +optional
	ClientSecretName string `json:"clientSecretName,omitempty"`
	// IssuerRef is the cert-manager issuer of the cluster's CA (CertManager).
	// +optional
	IssuerRef *IssuerReference `json:"issuerRef,omitempty"`
	// CertificateValidity is how long the certificates the operator issues (or asks
	// cert-manager for) are valid; each is renewed at two thirds of it, without a restart.
	// +kubebuilder:default="2160h"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('3m')",message="tls.certificateValidity must be at least 3m, such as 2160h"
	// +optional
	CertificateValidity *metav1.Duration `json:"certificateValidity,omitempty"`
}

// TLSSideSpec is one side's TLS.
type TLSSideSpec struct {
	// Mode of this side, as TLSSpec.Mode.
	Mode TLSMode `json:"mode"`
}

// IssuerReference names a cert-manager issuer.
type IssuerReference struct {
	// Name of the Issuer (in the cluster's namespace) or ClusterIssuer.
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
	// Kind is Issuer or ClusterIssuer.
	// +kubebuilder:default=Issuer
	// +kubebuilder:validation:Enum=Issuer;ClusterIssuer
	// +optional
	Kind string `json:"kind,omitempty"`
}

// ClientMode is the TLS mode of client traffic.
func (t *TLSSpec) ClientMode() TLSMode {
	if t == nil {
		return TLSDisabled
	}
	return t.side(t.Client)
}

// PeerMode is the TLS mode of peer traffic.
func (t *TLSSpec) PeerMode() TLSMode {
	if t == nil {
		return TLSDisabled
	}
	return t.side(t.Peer)
}

// ClientTLS: clients reach members over TLS.
func (t *TLSSpec) ClientTLS() bool { return t.ClientMode() != TLSDisabled }

// PeerTLS: members reach one another over TLS.
func (t *TLSSpec) PeerTLS() bool { return t.PeerMode() != TLSDisabled }

// OwnCA: the cluster's own CA issues some side's certificates (made by the operator, or by
// cert-manager from issuerRef).
func (t *TLSSpec) OwnCA() bool { return t.ClientMode().OwnCA() || t.PeerMode().OwnCA() }

// OwnCA: the cluster's own CA issues the certificates of a side in this mode.
func (m TLSMode) OwnCA() bool { return m == TLSAuto || m == TLSCertManager }

func (t *TLSSpec) side(s *TLSSideSpec) TLSMode {
	if s != nil && s.Mode != "" {
		return s.Mode
	}
	return cmp.Or(t.Mode, TLSDisabled)
}

// TLSStatus is what clients need to know of the cluster's TLS.
type TLSStatus struct {
	// ClientSecretName names the Secret (tls.crt, tls.key, ca.crt) with a client certificate
	// for applications, when the cluster's own CA issues one (client mode Auto or
	// CertManager).
	// +optional
	ClientSecretName string `json:"clientSecretName,omitempty"`
	// ClientURL is where applications reach the cluster over TLS: the client Service, by
	// the name its certificate is checked for.
	// +optional
	ClientURL string `json:"clientURL,omitempty"`
	// Certificates are the certificates members and the operator use, as last read.
	// +optional
	// +listType=map
	// +listMapKey=secretName
	Certificates []CertificateStatus `json:"certificates,omitempty"`
	// InUse is the TLS the members serve, as the spec last had it: while a side is switched
	// off, members that still serve TLS on it keep its Secrets, and the operator dials them
	// with its certificate.
	// +optional
	InUse *TLSSpec `json:"inUse,omitempty"`
	// Trust identifies the trust bundles a member started now mounts (the hash each member
	// Pod records in its annotation etcdplan.io/trust): a member whose Pod records another
	// restarts to read them.
	// +optional
	Trust string `json:"trust,omitempty"`
	// CARotation is where a rotation of the cluster's own CA stands, while one runs.
	// +optional
	CARotation *CARotationStatus `json:"caRotation,omitempty"`
}

// CARotationStatus is where a rotation of the cluster's own CA stands.
type CARotationStatus struct {
	// Requested is the value of the annotation etcdplan.io/rotate-ca the rotation runs for.
	// +optional
	Requested string `json:"requested,omitempty"`
	// Stage is the CA Secret's: Asked (no new CA yet), Trusting (the new CA is trusted
	// beside the old, which still issues), Issuing (the new CA issues, the old is still
	// trusted), Retiring (the new CA alone is trusted; the old is kept until every member
	// restarted).
	Stage string `json:"stage"`
	// Pass is the pass that runs: 1, members restart trusting the old and the new CA; 2,
	// every certificate is issued again from the new CA (no restart); 3, members restart
	// trusting the new CA alone.
	Pass int32 `json:"pass"`
	// Source, when set, says the change is of spec.tls's source rather than a rotation of
	// the cluster's CA ("Auto to Provided"): the same passes, with the new source's CA for
	// the new CA; in pass 2 members restart onto the new source's certificates. Members
	// trust the bundle of the trust Secret (<cluster>-trust) throughout.
	// +optional
	Source string `json:"source,omitempty"`
}

// CertificateStatus is one certificate in use.
type CertificateStatus struct {
	// SecretName holds it.
	SecretName string `json:"secretName"`
	// Subject is its common name, and Issuer its issuer's.
	Subject string `json:"subject,omitempty"`
	Issuer  string `json:"issuer,omitempty"`
	// NotAfter is when it expires, and RenewAt when the operator renews it (Auto).
	NotAfter metav1.Time `json:"notAfter"`
	// +optional
	RenewAt *metav1.Time `json:"renewAt,omitempty"`
}
