package convert

import (
	"errors"
	"fmt"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// cozystack etcd-operator: etcd-operator.cozystack.io/v1alpha2. Its members are Pods named
// <cluster>-<random>, each with an EtcdMember; clients reach them through the Service
// <cluster>-client on port 2379.
const (
	cozystackGroup = "etcd-operator.cozystack.io"
	cozystackLabel = "etcd-operator.cozystack.io/cluster"
)

func cozystackCluster(t *theirs, opts Options) (*cluster, error) {
	s := t.spec
	c, err := newCluster(t, opts, "replicas", 3, s.str("version"))
	if err != nil {
		return nil, err
	}
	client := t.name + "-client"
	c.hosts = []string{t.name, client}
	auth := s.obj("auth")
	on, credentials := auth.flag("enabled"), auth.obj("rootCredentialsSecretRef").str("name")
	if !on {
		credentials = ""
	}
	c.join([]string{hostPort(c.svc(client), 2379)}, cozystackTLS(t.name, s.obj("tls")), credentials)
	c.auth(on, "their operator is etcd's root user by the password in Secret "+credentials)
	s.drop("progressDeadlineSeconds", "bounds a whole change there; here each step has its own deadline, spec.updateStrategy.progressDeadlineSeconds (600 unless set)")
	s.drop("bootstrap", restored)
	storage := s.obj("storage")
	c.out.Spec.Storage.Medium = v1alpha1.StorageMedium(storage.str("medium"))
	c.out.Spec.Storage.StorageClassName = storage.str("storageClassName")
	meta := s.obj("additionalMetadata")
	if s.has("additionalMetadata") {
		c.from.notes = append(c.from.notes, "spec.additionalMetadata: theirs goes on every object their operator makes; here on member Pods (spec.podMetadata) only")
	}
	return c, errors.Join(
		c.size(storage.at("size"), storage.str("size")),
		s.into("options", &c.out.Spec.Options),
		c.podMetadata(meta),
		c.scheduling(s, cozystackLabel),
	)
}

// cozystackTLS reads spec.tls: Secrets of kubernetes.io/tls shape with ca.crt, named by
// the user or made by cert-manager under names of the cluster's.
func cozystackTLS(name string, f fields) sourceTLS {
	client, peer := f.obj("client"), f.obj("peer")
	tls := sourceTLS{client: f.has("client"), peer: f.has("peer")}
	server, operator := client.obj("serverSecretRef").str("name"), client.obj("operatorClientSecretRef").str("name")
	if cm := client.obj("certManager"); client.has("certManager") {
		server = name + "-server-tls"
		if cm.has("operatorClientIssuerRef") {
			operator = name + "-operator-client-tls"
		}
		client.take("certManager")
	}
	peerSecret := peer.obj("secretRef").str("name")
	if peer.has("certManager") {
		peerSecret = name + "-peer-tls"
		peer.take("certManager")
	}
	tls.ca = "ca.crt of Secret " + server
	if operator != "" {
		tls.cert = "tls.crt and tls.key of Secret " + operator
	}
	tls.peerCA = "ca.crt of Secret " + peerSecret
	return tls
}

func cozystackSnapshot(t *theirs, cs clusters) ([]any, error) {
	name := t.spec.obj("clusterRef").str("name")
	t.belongs(cs.named(cozystackGroup, name), fmt.Sprintf("spec.clusterRef.name %s", name))
	if t.of == nil {
		return nil, nil
	}
	return newBackup(t, location(t, t.spec.obj("destination")))
}
