package certs

import (
	"context"
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/pki"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/executor/status"
)

// With mode CertManager, cert-manager issues the cluster's own CA from spec.tls.issuerRef
// (a Certificate with isCA), an Issuer of kind CA signs with it, and the leaves come from
// that Issuer into the Secrets Auto uses. The cluster owns the Certificates and the Issuer;
// cert-manager renews them. Members trust the cluster's CA alone (the trust Secret), never
// the issuer above it, so no certificate of that issuer is an etcd client. The operator
// creates what is missing and never changes what is there; without the webhook nothing
// defaults these objects, so they are complete.

var (
	certificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}
	issuerGVK      = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Issuer"}
)

// certManagerCA has cert-manager issue the cluster's CA, and the Issuer that signs with it.
func (k Keeper) certManagerCA(ctx context.Context, c *v1alpha1.EtcdCluster) error {
	ref := c.Spec.TLS.IssuerRef
	ca := certificate(c, vocab.CASecret(c.Name), map[string]any{
		"isCA": true, "commonName": c.Namespace + "/" + c.Name + " etcd CA", "duration": caValidity.String(),
		"usages":    []any{"cert sign", "crl sign", "digital signature"},
		"issuerRef": map[string]any{"name": ref.Name, "kind": ref.Kind, "group": "cert-manager.io"},
	})
	// The CA keeps its key when cert-manager renews it, so the certificates it issued before
	// still chain to the renewed one; its renewal adds it to the trust bundle (trust).
	ca.Object["spec"].(map[string]any)["privateKey"].(map[string]any)["rotationPolicy"] = "Never"
	if err := k.create(ctx, c, ca); err != nil {
		return err
	}
	issuer := &unstructured.Unstructured{}
	issuer.SetGroupVersionKind(issuerGVK)
	issuer.SetNamespace(c.Namespace)
	issuer.SetName(vocab.CASecret(c.Name))
	issuer.Object["spec"] = map[string]any{"ca": map[string]any{"secretName": vocab.CASecret(c.Name)}}
	return k.create(ctx, c, issuer)
}

// certManagerLeaf has the cluster's CA Issuer issue a leaf into its Secret.
func (k Keeper) certManagerLeaf(ctx context.Context, c *v1alpha1.EtcdCluster, secret string, r pki.Request) error {
	v := Validity(c)
	spec := map[string]any{"commonName": r.CommonName, "duration": v.String(), "renewBefore": (v / 3).String(),
		"usages":    usages(r),
		"issuerRef": map[string]any{"name": vocab.CASecret(c.Name), "kind": "Issuer", "group": "cert-manager.io"}}
	if len(r.DNSNames) > 0 {
		spec["dnsNames"] = anyStrings(r.DNSNames)
	}
	if len(r.IPs) > 0 {
		spec["ipAddresses"] = ips(r.IPs)
	}
	return k.create(ctx, c, certificate(c, secret, spec))
}

// certificate is a Certificate into secret, named after it, with an ECDSA key made anew at
// each renewal.
func certificate(c *v1alpha1.EtcdCluster, secret string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(certificateGVK)
	u.SetNamespace(c.Namespace)
	u.SetName(secret)
	u.SetLabels(resources.ClusterLabels(c))
	spec["secretName"] = secret
	spec["privateKey"] = map[string]any{"algorithm": "ECDSA", "size": int64(256), "encoding": "PKCS1", "rotationPolicy": "Always"}
	spec["secretTemplate"] = map[string]any{"labels": toAny(resources.ClusterLabels(c))}
	u.Object["spec"] = spec
	return u
}

// create creates a cert-manager object the cluster owns, unless it is there. cert-manager
// not installed stalls the cluster with a reason that says so.
func (k Keeper) create(ctx context.Context, c *v1alpha1.EtcdCluster, u *unstructured.Unstructured) error {
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(u.GroupVersionKind())
	err := k.Reader.Get(ctx, client.ObjectKeyFromObject(u), live)
	switch {
	case meta.IsNoMatchError(err):
		return status.Stuck(string(v1alpha1.ReasonCertManagerNotInstalled),
			"spec.tls mode CertManager needs cert-manager: its %s kind is not served by this cluster", u.GetKind())
	case err == nil:
		return nil
	case !apierrors.IsNotFound(err):
		return err
	}
	if err := controllerutil.SetControllerReference(c, u, k.Client.Scheme()); err != nil {
		return err
	}
	if err := k.Client.Create(ctx, u); err != nil && !apierrors.IsAlreadyExists(err) {
		if meta.IsNoMatchError(err) {
			return status.Stuck(string(v1alpha1.ReasonCertManagerNotInstalled),
				"spec.tls mode CertManager needs cert-manager: its %s kind is not served by this cluster", u.GetKind())
		}
		return fmt.Errorf("creating %s %s: %w", u.GetKind(), u.GetName(), err)
	}
	return nil
}

// issued reads the Secret cert-manager issues for a Certificate, and waits until it has.
func (k Keeper) issued(ctx context.Context, c *v1alpha1.EtcdCluster, secret string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	err := k.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: secret}, s)
	switch {
	case apierrors.IsNotFound(err), err == nil && (len(s.Data[vocab.TLSCertKey]) == 0 || len(s.Data[vocab.TLSKeyKey]) == 0):
		return nil, status.Waiting("waiting for cert-manager to issue Certificate %s (kubectl describe certificate %s)", secret, secret)
	case err != nil:
		return nil, err
	}
	return s, nil
}

func usages(r pki.Request) []any {
	out := []any{"digital signature"}
	if r.Server {
		out = append(out, "server auth")
	}
	if r.Client {
		out = append(out, "client auth")
	}
	return out
}

func anyStrings(xs []string) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x
	}
	return out
}

func ips(xs []net.IP) []any {
	out := make([]any, len(xs))
	for i, x := range xs {
		out[i] = x.String()
	}
	return out
}

func toAny(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
