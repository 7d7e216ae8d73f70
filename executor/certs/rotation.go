package certs

import (
	"bytes"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/pki"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/executor/status"
	"github.com/etcdplan/etcdplan/planner"
)

// A rotation of the cluster's own CA (mode Auto) keeps its stage in the CA Secret, so that
// it survives the operator and is read again at every look (planner/rotation.go says why
// each stage waits for the one before):
//   - Asked: the EtcdCluster's etcdplan.io/rotate-ca differs from the value the CA Secret
//     records, and no rotation runs;
//   - Trusting: the new CA is in next.crt and next.key, and in the trust Secret beside the
//     old one, which still issues (tls.crt, tls.key);
//   - Issuing: the new CA issues; the old one's certificate is in previous.crt and still
//     in the trust Secret;
//   - Retiring: the trust Secret holds the new CA alone; previous.crt is kept until every
//     member restarted with it.

// rotation reads where a rotation of the cluster's CA stands; nil when none is asked or
// under way. trusted is the trust Secret's bundle.
func rotation(c *v1alpha1.EtcdCluster, ca *corev1.Secret, trusted []byte) *planner.CARotation {
	if c.Spec.TLS.ClientMode() != v1alpha1.TLSAuto && c.Spec.TLS.PeerMode() != v1alpha1.TLSAuto {
		return nil
	}
	r := &planner.CARotation{Secret: ca.Name, PeerLeaves: c.Spec.TLS.PeerMode() == v1alpha1.TLSAuto}
	switch {
	case len(ca.Data[vocab.NextCertKey]) > 0 && holds(trusted, ca.Data[vocab.NextCertKey]):
		r.Stage = planner.CATrusting
	case len(ca.Data[vocab.NextCertKey]) > 0:
		r.Stage = planner.CAAsked // the new CA is made, not trusted yet: RotateCA CANew goes on
	case len(ca.Data[vocab.PreviousCertKey]) > 0 && holds(trusted, ca.Data[vocab.PreviousCertKey]):
		r.Stage = planner.CAIssuing
	case len(ca.Data[vocab.PreviousCertKey]) > 0:
		r.Stage = planner.CARetiring
	case asked(c, ca):
		r.Stage = planner.CAAsked
	default:
		return nil
	}
	return r
}

// asked: the EtcdCluster asks for a rotation its CA was not made or rotated for.
func asked(c *v1alpha1.EtcdCluster, ca *corev1.Secret) bool {
	want := c.Annotations[v1alpha1.AnnotationRotateCA]
	return want != "" && want != ca.Annotations[vocab.AnnotationCARotation]
}

// holds: the bundle holds the first certificate of pem.
func holds(bundle, pem []byte) bool {
	certs, err := pki.Certificates(pem)
	return err == nil && trusts(bundle, certs[0])
}

// issuedBy: the Secret's certificate was signed by the CA's key.
func issuedBy(s *corev1.Secret, ca []byte) bool {
	leaf, err1 := pki.Certificates(s.Data[vocab.TLSCertKey])
	cas, err2 := pki.Certificates(ca)
	return err1 == nil && err2 == nil && leaf[0].CheckSignatureFrom(cas[0]) == nil
}

// rotationStatus says where a rotation stands, for status.tls.caRotation.
func rotationStatus(c *v1alpha1.EtcdCluster, r *planner.CARotation) *v1alpha1.CARotationStatus {
	if r == nil {
		return nil
	}
	return &v1alpha1.CARotationStatus{Requested: c.Annotations[v1alpha1.AnnotationRotateCA], Stage: string(r.Stage), Pass: int32(r.Stage.Pass())}
}

// Rotate moves a rotation of the cluster's CA on from the stage the step's reason moves
// it from. Each stage is one update of a Secret, and a step applied again finds its stage
// done and does nothing more.
func (k Keeper) Rotate(ctx context.Context, c *v1alpha1.EtcdCluster, why plan.Why, now time.Time) error {
	ca, err := k.read(ctx, c, vocab.CASecret(c.Name))
	if err != nil {
		return err
	}
	trust := &corev1.Secret{}
	if err := k.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: vocab.TrustSecret(c.Name)}, trust); err != nil {
		return err
	}
	switch why {
	case plan.WhyCANew:
		return k.newCA(ctx, c, ca, trust, now)
	case plan.WhyCAIssues:
		if len(ca.Data[vocab.NextCertKey]) == 0 {
			return nil // done
		}
		ca.Data[vocab.PreviousCertKey] = ca.Data[vocab.TLSCertKey]
		ca.Data[vocab.TLSCertKey], ca.Data[vocab.TLSKeyKey] = ca.Data[vocab.NextCertKey], ca.Data[vocab.NextKeyKey]
		delete(ca.Data, vocab.NextCertKey)
		delete(ca.Data, vocab.NextKeyKey)
		return k.Client.Update(ctx, ca)
	case plan.WhyCARetired:
		if len(ca.Data[vocab.PreviousCertKey]) == 0 || !holds(trust.Data[vocab.CACertKey], ca.Data[vocab.PreviousCertKey]) {
			return nil // done
		}
		trust.Data[vocab.CACertKey] = pki.Bundle(ca.Data[vocab.TLSCertKey])
		return k.Client.Update(ctx, trust)
	case plan.WhyCADropped:
		if len(ca.Data[vocab.PreviousCertKey]) == 0 {
			return nil
		}
		delete(ca.Data, vocab.PreviousCertKey)
		return k.Client.Update(ctx, ca)
	}
	return fmt.Errorf("RotateCA: unknown reason %q", why)
}

