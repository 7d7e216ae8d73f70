package convert

import (
	"errors"
	"fmt"
	"strings"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// aenix etcd-operator: etcd.aenix.io/v1alpha1. Its members are the Pods <cluster>-<ordinal>
// of a StatefulSet, named in the headless Service <cluster>-headless; clients reach them
// through the Service <cluster>. Both names can be set by their templates.
const (
	aenixGroup          = "etcd.aenix.io"
	aenixDefaultVersion = "3.5.12" // the tag of their default image
	aenixLabel          = "app.kubernetes.io/instance"
)

func aenixCluster(t *theirs, opts Options) (*cluster, error) {
	s := t.spec
	pod := s.obj("podTemplate")
	etcd, others := etcdContainer(pod.obj("spec"))
	image := etcd.str("image")
	repository, version := splitImage(image)
	if version == "" && opts.EtcdVersion == "" {
		version = aenixDefaultVersion
	}
	c, err := newCluster(t, opts, "replicas", 3, version)
	if err != nil {
		return nil, err
	}
	c.imageRepository(image, repository)
	headless := t.name + "-headless"
	if n := s.obj("headlessServiceTemplate").obj("metadata").str("name"); n != "" {
		headless = n
	}
	members := ordinals(t.name, c.replicas())
	c.hosts = append([]string{t.name, headless}, members...)
	security := s.obj("security")
	tls := aenixTLS(security.obj("tls"))
	c.join(memberEndpoints(c, members, headless, 2379), tls, "")
	c.auth(security.flag("enableAuth"), "their operator is etcd's root user by its client certificate's common name, root")
	c.etcdFlags(s.obj("options"))
	s.drop("bootstrap", restored)
	s.drop("podDisruptionBudgetTemplate", "the operator makes a PodDisruptionBudget of its own, which lets one voter go at a time")
	s.obj("headlessServiceTemplate").drop("metadata", "the headless Service here is the operator's own")
	for _, o := range others {
		pod.obj("spec").note("containers", fmt.Sprintf("the container %s: member Pods here run etcd alone", o))
	}
	return c, errors.Join(
		c.podMetadata(pod.obj("metadata")),
		aenixPodSpec(c, pod.obj("spec"), etcd),
		aenixService(c, s.obj("serviceTemplate")),
		aenixStorage(c, s.obj("storage")),
	)
}

// etcdContainer takes the etcd container out of their Pod template, and names the others.
func etcdContainer(spec fields) (etcd fields, others []string) {
	list, _ := spec.take("containers").([]any)
	etcd = newFields(nil, spec.at("containers[etcd]"), spec.notes)
	for _, v := range list {
		m, _ := v.(map[string]any)
		if name, _ := m["name"].(string); name == "etcd" {
			delete(m, "name")
			etcd = newFields(m, spec.at("containers[etcd]"), spec.notes)
		} else {
			others = append(others, name)
		}
	}
	return etcd, others
}

// splitImage cuts an etcd image into its repository and the release its tag names. A tag
// such as 3.5.21-0 (as some mirrors tag them) names 3.5.21.
func splitImage(image string) (repository, version string) {
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return image, ""
	}
	tag := strings.TrimPrefix(image[i+1:], "v")
	tag, _, _ = strings.Cut(tag, "-")
	return image[:i], tag
}

// imageRepository carries their image's repository over when its tags are v<version>, as
// the operator's are.
func (c *cluster) imageRepository(image, repository string) {
	if strings.HasSuffix(image, ":v"+c.out.Spec.Version) {
		c.out.Spec.Image = repository
	} else if image != "" {
		c.from.notes = append(c.from.notes, fmt.Sprintf("the image %s: spec.image names a repository whose tags are v<version>, as etcd's own are", image))
	}
}

