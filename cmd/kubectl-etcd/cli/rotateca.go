package cli

import (
	"context"
	"flag"
	"fmt"
	"time"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

const rotateCAHelp = `Rotate the cluster's own CA (spec.tls mode Auto): a new CA is trusted beside the old one
(each member restarts, the leader last), every certificate is issued again from it (no restart),
then the old CA is trusted no more (each member restarts). The value --id goes into the annotation
` + v1alpha1.AnnotationRotateCA + `; commit the same annotation with your manifests to do it the GitOps way.

Usage:
  kubectl-etcd rotate-ca NAME [--id VALUE]

Flags:
      --id VALUE            what the rotation is asked as (default: the time now, RFC 3339); a
                            rotation is done once per value
` + kubeFlagsHelp

// rotateCA runs `kubectl-etcd rotate-ca`.
func (c *CLI) rotateCA(ctx context.Context, args []string) int {
	var id string
	return c.annotate(ctx, args, "rotate-ca", rotateCAHelp, func(fs *flag.FlagSet) { fs.StringVar(&id, "id", "", "") },
		func(ec *v1alpha1.EtcdCluster) (string, string, error) {
			key := ec.Namespace + "/" + ec.Name
			if id == "" {
				id = c.Now().UTC().Format(time.RFC3339)
			}
			switch t := ec.Spec.TLS; {
			case t.ClientMode() != v1alpha1.TLSAuto && t.PeerMode() != v1alpha1.TLSAuto:
				return "", "", fmt.Errorf("EtcdCluster %s has no CA of the operator's to rotate (spec.tls mode Auto on a side); "+
					"with Provided or CertManager, the CA is yours: see docs/security.md", key)
			case ec.Annotations[v1alpha1.AnnotationRotateCA] == id:
				return "", fmt.Sprintf("EtcdCluster %s: the CA rotation %s was already asked\n", key, id), nil
			}
			return id, fmt.Sprintf("EtcdCluster %s: CA rotation %s asked; follow it with: kubectl etcd status %s\n", key, id, ec.Name), nil
		}, v1alpha1.AnnotationRotateCA)
}
