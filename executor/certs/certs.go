// Package certs keeps the certificates of a cluster's TLS in their Secrets: it issues them
// from the cluster's own CA when the operator is their source (mode Auto), checks that the
// user's are there (mode Provided), and gives the TLS configuration the operator dials
// members with. Certificates are issued when their Secret is missing; nothing here deletes
// one (they go with the cluster, which owns them).
package certs

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/pki"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/executor/status"
	"github.com/etcdplan/etcdplan/planner"
)

// caValidity is how long a cluster's own CA is valid: far longer than its leaves, which are
// renewed from it many times. A leaf never outlives its CA (pki.Issue).
const caValidity = 10 * 365 * 24 * time.Hour

// OperatorCommonName is the common name of the operator's client certificate: the etcd
// user it is once authentication is on.
const OperatorCommonName = "etcdplan-operator"

// Keeper reads and writes a cluster's TLS Secrets: writes through Client, reads around the
// cache through Reader (Secrets are read one at a time, never listed or watched).
type Keeper struct {
	Client client.Client
	Reader client.Reader
}

// State is what a look found of a cluster's TLS.
type State struct {
	// Operator is the configuration the operator dials members with; nil for plain text.
	Operator *tls.Config
	// Version changes whenever the Secret Operator was read from changes: a connection
	// dialed with another version is dialed again.
	Version string
	// Status is what status.tls says.
	Status *v1alpha1.TLSStatus
	// Renewals are the certificates the operator issued that are to be renewed.
	Renewals []planner.Renewal
	// Trust identifies the trust bundles a member Pod started now mounts (Keeper.Trust).
	Trust string
	// Rotation is where a rotation of the cluster's CA stands; nil when none is asked or
	// under way.
	Rotation *planner.CARotation
	// issuer is the CA that issues the operator's certificates now (mode Auto), and leaves
	// the certificates it issues, in the order renewals list them.
	issuer []byte
	leaves []planner.Renewal
}

// Ensure issues what is missing of a cluster's TLS (Auto), checks the user's Secrets are
// there (Provided), reads the operator's client configuration, and finds the certificates
// to renew, the peer certificates of members among them. A Provided Secret that is missing
// or unreadable is a status.Stuck error saying which.
func (k Keeper) Ensure(ctx context.Context, c *v1alpha1.EtcdCluster, members []string, now time.Time) (State, error) {
	t := c.Spec.TLS
	if !t.ClientTLS() && !t.PeerTLS() {
		return State{}, nil
	}
	st := State{Status: &v1alpha1.TLSStatus{}}
	if t.ClientTLS() {
		st.Status.ClientURL = fmt.Sprintf("https://%s:%d", resources.ServerName(c), vocab.ClientPort)
	}
	if err := k.ownCerts(ctx, c, members, now, &st); err != nil {
		return State{}, err
	}
	if err := k.peers(ctx, c, members, now, &st); err != nil {
		return State{}, err
	}
	for _, name := range k.provided(c) {
		s, err := k.read(ctx, c, name)
		if err != nil {
			return State{}, err
		}
		st.note(s, false)
	}
	var err error
	if st.Operator, st.Version, err = k.Operator(ctx, c); err != nil {
		return State{}, err
	}
	if st.Trust, err = k.Trust(ctx, c, plan.Listen{}); err != nil {
		return State{}, err
	}
	if st.Rotation != nil {
		st.Rotation.Leaves = st.leaves
	}
	st.Status.Trust, st.Status.CARotation = st.Trust, rotationStatus(c, st.Rotation)
	if resources.SourceChange(c) != nil { // it waits for no rotation of the CA, and none for it
		st.Rotation, st.Status.CARotation = sourceRotation(c), c.Status.TLS.CARotation
	}
	return st, nil
}

// Operator reads the configuration the operator dials the cluster's members with (nil for
// plain text), and the version of the Secret it comes from.
func (k Keeper) Operator(ctx context.Context, c *v1alpha1.EtcdCluster) (*tls.Config, string, error) {
	if !c.Spec.TLS.ClientTLS() {
		return nil, "", nil
	}
	s, err := k.read(ctx, c, resources.OperatorSecret(c))
	if err != nil {
		return nil, "", err
	}
	bundle, version := s.Data[vocab.CACertKey], s.Name+"@"+s.ResourceVersion
	if c.Spec.TLS.ClientMode().OwnCA() || resources.SourceChanging(c) {
		trust := &corev1.Secret{}
		if err := k.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: vocab.TrustSecret(c.Name)}, trust); err != nil {
			return nil, "", err
		}
		bundle, version = trust.Data[vocab.CACertKey], version+","+trust.ResourceVersion
	}
	cfg, err := pki.ClientConfig(keyPair(s), bundle)
	if err != nil {
		return nil, "", status.Stuck(string(v1alpha1.ReasonTLSSecretInvalid), "Secret %s: %v", s.Name, err)
	}
	cfg.ServerName = resources.ServerName(c)
	return cfg, version, nil
}

