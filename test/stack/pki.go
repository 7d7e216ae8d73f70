package stack

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// identity is a client certificate the stack issues: one per component and node.
type identity struct {
	file   string // base name of the kubeconfig under .stack/kubeconfigs/ ("" for admin)
	user   string // certificate CN
	groups []string
}

func identities() []identity {
	ids := []identity{
		{file: "", user: "kubernetes-admin", groups: []string{"system:masters"}},
		{file: "kube-controller-manager", user: "system:kube-controller-manager"},
		{file: "kube-scheduler", user: "system:kube-scheduler"},
		{file: "cluster", user: "etcdplan:localkubelet-cluster", groups: []string{"system:masters"}},
	}
	for _, n := range Nodes() {
		ids = append(ids, identity{file: n, user: "system:node:" + n, groups: []string{"system:nodes"}})
	}
	return ids
}

// writePKI creates the stack's CA, the apiserver's serving certificate, the service-account
// key pair and a kubeconfig for every identity. Everything is new: a fresh stack gets fresh
// credentials.
func writePKI(l layout) error {
	for _, d := range []string{l.state("certs"), l.state("kubeconfigs")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	now := time.Now().Add(-time.Hour)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "etcdplan-stack-ca"},
		NotBefore:             now,
		NotAfter:              now.Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return err
	}
	caPEM := pemCert(caDER)
	if err := writeFile(l.cert("ca.crt"), caPEM, 0o644); err != nil {
		return err
	}
	if err := writeKey(l.cert("ca.key"), caKey); err != nil {
		return err
	}

	issue := func(name string, tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		tmpl.SerialNumber = serial()
		tmpl.NotBefore = now
		tmpl.NotAfter = now.Add(5 * 365 * 24 * time.Hour)
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return nil, nil, fmt.Errorf("certificate %s: %w", name, err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return nil, nil, err
		}
		return pemCert(der), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), nil
	}

	// The apiserver's serving certificate: reached from the host (127.0.0.1), from Pods
	// (the bridge's address) and by the kubernetes Service's names and ClusterIP.
	crt, key, err := issue("apiserver", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc." + clusterDomain},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(l.n.BridgeIP()), net.ParseIP(serviceIP)},
	})
	if err != nil {
		return err
	}
	if err := writePair(l, "apiserver", crt, key); err != nil {
		return err
	}
	// The nodes' kubelet API serving certificate (every node listens on the bridge's
	// address), and the apiserver's client certificate for it (allowed by RBAC, see up).
	crt, key, err = issue("kubelet", &x509.Certificate{
		Subject:     pkix.Name{CommonName: "localkubelet"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    Nodes(),
		IPAddresses: []net.IP{net.ParseIP(l.n.BridgeIP())},
	})
	if err != nil {
		return err
	}
	if err := writePair(l, "kubelet", crt, key); err != nil {
		return err
	}
	crt, key, err = issue(kubeletClientUser, &x509.Certificate{
		Subject:     pkix.Name{CommonName: kubeletClientUser},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return err
	}
	if err := writePair(l, "apiserver-kubelet-client", crt, key); err != nil {
		return err
	}

	// Service-account token signing key pair.
	saKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	if err := writeKey(l.cert("sa.key"), saKey); err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	if err := writeFile(l.cert("sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return err
	}

	server := fmt.Sprintf("https://127.0.0.1:%d", l.n.APIServerPort())
	for _, id := range identities() {
		crt, key, err := issue(id.user, &x509.Certificate{
			Subject:     pkix.Name{CommonName: id.user, Organization: id.groups},
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})
		if err != nil {
			return err
		}
		path := l.kubeconfig()
		if id.file != "" {
			path = l.kubeconfigFor(id.file)
		}
		if err := writeKubeconfig(path, server, caPEM, crt, key, id.user); err != nil {
			return err
		}
	}
	return nil
}

// kubeletClientUser is the apiserver's user toward the kubelets' API.
const kubeletClientUser = "kube-apiserver-kubelet-client"

// writePair writes NAME.crt and NAME.key under the certificates' directory.
func writePair(l layout, name string, crt, key []byte) error {
	if err := writeFile(l.cert(name+".crt"), crt, 0o644); err != nil {
		return err
	}
	return writeFile(l.cert(name+".key"), key, 0o600)
}

func writeKubeconfig(path, server string, caPEM, crt, key []byte, user string) error {
	const name = "etcdplan-stack"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: crt, ClientKeyData: key}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user}
	cfg.CurrentContext = name
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return err
	}
	return writeFile(path, b, 0o600)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	if err != nil {
		panic(err)
	}
	return n
}

func pemCert(der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func writeKey(path string, key crypto.Signer) error {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return err
	}
	return writeFile(path, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600)
}

// writeFile writes atomically: readers never see a half-written file.
func writeFile(path string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}