// newCA makes the new CA beside the one that issues, records the rotation asked for, and
// adds the new CA to the trust Secret.
func (k Keeper) newCA(ctx context.Context, c *v1alpha1.EtcdCluster, ca, trust *corev1.Secret, now time.Time) error {
	if len(ca.Data[vocab.NextCertKey]) == 0 {
		if len(ca.Data[vocab.PreviousCertKey]) > 0 {
			return status.Waiting("the rotation before is not done yet")
		}
		pair, err := pki.NewCA(caName(c), now, caValidity)
		if err != nil {
			return err
		}
		ca.Data[vocab.NextCertKey], ca.Data[vocab.NextKeyKey] = pair.Cert, pair.Key
		if ca.Annotations == nil {
			ca.Annotations = map[string]string{}
		}
		ca.Annotations[vocab.AnnotationCARotation] = c.Annotations[v1alpha1.AnnotationRotateCA]
		if err := k.Client.Update(ctx, ca); err != nil {
			return err
		}
	}
	if err := k.spreadTrust(ctx, c, ca); err != nil || holds(trust.Data[vocab.CACertKey], ca.Data[vocab.NextCertKey]) {
		return err
	}
	trust.Data[vocab.CACertKey] = pki.Bundle(trust.Data[vocab.CACertKey], ca.Data[vocab.NextCertKey])
	return k.Client.Update(ctx, trust)
}

// caName is the common name of the cluster's CA.
func caName(c *v1alpha1.EtcdCluster) string { return c.Namespace + "/" + c.Name + " etcd CA" }

// Trust identifies the trust bundles a member Pod that serves as l mounts (pki.TrustHash):
// what its annotation etcdplan.io/trust records. "" for plain text.
func (k Keeper) Trust(ctx context.Context, c *v1alpha1.EtcdCluster, l plan.Listen) (string, error) {
	var bundles [][]byte
	read := map[string][]byte{} // both sides may trust the same Secret: read it once
	for _, t := range resources.TrustedBy(c, resources.Serving(c, l)) {
		b, ok := read[t.Secret]
		if !ok {
			s := &corev1.Secret{}
			if err := k.Reader.Get(ctx, client.ObjectKey{Namespace: c.Namespace, Name: t.Secret}, s); err != nil {
				return "", err
			}
			b, read[t.Secret] = s.Data[vocab.CACertKey], s.Data[vocab.CACertKey]
		}
		bundles = append(bundles, b)
	}
	h, err := pki.TrustHash(bundles...)
	if err != nil {
		return "", status.Stuck(string(v1alpha1.ReasonTLSSecretInvalid), "the trust bundle (%s) of a Secret spec.tls names: %v", vocab.CACertKey, err)
	}
	if resources.SourceChanging(c) && c.Status.TLS.CARotation.Stage == string(planner.CAIssuing) {
		// Pass 2 of a change of source: the trust bundle is the same, the certificates a Pod
		// made now mounts are the new source's, and every member restarts onto them.
		h += "@" + string(c.Spec.TLS.ClientMode()) + "/" + string(c.Spec.TLS.PeerMode())
	}
	return h, nil
}

// caBundle is what a certificate of the cluster's CA is checked against (its Secret's
// ca.crt): the CA that issues, and during a rotation the other CA beside it, so that an
// application that reads its Secret again trusts the members' certificates of either.
func caBundle(ca *corev1.Secret) []byte {
	return pki.Bundle(ca.Data[vocab.TLSCertKey], ca.Data[vocab.NextCertKey], ca.Data[vocab.PreviousCertKey])
}

// spreadTrust gives the client certificates' Secrets (clientSecrets) the CA Secret's
// bundle (caBundle) before any member serves a certificate of the new CA.
func (k Keeper) spreadTrust(ctx context.Context, c *v1alpha1.EtcdCluster, ca *corev1.Secret) error {
	if c.Spec.TLS.ClientMode() != v1alpha1.TLSAuto {
		return nil
	}
	for _, name := range clientSecrets(c) {
		s, err := k.read(ctx, c, name)
		if err != nil {
			return err
		}
		if bytes.Equal(s.Data[vocab.CACertKey], caBundle(ca)) {
			continue
		}
		s.Data[vocab.CACertKey] = caBundle(ca)
		if err := k.Client.Update(ctx, s); err != nil {
			return err
		}
	}
	return nil
}