// ownCerts makes what is missing of the cluster's own CA, its trust Secret and the
// certificates of client traffic it issues.
func (k Keeper) ownCerts(ctx context.Context, c *v1alpha1.EtcdCluster, members []string, now time.Time, st *State) error {
	t := c.Spec.TLS
	if !t.OwnCA() {
		return nil
	}
	ca, err := k.ownCA(ctx, c, members, now)
	if err != nil {
		return err
	}
	st.note(ca, false) // a CA is rotated, not renewed
	trusted, err := k.trust(ctx, c, ca)
	if err != nil {
		return err
	}
	st.Rotation = rotation(c, ca, trusted)
	if t.ClientMode() == v1alpha1.TLSAuto || t.PeerMode() == v1alpha1.TLSAuto {
		st.issuer = ca.Data[vocab.TLSCertKey]
	}
	if !t.ClientMode().OwnCA() {
		return nil
	}
	for _, l := range clientLeaves(c) {
		s, err := k.leaf(ctx, c, t.ClientMode(), l.secret, l.req, ca, now)
		if err != nil {
			return err
		}
		st.issued(c, s, t.ClientMode(), now)
	}
	st.Status.ClientSecretName = vocab.ClientSecret(c.Name)
	return nil
}

// ownCA is the Secret of the cluster's own CA: made by the operator (Auto), or by
// cert-manager from spec.tls.issuerRef (CertManager).
func (k Keeper) ownCA(ctx context.Context, c *v1alpha1.EtcdCluster, members []string, now time.Time) (*corev1.Secret, error) {
	if c.Spec.TLS.ClientMode() == v1alpha1.TLSCertManager || c.Spec.TLS.PeerMode() == v1alpha1.TLSCertManager {
		if err := k.certManagerCA(ctx, c); err != nil {
			return nil, err
		}
		return k.issued(ctx, c, vocab.CASecret(c.Name))
	}
	made := false
	s, err := k.getOrIssue(ctx, c, vocab.CASecret(c.Name), now, func() (pki.KeyPair, error) {
		if c.Status.ClusterID != "" {
			if used, err := k.caUsed(ctx, c, members); err != nil || used {
				// Members trust the CA they started with alone: a new one would cut off
				// every member issued a certificate from it.
				return pki.KeyPair{}, cmp.Or(err, status.Stuck(string(v1alpha1.ReasonTLSSecretNotFound),
					"Secret %s, the CA the members trust, is gone: restore it from a copy", vocab.CASecret(c.Name)))
			}
		}
		made = true
		return pki.NewCA(caName(c), now, caValidity)
	}, nil)
	if want := c.Annotations[v1alpha1.AnnotationRotateCA]; err == nil && made && want != "" {
		// A CA made new is what a rotation asked for until now would give.
		s.Annotations = map[string]string{vocab.AnnotationCARotation: want}
		err = k.Client.Update(ctx, s)
	}
	return s, err
}

// caUsed: a certificate of the cluster's CA was issued, so members may trust it: a
// formed cluster gets a CA only when TLS is switched on for it, before any is issued.
func (k Keeper) caUsed(ctx context.Context, c *v1alpha1.EtcdCluster, members []string) (bool, error) {
	names := []string{vocab.TrustSecret(c.Name), vocab.ServerSecret(c.Name), vocab.OperatorSecret(c.Name)}
	for _, m := range members {
		names = append(names, vocab.PeerSecret(m))
	}
	for _, name := range names {
		err := k.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, &corev1.Secret{})
		if !apierrors.IsNotFound(err) {
			return true, client.IgnoreNotFound(err)
		}
	}
	return false, nil
}