func aenixPodSpec(c *cluster, spec, etcd fields) error {
	spec.drop("securityContext", "member Pods here run as non-root with the operator's own security context")
	spec.drop("terminationGracePeriodSeconds", "the operator sets how long a member has to stop")
	spec.drop("schedulerName", "member Pods here use the default scheduler")
	spec.drop("runtimeClassName", "member Pods here use the default runtime class")
	spec.drop("volumes", "member Pods here mount only the operator's volumes")
	etcd.drop("imagePullPolicy", "the operator sets the pull policy")
	err := errors.Join(c.scheduling(spec, aenixLabel), etcd.into("resources", &c.out.Spec.Resources))
	etcd.rest()
	return err
}

// aenixStorage: a volume claim template, or emptyDir (theirs when neither is set).
func aenixStorage(c *cluster, s fields) error {
	empty := s.obj("emptyDir")
	if s.has("emptyDir") || !s.has("volumeClaimTemplate") {
		if empty.str("medium") == "Memory" {
			c.out.Spec.Storage.Medium = v1alpha1.StorageMediumMemory
		} else {
			c.from.notes = append(c.from.notes, "spec.storage.emptyDir: their members keep data in emptyDir, which takes the place of any volumeClaimTemplate; ours keep it on volume claims of spec.storage.size")
		}
		empty.drop("sizeLimit", "the size of a memory-backed member is its Pod's memory limit")
		s.take("emptyDir")
		if s.has("volumeClaimTemplate") {
			s.drop("volumeClaimTemplate", "emptyDir takes its place in their operator")
		}
		return nil
	}
	vct := s.obj("volumeClaimTemplate")
	vct.drop("metadata", "member claims here carry the operator's labels")
	return c.claim(vct.obj("spec"))
}

// aenixTLS reads spec.security.tls: Secrets of kubernetes.io/tls shape, with their CAs in
// Secrets of their own.
func aenixTLS(f fields) sourceTLS {
	server, peer, client := f.str("serverSecret"), f.str("peerSecret"), f.str("clientSecret")
	tls := sourceTLS{
		client: server != "",
		peer:   peer != "",
		ca:     "ca.crt of Secret " + f.str("serverTrustedCASecret"),
		peerCA: "ca.crt of Secret " + f.str("peerTrustedCASecret"),
	}
	if client != "" {
		tls.cert = "tls.crt and tls.key of Secret " + client
	}
	if ca := f.str("clientTrustedCASecret"); ca != "" {
		f.note("clientTrustedCASecret", "members here trust the client CAs in ca.crt of spec.tls.serverSecretName's Secret: add ca.crt of Secret "+ca+" to it")
	}
	return tls
}

func aenixBackup(t *theirs, cs clusters) ([]any, error) {
	if !aenixBackupOf(t, cs) {
		return nil, nil
	}
	return newBackup(t, location(t, t.spec.obj("destination")))
}

func aenixSchedule(t *theirs, cs clusters) ([]any, error) {
	if !aenixBackupOf(t, cs) {
		return nil, nil
	}
	s := t.spec
	for _, limit := range []string{"successfulJobsHistoryLimit", "failedJobsHistoryLimit"} {
		s.drop(limit, "counts their CronJob's finished Jobs, not backups: spec.retention (keepLast, maxAge) prunes backups here")
	}
	return newSchedule(t, s.str("schedule"), location(t, s.obj("destination")), 0)
}

// aenixBackupOf ties a backup or schedule to its cluster (spec.clusterRef).
func aenixBackupOf(t *theirs, cs clusters) bool {
	name := t.spec.obj("clusterRef").str("name")
	t.belongs(cs.named(aenixGroup, name), "spec.clusterRef.name "+name)
	return t.of != nil
}

// aenixService reads the template of their client Service.
func aenixService(c *cluster, f fields) error {
	meta, spec := f.obj("metadata"), f.obj("spec")
	meta.drop("name", fmt.Sprintf("the client Service here is %s-client", c.out.Name))
	return c.clientService(meta, spec.str("type"))
}
