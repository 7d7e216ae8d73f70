package certs

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/status"
)

// RootPasswordKey is the key of the root user's password in its Secret.
const RootPasswordKey = "password"

// RootPassword reads the password of etcd's root user from the cluster's Secret, and makes
// the Secret with a random password when it does not exist. A Secret without the key is
// the user's to mend: it is never overwritten.
func (k Keeper) RootPassword(ctx context.Context, c *v1alpha1.EtcdCluster) (string, error) {
	name := c.RootPasswordSecret()
	s := &corev1.Secret{}
	err := k.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: name}, s)
	if apierrors.IsNotFound(err) {
		b := make([]byte, 24)
		_, _ = rand.Read(b) // never fails
		s, err = k.createOwned(ctx, c, name, corev1.SecretTypeOpaque, map[string][]byte{RootPasswordKey: []byte(base64.RawURLEncoding.EncodeToString(b))})
	}
	if err != nil {
		return "", err
	}
	if len(s.Data[RootPasswordKey]) == 0 {
		return "", status.Stuck(string(v1alpha1.ReasonAuthSecretInvalid), "Secret %s has no key %q: the root user's password", name, RootPasswordKey)
	}
	return string(s.Data[RootPasswordKey]), nil
}

// User is the etcd user a client configuration authenticates as: its certificate's common
// name; "" without a certificate.
func User(cfg *tls.Config) string {
	if cfg == nil || len(cfg.Certificates) == 0 || len(cfg.Certificates[0].Certificate) == 0 {
		return ""
	}
	leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil {
		return ""
	}
	return leaf.Subject.CommonName
}
