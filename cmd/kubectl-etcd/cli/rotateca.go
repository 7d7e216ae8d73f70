package cli

import (
	"context"
	"fmt"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

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
	var k kubeFlags
	var id string
	fs := newFlagSet("rotate-ca")
	fs.StringVar(&id, "id", "", "")
	k.add(fs)
	name, err := parseName(fs, args)
	if err != nil {
		return c.flagError(err, "rotate-ca", rotateCAHelp)
	}
	if id == "" {
		id = c.Now().UTC().Format("2006-01-02T15:04:05Z")
	}
	kc, err := k.connect()
	if err != nil {
		return c.fail(err)
	}
	key := client.ObjectKey{Namespace: kc.namespace, Name: name}
	var msg string
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ec := &v1alpha1.EtcdCluster{}
		if err := kc.Get(ctx, key, ec); err != nil {
			return err
		}
		if t := ec.Spec.TLS; t.ClientMode() != v1alpha1.TLSAuto && t.PeerMode() != v1alpha1.TLSAuto {
			return fmt.Errorf("EtcdCluster %s has no CA of the operator's to rotate (spec.tls mode Auto on a side); "+
				"with Provided or CertManager, the CA is yours: see docs/security.md", key)
		}
		if ec.Annotations[v1alpha1.AnnotationRotateCA] == id {
			msg = fmt.Sprintf("EtcdCluster %s: the CA rotation %s was already asked\n", key, id)
			return nil
		}
		patch := client.MergeFromWithOptions(ec.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if ec.Annotations == nil {
			ec.Annotations = map[string]string{}
		}
		ec.Annotations[v1alpha1.AnnotationRotateCA] = id
		msg = fmt.Sprintf("EtcdCluster %s: CA rotation %s asked; follow it with: kubectl etcd status %s\n", key, id, name)
		return kc.Patch(ctx, ec, patch)
	})
	if err != nil {
		return c.fail(err)
	}
	fmt.Fprint(c.Stdout, msg)
	return ExitOK
}