// leaf is the Secret of a certificate the cluster's own CA issues: by the operator (Auto)
// or by cert-manager (CertManager), once.
func (k Keeper) leaf(ctx context.Context, c *v1alpha1.EtcdCluster, mode v1alpha1.TLSMode, secret string, r pki.Request, ca *corev1.Secret, now time.Time) (*corev1.Secret, error) {
	if mode == v1alpha1.TLSCertManager {
		if err := k.certManagerLeaf(ctx, c, secret, r); err != nil {
			return nil, err
		}
		return k.issued(ctx, c, secret)
	}
	return k.getOrIssue(ctx, c, secret, now, func() (pki.KeyPair, error) { return issue(keyPair(ca), c, r, now) }, caBundle(ca))
}

// trust keeps the cluster's own CA in its trust Secret: the first certificate of the CA
// Secret (cert-manager's may carry the chain above it, which is not trusted). A CA that
// cert-manager renewed is added beside the one before, never in its place: running members
// read their trust bundle only at start, and the certificates they serve may still come
// from the earlier one. Dropping a CA is a rotation's.
func (k Keeper) trust(ctx context.Context, c *v1alpha1.EtcdCluster, ca *corev1.Secret) ([]byte, error) {
	certs, err := pki.Certificates(ca.Data[vocab.TLSCertKey])
	if err != nil {
		return nil, status.Stuck(string(v1alpha1.ReasonTLSSecretInvalid), "Secret %s: %v", ca.Name, err)
	}
	bundle := pki.Bundle(pemOf(certs[0]))
	s := &corev1.Secret{}
	err = k.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: vocab.TrustSecret(c.Name)}, s)
	switch {
	case apierrors.IsNotFound(err):
		_, err := k.createOwned(ctx, c, vocab.TrustSecret(c.Name), corev1.SecretTypeOpaque, map[string][]byte{vocab.CACertKey: bundle})
		return bundle, err
	case err != nil:
		return nil, err
	case !metav1.IsControlledBy(s, c):
		return nil, status.Stuck(string(v1alpha1.ReasonTLSSecretInvalid), "Secret %s is not this cluster's: rename or delete it", s.Name)
	case trusts(s.Data[vocab.CACertKey], certs[0]):
		return s.Data[vocab.CACertKey], nil
	}
	s.Data = map[string][]byte{vocab.CACertKey: pki.Bundle(s.Data[vocab.CACertKey], bundle)}
	return s.Data[vocab.CACertKey], k.Client.Update(ctx, s)
}

// trusts: the bundle holds the certificate.
func trusts(bundle []byte, ca *x509.Certificate) bool {
	certs, err := pki.Certificates(bundle)
	return err == nil && slices.ContainsFunc(certs, ca.Equal)
}

func pemOf(c *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
}

// peers notes the peer certificates of members from the cluster's own CA, and those the
// operator is to renew; a member's is issued just before its Pod (EnsurePeer).
func (k Keeper) peers(ctx context.Context, c *v1alpha1.EtcdCluster, members []string, now time.Time, st *State) error {
	if !c.Spec.TLS.PeerMode().OwnCA() {
		return nil
	}
	// In a fixed order: the renewals are planned in it, and a plan that changes order
	// would be superseded at every look.
	for _, m := range slices.Sorted(slices.Values(members)) {
		s := &corev1.Secret{}
		err := k.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: vocab.PeerSecret(m)}, s)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return err
		default:
			st.issued(c, s, c.Spec.TLS.PeerMode(), now)
		}
	}
	return nil
}

// issued notes a certificate of the cluster's own CA, and whether the operator is to renew
// it (cert-manager renews those it issued).
func (st *State) issued(c *v1alpha1.EtcdCluster, s *corev1.Secret, mode v1alpha1.TLSMode, now time.Time) {
	st.note(s, mode == v1alpha1.TLSAuto)
	if mode != v1alpha1.TLSAuto {
		return
	}
	r, ok := renewal(c, s, st.issuer, now)
	if ok {
		st.Renewals = append(st.Renewals, r)
	}
	st.leaves = append(st.leaves, planner.Renewal{Secret: s.Name, Mounted: r.Mounted})
}

// EnsurePeer issues a member's peer certificate when the operator is its source and it is
// missing; the member's Pod mounts it.
func (k Keeper) EnsurePeer(ctx context.Context, c *v1alpha1.EtcdCluster, member string, now time.Time) error {
	mode := c.Spec.TLS.PeerMode()
	if !mode.OwnCA() {
		return nil
	}
	var ca *corev1.Secret
	if mode == v1alpha1.TLSAuto {
		var err error
		if ca, err = k.read(ctx, c, vocab.CASecret(c.Name)); err != nil {
			return err
		}
	}
	_, err := k.leaf(ctx, c, mode, vocab.PeerSecret(member), peerRequest(c, member), ca, now)
	return err
}

