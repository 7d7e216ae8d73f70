package convert

import (
	"errors"
	"fmt"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// coreos etcd-operator: etcd.database.coreos.com/v1beta2. Its members are Pods named
// <cluster>-<random>, behind the client Service <cluster>-client on port 2379.
const (
	coreosGroup          = "etcd.database.coreos.com"
	coreosDefaultVersion = "3.2.13" // what it runs when spec.version is not set
	coreosLabel          = "etcd_cluster"
)

func coreosCluster(t *theirs, opts Options) (*cluster, error) {
	s := t.spec
	version := s.str("version")
	if version == "" {
		version = coreosDefaultVersion
	}
	c, err := newCluster(t, opts, "size", 0, version)
	if err != nil {
		return nil, err
	}
	c.out.Spec.Image = s.str("repository")
	s.drop("paused", "their operator's pause: keep it set until the adoption is done, then delete their EtcdCluster (docs/migration.md)")
	client := t.name + "-client"
	c.hosts = []string{client}
	c.join([]string{hostPort(c.svc(client), 2379)}, coreosTLS(s.obj("TLS").obj("static")), "")
	return c, coreosPod(c, s.obj("pod"))
}

// coreosTLS reads spec.TLS.static: its Secrets hold server.crt and server-ca.crt (server),
// peer.crt and peer-ca.crt (peer), etcd-client.crt, etcd-client.key and etcd-client-ca.crt
// (the operator's client certificate).
func coreosTLS(f fields) sourceTLS {
	member := f.obj("member")
	server, peer, operator := member.str("serverSecret"), member.str("peerSecret"), f.str("operatorSecret")
	return sourceTLS{
		client: server != "",
		peer:   peer != "",
		ca:     "etcd-client-ca.crt of Secret " + operator,
		cert:   "etcd-client.crt and etcd-client.key of Secret " + operator,
		peerCA: "peer-ca.crt of Secret " + peer,
	}
}

func coreosPod(c *cluster, pod fields) error {
	if pod.flag("antiAffinity") && !pod.has("affinity") {
		pod.note("antiAffinity", fmt.Sprintf("deprecated by their operator: write it as spec.affinity.podAntiAffinity selecting %s=%s", v1alpha1.LabelCluster, c.out.Name))
	}
	pod.drop("etcdEnv", "etcd flags as environment variables: set those etcdplan does not manage in spec.options (typed fields, or extraArgs without the ETCD_ prefix)")
	pod.drop("busyboxImage", "member Pods here have no init container that waits for DNS")
	pod.drop("securityContext", "member Pods here run as non-root with the operator's own security context")
	pod.drop("DNSTimeoutInSecond", "member Pods here have no init container that waits for DNS")
	pod.drop("ClusterDomain", "members here are addressed as <member>.<cluster>.<namespace>.svc, without the cluster domain")
	return errors.Join(coreosStorage(c, pod), c.podMetadata(pod), c.scheduling(pod, coreosLabel))
}

// coreosStorage: their members keep data on emptyDir unless a claim spec is given.
func coreosStorage(c *cluster, pod fields) error {
	if !pod.has("persistentVolumeClaimSpec") {
		c.from.notes = append(c.from.notes, "spec.pod.persistentVolumeClaimSpec is not set: their members keep data in emptyDir; ours keep it on volume claims of spec.storage.size")
		return nil
	}
	return c.claim(pod.obj("persistentVolumeClaimSpec"))
}

func coreosBackup(t *theirs, cs clusters) ([]any, error) {
	s := t.spec
	endpoints := stringList(s.take("etcdEndpoints"))
	t.belongs(cs.reaching(coreosGroup, endpoints), fmt.Sprintf("spec.etcdEndpoints %v", endpoints))
	if t.of == nil {
		return nil, nil
	}
	s.take("storageType") // the store set says it
	s.drop("clientTLSSecret", "the operator reaches its members with its own client certificate")
	dest, err := coreosStore(t, s)
	if err != nil {
		return nil, err
	}
	policy := s.obj("backupPolicy")
	policy.drop("timeoutInSecond", "each backup step is bounded by spec.updateStrategy.progressDeadlineSeconds of the cluster")
	interval, _ := policy.num("backupIntervalInSecond")
	keep, _ := policy.num("maxBackups")
	if interval > 0 {
		return newSchedule(t, fmt.Sprintf("@every %ds", interval), dest, keep)
	}
	if keep > 0 {
		policy.note("maxBackups", "counts the backups of a periodic backup; this one is taken once")
	}
	return newBackup(t, dest)
}

// coreosStore reads the store of a backup or a restore: s3, gcs, or abs and oss, which have
// no equivalent.
func coreosStore(t *theirs, s fields) (v1alpha1.BackupDestination, error) {
	switch {
	case s.has("s3"):
		f := s.obj("s3")
		bucket, prefix := bucketPath(t, f.at("path"), f.str("path"))
		d := v1alpha1.BackupDestination{S3: &v1alpha1.S3Destination{
			Bucket: bucket, Prefix: prefix, Endpoint: f.str("endpoint"),
			ForcePathStyle: f.flag("forcePathStyle"), CredentialsSecret: f.str("awsSecret"),
		}}
		credentials(t, d, "the files credentials and config of an AWS profile, whose region goes to s3.region")
		return d, nil
	case s.has("gcs"):
		f := s.obj("gcs")
		bucket, prefix := bucketPath(t, f.at("path"), f.str("path"))
		d := v1alpha1.BackupDestination{GCS: &v1alpha1.GCSDestination{Bucket: bucket, Prefix: prefix, CredentialsSecret: f.str("gcpSecret")}}
		credentials(t, d, "credentials.json or access-token")
		return d, nil
	}
	if s.has("abs") || s.has("oss") {
		return v1alpha1.BackupDestination{}, errors.New("the store is s3 or gcs here: Azure (abs) and Alibaba Cloud (oss) have no equivalent")
	}
	return v1alpha1.BackupDestination{}, errors.New("spec.s3 or spec.gcs is required: it says where the backups go")
}

// coreosRestore: the cluster was restored from a backup when it was made; the adopted
// cluster keeps its data, so nothing of ours corresponds.
func coreosRestore(t *theirs, cs clusters) ([]any, error) {
	s := t.spec
	name := s.obj("etcdCluster").str("name")
	t.belongs(cs.named(coreosGroup, name), "spec.etcdCluster.name "+name)
	s.take("backupStorageType") // the store set says it
	for _, store := range []string{"s3", "gcs", "abs", "oss"} {
		s.drop(store, restored)
	}
	return nil, nil
}

// stringList reads a list of strings.
func stringList(v any) []string {
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, x := range list {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
