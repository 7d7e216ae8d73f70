// Package pki issues the certificates of a cluster's TLS: a per-cluster CA and the leaves
// signed by it (members' server and peer certificates, client certificates), and reads back
// the facts of a certificate that renewal and rotation are decided on. It holds no clock:
// every certificate starts at the time it is given.
package pki

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"slices"
	"strings"
	"time"
)

// KeyPair is a certificate and its private key, both PEM.
type KeyPair struct {
	Cert, Key []byte
}

// Request is what a leaf certificate says.
type Request struct {
	CommonName string
	// DNSNames and IPs are the names it is valid for. etcd checks a dialing peer's
	// certificate against the peer's address: a peer certificate names its member exactly.
	DNSNames []string
	IPs      []net.IP
	// Server and Client are its extended key usages. A member's server certificate is both:
	// etcd's gRPC gateway dials the member itself with it.
	Server, Client bool
	NotBefore      time.Time
	Validity       time.Duration
}

// backdate covers clocks a little behind the issuer's: a certificate is valid from a minute
// before it was issued.
const backdate = time.Minute

// NewCA makes a self-signed CA that signs leaves only (no intermediate below it).
func NewCA(commonName string, notBefore time.Time, validity time.Duration) (KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, err
	}
	tmpl, err := template(commonName, notBefore, validity)
	if err != nil {
		return KeyPair{}, err
	}
	tmpl.IsCA, tmpl.BasicConstraintsValid, tmpl.MaxPathLenZero = true, true, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return KeyPair{}, err
	}
	return encode(der, key)
}

// Issue signs a leaf for the request with the CA.
func Issue(ca KeyPair, r Request) (KeyPair, error) {
	if !r.Server && !r.Client {
		return KeyPair{}, errors.New("a certificate needs server or client usage")
	}
	caPair, err := tls.X509KeyPair(ca.Cert, ca.Key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("reading the CA: %w", err)
	}
	caCert, err := x509.ParseCertificate(caPair.Certificate[0])
	if err != nil {
		return KeyPair{}, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, err
	}
	tmpl, err := template(r.CommonName, r.NotBefore, r.Validity)
	if err != nil {
		return KeyPair{}, err
	}
	tmpl.DNSNames, tmpl.IPAddresses = r.DNSNames, r.IPs
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	if r.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if r.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	if tmpl.NotAfter.After(caCert.NotAfter) {
		tmpl.NotAfter = caCert.NotAfter // a leaf outliving its CA would fail before its renewal
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, key.Public(), caPair.PrivateKey.(crypto.Signer))
	if err != nil {
		return KeyPair{}, err
	}
	return encode(der, key)
}

func template(commonName string, notBefore time.Time, validity time.Duration) (*x509.Certificate, error) {
	if validity <= 0 {
		return nil, fmt.Errorf("validity %s is not positive", validity)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		return nil, err
	}
	return &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: commonName},
		NotBefore:    notBefore.Add(-backdate),
		NotAfter:     notBefore.Add(validity),
	}, nil
}

func encode(der []byte, key *ecdsa.PrivateKey) (KeyPair, error) {
	k, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return KeyPair{}, err
	}
	return KeyPair{
		Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: k}),
	}, nil
}

// Facts are what renewal, rotation and status need of a certificate.
type Facts struct {
	Serial              string
	Subject, Issuer     string
	NotBefore, NotAfter time.Time
	DNSNames            []string
	IsCA                bool
}

// Read returns the facts of the first certificate in a PEM bundle.
func Read(certPEM []byte) (Facts, error) {
	certs, err := Certificates(certPEM)
	if err != nil {
		return Facts{}, err
	}
	return FactsOf(certs[0]), nil
}

// FactsOf returns the facts of a parsed certificate (a TLS peer's, say).
func FactsOf(c *x509.Certificate) Facts {
	return Facts{
		Serial:    c.SerialNumber.Text(16),
		Subject:   c.Subject.CommonName,
		Issuer:    c.Issuer.CommonName,
		NotBefore: c.NotBefore,
		NotAfter:  c.NotAfter,
		DNSNames:  c.DNSNames,
		IsCA:      c.IsCA,
	}
}

// RenewAt is when a certificate is renewed: at two thirds of its life, so that a renewal
// that fails has a third of it left to be noticed and helped.
func (f Facts) RenewAt() time.Time {
	return f.NotBefore.Add(f.NotAfter.Sub(f.NotBefore) * 2 / 3)
}

// Bundle joins CA certificates into one trust bundle, each once, in the order given: during
// a rotation members trust the old CA and the new one.
func Bundle(cas ...[]byte) []byte {
	var out [][]byte
	for _, ca := range cas {
		ca = bytes.TrimSpace(ca)
		if len(ca) > 0 && !slices.ContainsFunc(out, func(x []byte) bool { return bytes.Equal(x, ca) }) {
			out = append(out, ca)
		}
	}
	return append(bytes.Join(out, []byte("\n")), '\n')
}

// BundleHash identifies a trust bundle by the certificates in it, whatever their order or
// spacing: a member Pod records the hash of the bundle it mounted, and a rotation's next pass
// waits until every member shows the one it needs.
func BundleHash(bundle []byte) (string, error) {
	certs, err := Certificates(bundle)
	if err != nil {
		return "", err
	}
	ders := make([][]byte, len(certs))
	for i, c := range certs {
		ders[i] = c.Raw
	}
	slices.SortFunc(ders, bytes.Compare)
	h := sha256.New()
	for _, d := range ders {
		h.Write(d)
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// TrustHash identifies the trust bundles of a member's sides (client, then peer), each by
// BundleHash, joined with ".": what a member Pod records of the CAs it trusts.
func TrustHash(bundles ...[]byte) (string, error) {
	hashes := make([]string, len(bundles))
	for i, b := range bundles {
		h, err := BundleHash(b)
		if err != nil {
			return "", err
		}
		hashes[i] = h
	}
	return strings.Join(hashes, "."), nil
}

// Certificates parses every certificate of a PEM bundle.
func Certificates(bundle []byte) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	for rest := bundle; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no certificate in the PEM data")
	}
	return certs, nil
}

// Pool is the trust pool of a bundle.
func Pool(bundle []byte) (*x509.CertPool, error) {
	certs, err := Certificates(bundle)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return pool, nil
}

// ClientConfig is the TLS configuration of a client that presents the key pair and trusts
// the bundle.
func ClientConfig(pair KeyPair, bundle []byte) (*tls.Config, error) {
	cert, err := tls.X509KeyPair(pair.Cert, pair.Key)
	if err != nil {
		return nil, err
	}
	pool, err := Pool(bundle)
	if err != nil {
		return nil, err
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}, nil
}