// leaf is a certificate the operator issues for client traffic, and its Secret.
type leaf struct {
	secret string
	req    pki.Request
}

// clientLeaves are the certificates of client traffic: the members' server certificate,
// the operator's client certificate, one for applications and one per user of
// spec.auth.users.
func clientLeaves(c *v1alpha1.EtcdCluster) []leaf {
	out := serverAndClients(c)
	for _, u := range c.Spec.AuthUsers() {
		out = append(out, leaf{vocab.UserSecret(c.Name, u.Name), pki.Request{CommonName: u.Name, Client: true}})
	}
	return out
}

// clientSecrets are the Secrets of the client certificates the operator issues (the
// operator's, the applications', the users'): those no member mounts, whose ca.crt a change
// of CA must reach before any member serves a certificate of the new one.
func clientSecrets(c *v1alpha1.EtcdCluster) []string {
	var out []string
	for _, l := range clientLeaves(c) {
		if l.secret != vocab.ServerSecret(c.Name) {
			out = append(out, l.secret)
		}
	}
	return out
}

// serverAndClients are the members' server certificate, the operator's and the one for
// applications.
func serverAndClients(c *v1alpha1.EtcdCluster) []leaf {
	ns, headless, svc := c.Namespace, vocab.HeadlessService(c.Name), vocab.ClientService(c.Name)
	return []leaf{
		{vocab.ServerSecret(c.Name), pki.Request{CommonName: c.Name + " server",
			// Every member's name through the headless Service, the client Service's names, and
			// the member itself (etcd's gateway dials it at localhost).
			DNSNames: []string{"*." + headless + "." + ns + ".svc", "*." + headless + "." + ns + ".svc.cluster.local",
				svc, svc + "." + ns, svc + "." + ns + ".svc", svc + "." + ns + ".svc.cluster.local", "localhost"},
			IPs:    []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
			Server: true, Client: true}},
		{vocab.OperatorSecret(c.Name), pki.Request{CommonName: OperatorCommonName, Client: true}},
		{vocab.ClientSecret(c.Name), pki.Request{CommonName: c.Name + "-client", Client: true}},
	}
}

// peerRequest is a member's peer certificate: etcd checks a dialing peer's certificate
// against the address it dials from, through the DNS names in it, so it names that member
// exactly (a wildcard would be checked through reverse DNS).
func peerRequest(c *v1alpha1.EtcdCluster, member string) pki.Request {
	host := vocab.MemberHost(c.Name, c.Namespace, member)
	return pki.Request{CommonName: member, DNSNames: []string{host, host + ".cluster.local"}, Server: true, Client: true}
}

func issue(ca pki.KeyPair, c *v1alpha1.EtcdCluster, r pki.Request, now time.Time) (pki.KeyPair, error) {
	r.NotBefore, r.Validity = now, Validity(c)
	pair, err := pki.Issue(ca, r)
	if err != nil {
		return pki.KeyPair{}, fmt.Errorf("issuing a certificate for %s: %w", r.CommonName, err)
	}
	return pair, nil
}

// Validity is how long the certificates the operator issues are valid.
func Validity(c *v1alpha1.EtcdCluster) time.Duration {
	if v := c.Spec.TLS.CertificateValidity; v != nil && v.Duration > 0 {
		return v.Duration
	}
	return 2160 * time.Hour
}

// provided are the user's Secrets the cluster's TLS reads.
func (k Keeper) provided(c *v1alpha1.EtcdCluster) []string {
	var out []string
	if c.Spec.TLS.ClientMode() == v1alpha1.TLSProvided {
		out = append(out, resources.ServerSecret(c), resources.OperatorSecret(c))
	}
	if c.Spec.TLS.PeerMode() == v1alpha1.TLSProvided {
		out = append(out, resources.PeerSecret(c, ""))
	}
	return out
}

// read gets a TLS Secret that must be there with a certificate and its key.
func (k Keeper) read(ctx context.Context, c *v1alpha1.EtcdCluster, name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := k.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, status.Stuck(string(v1alpha1.ReasonTLSSecretNotFound), "Secret %s does not exist: spec.tls names it", name)
		}
		return nil, err
	}
	for _, key := range []string{vocab.TLSCertKey, vocab.TLSKeyKey} {
		if len(s.Data[key]) == 0 {
			return nil, status.Stuck(string(v1alpha1.ReasonTLSSecretInvalid), "Secret %s has no %s", name, key)
		}
	}
	return s, nil
}

