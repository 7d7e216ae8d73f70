package convert

import (
	"errors"
	"fmt"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// improbable-eng etcd-cluster-operator: etcd.improbable.io/v1alpha1. Its members are the
// EtcdPeers <cluster>-<ordinal>, each a Pod of a ReplicaSet, named in the headless Service
// <cluster>; they serve plain HTTP on port 2379.
const (
	improbableGroup = "etcd.improbable.io"
	improbableLabel = "etcd.improbable.io/cluster-name"
)

func improbableCluster(t *theirs, opts Options) (*cluster, error) {
	s := t.spec
	c, err := newCluster(t, opts, "replicas", 0, s.str("version"))
	if err != nil {
		return nil, err
	}
	c.hosts = append([]string{t.name}, ordinals(t.name, c.replicas())...)
	c.join(memberEndpoints(c, ordinals(t.name, c.replicas()), t.name, 2379), sourceTLS{}, "")
	pod := s.obj("podTemplate")
	err = errors.Join(c.podMetadata(pod.obj("metadata")), c.scheduling(pod, improbableLabel))
	if s.has("storage") {
		return c, errors.Join(err, c.claim(s.obj("storage").obj("volumeClaimTemplate")))
	}
	return c, err
}

// ordinals names the members of a cluster whose members are <cluster>-<ordinal>.
func ordinals(name string, replicas int64) []string {
	out := make([]string, replicas)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", name, i)
	}
	return out
}

// memberEndpoints are the client endpoints of members named in a headless Service, as many
// as spec.bootstrap.join takes.
func memberEndpoints(c *cluster, members []string, headless string, port int64) []string {
	const most = 9
	if len(members) > most {
		c.from.todo = append(c.from.todo, fmt.Sprintf("spec.bootstrap.join lists %d of the %d members: the others are read from its member list", most, len(members)))
		members = members[:most]
	}
	out := make([]string, len(members))
	for i, m := range members {
		out[i] = hostPort(m+"."+c.svc(headless), port)
	}
	return out
}

func improbableBackup(t *theirs, cs clusters) ([]any, error) {
	dest, err := improbableSource(t, cs, t.spec)
	if t.of == nil || err != nil {
		return nil, err
	}
	return newBackup(t, dest)
}

func improbableSchedule(t *theirs, cs clusters) ([]any, error) {
	schedule := t.spec.str("schedule")
	dest, err := improbableSource(t, cs, t.spec.obj("backupTemplate"))
	if t.of == nil || err != nil {
		return nil, err
	}
	return newSchedule(t, schedule, dest, 0)
}

// improbableSource reads a backup's spec: the member it reads (source.clusterURL), which
// names the cluster, and where it goes (destination.objectURLTemplate, or objectURL as
// their samples write it). Their backups use the ambient credentials of their proxy.
func improbableSource(t *theirs, cs clusters, s fields) (dest v1alpha1.BackupDestination, err error) {
	url := s.obj("source").str("clusterURL")
	t.belongs(cs.reaching(improbableGroup, []string{url}), "spec.source.clusterURL "+url)
	if t.of == nil {
		return dest, nil
	}
	d := s.obj("destination")
	key := "objectURLTemplate"
	if !d.has(key) {
		key = "objectURL"
	}
	t.todo = append(t.todo, "their backups use the ambient credentials of their backup agent; ours use the operator's unless the destination names a credentialsSecret")
	return objectURL(t, d.at(key), d.str(key))
}

// improbableRestore: the cluster was restored from a backup when it was made; the adopted
// cluster keeps its data, so nothing of ours corresponds.
func improbableRestore(t *theirs, cs clusters) ([]any, error) {
	tmpl := t.spec.obj("clusterTemplate")
	name := tmpl.str("clusterName")
	t.belongs(cs.named(improbableGroup, name), "spec.clusterTemplate.clusterName "+name)
	tmpl.drop("spec", "the spec the cluster was first made with: its EtcdCluster says what it is now")
	t.spec.drop("source", restored)
	return nil, nil
}
