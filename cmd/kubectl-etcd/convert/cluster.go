package convert

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// replicas is the number of members of the converted cluster.
func (c *cluster) replicas() int64 { return int64(c.out.Spec.Replicas) }

// nameFormat is the CRD's rule for an EtcdCluster's name, with its bound.
var nameFormat = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

const maxName = 50

// versionFormat reads an etcd release; a leading v is allowed, as some operators allow it.
var versionFormat = regexp.MustCompile(`^v?3\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// newCluster starts our EtcdCluster for t: its name, namespace, replicas and version. The
// spec's field sizeKey counts the members; fallback is their operator's default when it is
// not set (0: it is required).
func newCluster(t *theirs, opts Options, sizeKey string, fallback int64, version string) (*cluster, error) {
	replicas, err := memberCount(t.spec, sizeKey, fallback)
	if err != nil {
		return nil, err
	}
	name, err := clusterName(t, opts)
	if err != nil {
		return nil, err
	}
	v, err := etcdVersion(version, opts)
	if err != nil {
		return nil, err
	}
	ns := t.namespace
	if ns == "" {
		ns = "default"
		t.todo = append(t.todo, "their manifest names no namespace: the endpoints below assume default; change them if the cluster runs elsewhere")
	}
	out := &v1alpha1.EtcdCluster{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "EtcdCluster"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: t.namespace},
		Spec:       v1alpha1.EtcdClusterSpec{Replicas: int32(replicas), Version: v},
	}
	return &cluster{from: t, out: out, ns: ns}, nil
}

// maxReplicas is the CRD's bound on spec.replicas.
const maxReplicas = 9

func memberCount(f fields, key string, fallback int64) (int64, error) {
	n, ok := f.num(key)
	switch {
	case !ok && fallback == 0:
		return 0, fmt.Errorf("%s is required: it says how many members the running cluster has", f.at(key))
	case !ok:
		return fallback, nil
	case n < 1:
		return 0, fmt.Errorf("%s is %d: a running cluster to adopt has at least one member", f.at(key), n)
	case n > maxReplicas:
		return 0, fmt.Errorf("%s is %d: etcdplan runs at most %d voters; scale the cluster down with its own operator first", f.at(key), n, maxReplicas)
	}
	return n, nil
}

// clusterName is --name, or theirs with DefaultSuffix: a name the CRD admits, other than
// theirs.
func clusterName(t *theirs, opts Options) (string, error) {
	name := opts.Name
	if name == "" {
		name = t.name + DefaultSuffix
	}
	switch {
	case name == t.name:
		return "", fmt.Errorf("the EtcdCluster's name %q is theirs: its Services and members would take the names of the running cluster's; choose another with --name", name)
	case len(name) > maxName || !nameFormat.MatchString(name) || strings.HasSuffix(name, "-client"):
		return "", fmt.Errorf("the EtcdCluster's name %q must be a DNS label of at most %d characters that starts with a letter and does not end in -client: choose one with --name", name, maxName)
	}
	return name, nil
}

// etcdVersion checks the release the source runs: etcdplan adopts etcd 3.5 and newer, and
// runs the members it adds on the same release.
func etcdVersion(v string, opts Options) (string, error) {
	if v == "" {
		v = opts.EtcdVersion
	}
	if v == "" {
		return "", errors.New("the manifest does not say which etcd release the cluster runs: " +
			"pass it with --etcd-version (etcdctl endpoint status shows it)")
	}
	m := versionFormat.FindStringSubmatch(v)
	if m == nil {
		return "", fmt.Errorf("etcd version %q is not a 3.x.y release", v)
	}
	if minor, _ := strconv.Atoi(m[1]); minor < 5 {
		return "", fmt.Errorf("etcd %s: etcdplan adopts clusters on etcd 3.5 or newer; upgrade the cluster with its own operator first, one minor release at a time", v)
	}
	return strings.TrimPrefix(v, "v"), nil
}

// sourceTLS is what the source secures, and where its certificates are.
type sourceTLS struct {
	client, peer bool
	// ca says where the CA that signed the source's server certificates is, cert where
	// a client certificate it trusts is ("" when it asks clients for none).
	ca, cert string
	// peerCA says where the CA the source's members trust for peers is.
	peerCA string
}

// join aims spec.bootstrap.join at the source's client endpoints (host:port each).
func (c *cluster) join(endpoints []string, tls sourceTLS, credentials string) {
	scheme := "http://"
	if tls.client {
		scheme = "https://"
	}
	j := &v1alpha1.JoinSpec{CredentialsSecretName: credentials}
	for _, e := range endpoints {
		j.Endpoints = append(j.Endpoints, scheme+e)
	}
	t := c.from
	if tls.client {
		j.TLSSecretName = c.out.Name + "-source-tls"
		what := "ca.crt from " + tls.ca
		if tls.cert != "" {
			what += "; tls.crt and tls.key from " + tls.cert
		}
		t.todo = append(t.todo, fmt.Sprintf("Secret %s: for the operator to reach the running cluster: %s", j.TLSSecretName, what))
	}
	if credentials != "" {
		t.todo = append(t.todo, fmt.Sprintf("Secret %s: keys username and password of a user with the root role", credentials))
	}
	c.out.Spec.Bootstrap = &v1alpha1.BootstrapSpec{Join: j}
	c.secure(tls)
}

// secure gives our members TLS on the sides the source has it: they join its membership,
// so its members must trust our peer certificates, and its clients ours.
func (c *cluster) secure(tls sourceTLS) {
	if !tls.client && !tls.peer {
		return
	}
	name, t := c.out.Name, c.from
	s := &v1alpha1.TLSSpec{Mode: v1alpha1.TLSDisabled}
	if tls.client {
		s.Client = &v1alpha1.TLSSideSpec{Mode: v1alpha1.TLSProvided}
		s.ServerSecretName, s.ClientSecretName = name+"-server-tls", name+"-client-tls"
		t.todo = append(t.todo,
			fmt.Sprintf("Secret %s: tls.crt and tls.key our members serve clients with (server and client usage), naming %s-client.%s.svc, "+
				"the names your clients use, and localhost, issued by the CA the source's clients trust (%s); ca.crt that CA and the CA of "+
				"the client certificates the members are to accept", s.ServerSecretName, name, c.ns, tls.ca),
			fmt.Sprintf("Secret %s: the operator's client certificate (tls.crt, tls.key, ca.crt), issued by a CA in the ca.crt above", s.ClientSecretName))
	}
	if tls.peer {
		members := fmt.Sprintf("*.%s.%s.svc", name, c.ns)
		s.Peer = &v1alpha1.TLSSideSpec{Mode: v1alpha1.TLSProvided}
		s.PeerSecretName = name + "-peer-tls"
		t.todo = append(t.todo, fmt.Sprintf("Secret %s: tls.crt and tls.key our members talk to peers with (server and client usage), naming %s "+
			"and %s.<cluster domain>, issued by the CA the source's members trust for peers (%s), and ca.crt that CA: the source's "+
			"members check our certificate against the address we dial from, and ours check theirs", s.PeerSecretName, members, members, tls.peerCA))
	}
	if tls.client && tls.peer {
		s.Mode, s.Client, s.Peer = v1alpha1.TLSProvided, nil, nil
	}
	c.out.Spec.TLS = s
}

// clusters are the converted clusters of the input.
type clusters []*cluster

// named finds the cluster of the group with their name.
func (cs clusters) named(group, name string) *cluster {
	for _, c := range cs {
		if c.from.group() == group && c.from.name == name {
			return c
		}
	}
	return nil
}

// reaching finds the cluster of the group one of the URLs points at, by the first label
// of its host: one of the names the source answers at.
func (cs clusters) reaching(group string, urls []string) *cluster {
	for _, u := range urls {
		label := firstLabel(u)
		for _, c := range cs {
			if c.from.group() == group && slices.Contains(c.hosts, label) {
				return c
			}
		}
	}
	return nil
}

// belongs ties t to c, or notes that its cluster is not in the input.
func (t *theirs) belongs(c *cluster, what string) {
	if c == nil {
		t.notes = append(t.notes, what+" is not a cluster of the input: convert it with its cluster")
		return
	}
	t.of = c
}

// scheduling carries over the Pod settings that have the same name and meaning in our
// spec, from whichever of them f has. Their affinity selects their Pods by label: theirLabel
// names the label, to be changed for ours.
func (c *cluster) scheduling(f fields, theirLabel string) error {
	s := &c.out.Spec
	for _, key := range []string{"affinity", "topologySpreadConstraints"} {
		if f.has(key) {
			c.from.todo = append(c.from.todo, fmt.Sprintf("spec.%s is theirs as written: where it selects their Pods (by labels such as %s), select ours: %s=%s",
				key, theirLabel, v1alpha1.LabelCluster, c.out.Name))
		}
	}
	return errors.Join(
		f.into("resources", &s.Resources),
		f.into("affinity", &s.Affinity),
		f.into("nodeSelector", &s.NodeSelector),
		f.into("tolerations", &s.Tolerations),
		f.into("priorityClassName", &s.PriorityClassName),
		f.into("imagePullSecrets", &s.ImagePullSecrets),
		f.into("topologySpreadConstraints", &s.TopologySpreadConstraints),
	)
}

// podMetadata carries labels and annotations over to every member Pod.
func (c *cluster) podMetadata(f fields) error {
	m := &v1alpha1.EmbeddedMetadata{}
	err := errors.Join(f.into("labels", &m.Labels), f.into("annotations", &m.Annotations))
	if len(m.Labels)+len(m.Annotations) > 0 {
		c.out.Spec.PodMetadata = m
	}
	return err
}

// hostPort joins a host and a port.
func hostPort(host string, port int64) string { return host + ":" + strconv.FormatInt(port, 10) }

// svc is the DNS name of a Service of the source's namespace.
func (c *cluster) svc(name string) string { return name + "." + c.ns + ".svc" }

// claim reads a PersistentVolumeClaimSpec: its size and class. Access modes and the rest
// are the operator's.
func (c *cluster) claim(pvc fields) error {
	c.out.Spec.Storage.StorageClassName = pvc.str("storageClassName")
	if modes := stringList(pvc.m["accessModes"]); len(modes) == 1 && modes[0] == "ReadWriteOnce" {
		pvc.take("accessModes") // as ours
	}
	pvc.drop("accessModes", "member claims here are ReadWriteOnce")
	pvc.drop("volumeMode", "member claims here are Filesystem volumes")
	requests := pvc.obj("resources").obj("requests")
	return c.size(requests.at("storage"), requests.str("storage"))
}

// size sets the size of each member's volume, when q says one.
func (c *cluster) size(where, q string) error {
	if q == "" {
		return nil
	}
	v, err := resource.ParseQuantity(q)
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	c.out.Spec.Storage.Size = v
	return nil
}