// getOrIssue reads a Secret the operator issues, and issues it when it is missing. ca is
// the trust bundle written beside the certificate (nil for the CA itself).
func (k Keeper) getOrIssue(ctx context.Context, c *v1alpha1.EtcdCluster, name string, now time.Time, make func() (pki.KeyPair, error), ca []byte) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := k.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, s)
	if err == nil {
		if !metav1.IsControlledBy(s, c) {
			return nil, status.Stuck(string(v1alpha1.ReasonTLSSecretInvalid), "Secret %s is not this cluster's: rename or delete it", name)
		}
		return s, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	pair, err := make()
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{vocab.TLSCertKey: pair.Cert, vocab.TLSKeyKey: pair.Key}
	if ca != nil {
		data[vocab.CACertKey] = pki.Bundle(ca)
	}
	s, err = k.createOwned(ctx, c, name, corev1.SecretTypeTLS, data)
	if apierrors.IsAlreadyExists(err) {
		return nil, errors.New("Secret " + name + " appeared while it was issued; reading it again")
	}
	return s, err
}

// createOwned creates a Secret of the cluster's, which goes with it.
func (k Keeper) createOwned(ctx context.Context, c *v1alpha1.EtcdCluster, name string, typ corev1.SecretType, data map[string][]byte) (*corev1.Secret, error) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: c.Namespace, Labels: resources.ClusterLabels(c)},
		Type: typ, Data: data}
	if err := controllerutil.SetControllerReference(c, s, k.Client.Scheme()); err != nil {
		return nil, err
	}
	if err := k.Client.Create(ctx, s); err != nil {
		return nil, err
	}
	return s, nil
}

func keyPair(s *corev1.Secret) pki.KeyPair {
	return pki.KeyPair{Cert: s.Data[vocab.TLSCertKey], Key: s.Data[vocab.TLSKeyKey]}
}

// note records a Secret's certificate in the status; renewed says the operator renews it.
func (st *State) note(s *corev1.Secret, renewed bool) {
	f, err := pki.Read(s.Data[vocab.TLSCertKey])
	if err != nil {
		return
	}
	cs := v1alpha1.CertificateStatus{SecretName: s.Name, Subject: f.Subject, Issuer: f.Issuer, NotAfter: metav1.NewTime(f.NotAfter)}
	if renewed {
		cs.RenewAt = &metav1.Time{Time: f.RenewAt()}
	}
	st.Status.Certificates = append(st.Status.Certificates, cs)
}

// due reports whether a certificate the operator issued is to be renewed at now.
func due(s *corev1.Secret, now time.Time) bool {
	f, err := pki.Read(s.Data[vocab.TLSCertKey])
	return err != nil || !now.Before(f.RenewAt())
}

// renewal says whether a Secret the operator issued is to be renewed: due, or renewed
// and not yet served by the members that mount it.
func renewal(c *v1alpha1.EtcdCluster, s *corev1.Secret, issuer []byte, now time.Time) (planner.Renewal, bool) {
	_, mounted, _ := request(c, s.Name)
	switch {
	case s.Annotations[vocab.AnnotationUnserved] != "":
		return planner.Renewal{Secret: s.Name, Unserved: true, Mounted: mounted}, true
	case !issuedBy(s, issuer): // the CA was rotated
		return planner.Renewal{Secret: s.Name, Mounted: mounted, Rotated: true}, true
	case due(s, now):
		return planner.Renewal{Secret: s.Name, Mounted: mounted}, true
	}
	return planner.Renewal{Mounted: mounted}, false
}

// request is the certificate a Secret the operator issues holds, and whether members
// mount it.
func request(c *v1alpha1.EtcdCluster, secret string) (pki.Request, bool, error) {
	for _, l := range clientLeaves(c) {
		if l.secret == secret {
			return l.req, secret == vocab.ServerSecret(c.Name), nil
		}
	}
	if member, ok := strings.CutSuffix(secret, "-peer-tls"); ok && vocab.PeerSecret(member) == secret && vocab.Ordinal(c.Name, member) >= 0 {
		return peerRequest(c, member), true, nil
	}
	return pki.Request{}, false, fmt.Errorf("Secret %s is not one the operator issues for %s", secret, c.Name)
}

// Renew issues the certificate in a Secret again from the cluster's CA when it is due; one
// that members mount is marked unserved until they serve it (Served). It does nothing to a
// certificate that is not due, so a step applied again renews once.
func (k Keeper) Renew(ctx context.Context, c *v1alpha1.EtcdCluster, secret string, now time.Time) error {
	req, mounted, err := request(c, secret)
	if err != nil {
		return status.Stuck(string(v1alpha1.ReasonTLSSecretInvalid), "%v", err)
	}
	s, err := k.read(ctx, c, secret)
	if err != nil {
		return err
	}
	caSecret, err := k.read(ctx, c, vocab.CASecret(c.Name))
	if err != nil || !due(s, now) && issuedBy(s, caSecret.Data[vocab.TLSCertKey]) {
		return err
	}
	if !metav1.IsControlledBy(s, c) {
		return status.Stuck(string(v1alpha1.ReasonTLSSecretInvalid), "Secret %s is not this cluster's: the operator renews only what it issued; rename or delete it", secret)
	}
	pair, err := issue(keyPair(caSecret), c, req, now)
	if err != nil {
		return err
	}
	s.Data[vocab.TLSCertKey], s.Data[vocab.TLSKeyKey] = pair.Cert, pair.Key
	bundle := caBundle(caSecret)
	if resources.SourceChanging(c) {
		bundle = union(bundle, s.Data[vocab.CACertKey]) // and the other source's CAs (trustAlso)
	}
	s.Data[vocab.CACertKey] = bundle
	if mounted {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		f, _ := pki.Read(pair.Cert)
		s.Annotations[vocab.AnnotationUnserved] = f.Serial
	}
	return k.Client.Update(ctx, s)
}

// Served checks that every member that mounts a renewed certificate serves it, dialing
// each at its Pod IP (member name -> IP) on the port it serves the certificate on, and then
// drops the Secret's unserved mark. Until they all do, it is a status.Waiting error naming
// one that does not.
func (k Keeper) Served(ctx context.Context, c *v1alpha1.EtcdCluster, secret string, podIPs map[string]string) error {
	s, err := k.read(ctx, c, secret)
	if err != nil {
		return err
	}
	serial := s.Annotations[vocab.AnnotationUnserved]
	if serial == "" {
		return nil
	}
	pool, err := pki.Pool(s.Data[vocab.CACertKey])
	if err != nil {
		return status.Stuck(string(v1alpha1.ReasonTLSSecretInvalid), "Secret %s: %v", secret, err)
	}
	for member, ip := range servers(c, secret, podIPs) {
		// A member serving peers TLS beside plain text serves it on the second port alone.
		ports := []int{vocab.PeerPort, vocab.PeerTLSPort}
		if secret == vocab.ServerSecret(c.Name) {
			ports = []int{vocab.ClientPort}
		}
		cfg := &tls.Config{RootCAs: pool, ServerName: vocab.MemberHost(c.Name, c.Namespace, member), MinVersion: tls.VersionTLS12}
		if !slices.ContainsFunc(ports, func(port int) bool {
			got, err := servedSerial(ctx, net.JoinHostPort(ip, strconv.Itoa(port)), cfg)
			return err == nil && got == serial
		}) {
			return status.Waiting("waiting for %s to serve the renewed certificate of Secret %s (a Secret volume is updated within a minute or so)", member, secret)
		}
	}
	delete(s.Annotations, vocab.AnnotationUnserved)
	return k.Client.Update(ctx, s)
}

// servers are the members that serve a Secret's certificate, of those with a Pod IP.
func servers(c *v1alpha1.EtcdCluster, secret string, podIPs map[string]string) map[string]string {
	if secret == vocab.ServerSecret(c.Name) {
		return podIPs
	}
	out := map[string]string{}
	for member, ip := range podIPs {
		if vocab.PeerSecret(member) == secret {
			out[member] = ip
		}
	}
	return out
}

// servedSerial is the serial of the certificate the server at addr presents. The
// handshake ends before the server checks the client's certificate, so none is sent.
func servedSerial(ctx context.Context, addr string, cfg *tls.Config) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := (&tls.Dialer{Config: cfg}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return pki.FactsOf(conn.(*tls.Conn).ConnectionState().PeerCertificates[0]).Serial, nil
}
