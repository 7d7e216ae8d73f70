// Package convert reads the manifests of other etcd operators and writes the etcdplan
// objects that take over their running clusters: an EtcdCluster whose spec.bootstrap.join
// aims at the running cluster, the backup objects that correspond to theirs, and a note for
// every field of theirs that has no equivalent. One file per operator says how its fields map.
package convert

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	sigsjson "sigs.k8s.io/json"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// Doc is one object of the input as JSON, with where it came from for messages.
type Doc struct {
	Source string
	Data   []byte
}

// Options tune the conversion.
type Options struct {
	// Name is the EtcdCluster's name when the input holds one cluster; by default it is
	// theirs with DefaultSuffix, so that our Services and members do not take their names.
	Name string
	// EtcdVersion is the etcd release the cluster runs, for manifests that do not say.
	EtcdVersion string
}

// DefaultSuffix ends the name of a converted cluster: its Services and member names must
// differ from those of the running cluster it joins.
const DefaultSuffix = "-etcdplan"

// Object is one object of the output with the comments printed above it.
type Object struct {
	Comments []string
	Value    any
}

// Result is the conversion of a whole input: the objects to print, and the documents that
// were skipped, to report on stderr.
type Result struct {
	Objects  []Object
	Warnings []string
}

// theirs is one object of another operator as read from the input.
type theirs struct {
	source           string
	apiVersion, kind string
	name, namespace  string
	spec             fields
	todo, notes      []string
	// of is the converted cluster this object belongs to, once known.
	of *cluster
}

func (t *theirs) String() string {
	return fmt.Sprintf("%s: %s %s", t.source, t.kind, t.id())
}

func (t *theirs) id() string {
	if t.namespace == "" {
		return t.name
	}
	return t.namespace + "/" + t.name
}

// group is the API group of their apiVersion.
func (t *theirs) group() string {
	g, _, _ := strings.Cut(t.apiVersion, "/")
	return g
}

// cluster is a converted cluster and the names its source answers at, which their backup
// objects use to name it.
type cluster struct {
	from  *theirs
	out   *v1alpha1.EtcdCluster
	hosts []string // first DNS labels of the source's client endpoints
	// ns is the namespace the source runs in, for its DNS names.
	ns string
	// extra are objects of ours that come from the cluster's own manifest (its backups).
	extra []any
}

// defaultSize is the CRD's default size of a member's volume.
var defaultSize = resource.MustParse("1Gi")

// clusterConverter converts one of their cluster objects.
type clusterConverter func(t *theirs, opts Options) (*cluster, error)

// objectConverter converts one of their other objects (backups, restores): it returns our
// objects, or none with notes on the cluster it belongs to.
type objectConverter func(t *theirs, cs clusters) ([]any, error)

// clusterKinds and objectKinds are the kinds convert reads, by "group/Kind".
var (
	clusterKinds = map[string]clusterConverter{
		coreosGroup + "/EtcdCluster":     coreosCluster,
		improbableGroup + "/EtcdCluster": improbableCluster,
		aenixGroup + "/EtcdCluster":      aenixCluster,
		cozystackGroup + "/EtcdCluster":  cozystackCluster,
		druidGroup + "/Etcd":             druidEtcd,
	}
	objectKinds = map[string]objectConverter{
		coreosGroup + "/EtcdBackup":             coreosBackup,
		coreosGroup + "/EtcdRestore":            coreosRestore,
		improbableGroup + "/EtcdBackup":         improbableBackup,
		improbableGroup + "/EtcdBackupSchedule": improbableSchedule,
		improbableGroup + "/EtcdRestore":        improbableRestore,
		aenixGroup + "/EtcdBackup":              aenixBackup,
		aenixGroup + "/EtcdBackupSchedule":      aenixSchedule,
		cozystackGroup + "/EtcdSnapshot":        cozystackSnapshot,
	}
)

// Convert converts every object of the input it knows. Clusters come first in the output,
// then the objects that belong to them, each in input order.
func Convert(docs []Doc, opts Options) (*Result, error) {
	res := &Result{}
	clusterDocs, otherDocs, err := sortKinds(docs, res)
	if err != nil {
		return nil, err
	}
	if opts.Name != "" && len(clusterDocs) != 1 {
		return nil, fmt.Errorf("--name names one cluster, and the input has %d", len(clusterDocs))
	}
	cs, err := convertClusters(clusterDocs, opts)
	if err != nil {
		return nil, err
	}
	others, err := convertOthers(otherDocs, cs, res)
	if err != nil {
		return nil, err
	}
	for _, c := range cs {
		res.Objects = append(res.Objects, Object{Comments: c.from.comments(), Value: c.out})
	}
	for _, c := range cs {
		for _, o := range c.extra {
			res.Objects = append(res.Objects, Object{Comments: []string{fmt.Sprintf("From spec.backup of %s %s: see the comments of EtcdCluster %s.", c.from.kind, c.from.id(), c.out.Name)}, Value: o})
		}
	}
	res.Objects = append(res.Objects, others...)
	if len(res.Objects) == 0 {
		return nil, fmt.Errorf("no object of a kind convert reads in the input (%s)", known())
	}
	return res, nil
}

// sortKinds reads the documents into their clusters and their other objects; the kinds it
// does not read are warned about.
func sortKinds(docs []Doc, res *Result) (clusterDocs, otherDocs []*theirs, err error) {
	for _, d := range docs {
		t, err := read(d)
		if err != nil {
			return nil, nil, err
		}
		key := t.group() + "/" + t.kind
		switch {
		case clusterKinds[key] != nil:
			clusterDocs = append(clusterDocs, t)
		case objectKinds[key] != nil:
			otherDocs = append(otherDocs, t)
		default:
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s (%s): not a kind convert reads; skipped", t, t.apiVersion))
		}
	}
	return clusterDocs, otherDocs, nil
}

// convertOthers converts the objects that belong to clusters. One whose cluster is not in
// the input is warned about; the notes of one that gives nothing go to its cluster.
func convertOthers(ts []*theirs, cs clusters, res *Result) ([]Object, error) {
	var out []Object
	for _, t := range ts {
		objs, err := objectKinds[t.group()+"/"+t.kind](t, cs)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t, err)
		}
		if t.of == nil {
			res.Warnings = append(res.Warnings, fmt.Sprintf("%s: %s; skipped", t, strings.Join(t.notes, "; ")))
			continue
		}
		t.spec.rest()
		for _, o := range objs {
			out = append(out, Object{Comments: t.comments(), Value: o})
		}
		if len(objs) == 0 {
			t.of.from.attach(t)
		}
	}
	return out, nil
}

func convertClusters(ts []*theirs, opts Options) (clusters, error) {
	var cs clusters
	for _, t := range ts {
		c, err := clusterKinds[t.group()+"/"+t.kind](t, opts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t, err)
		}
		t.spec.rest()
		if c.out.Spec.Storage.Size.IsZero() {
			c.out.Spec.Storage.Size = defaultSize // the CRD's default, written out
		}
		cs = append(cs, c)
	}
	return cs, nil
}

// known lists the kinds convert reads, for an error message.
func known() string {
	return "EtcdCluster of " + coreosGroup + ", " + improbableGroup + ", " + aenixGroup + ", " +
		cozystackGroup + ", Etcd of " + druidGroup + ", and their backup kinds"
}

// read decodes one document and takes its identity.
func read(d Doc) (*theirs, error) {
	var obj map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(d.Data, &obj); err != nil {
		return nil, fmt.Errorf("%s: not a Kubernetes object: %w", d.Source, err)
	}
	t := &theirs{source: d.Source}
	top := newFields(obj, "", &t.notes)
	t.apiVersion, t.kind = top.str("apiVersion"), top.str("kind")
	meta := top.obj("metadata")
	t.name, t.namespace = meta.str("name"), meta.str("namespace")
	if t.name == "" {
		t.name = "<no name>"
	}
	t.spec = top.obj("spec")
	return t, nil
}

// comments are what is printed above the object converted from t.
func (t *theirs) comments() []string {
	out := []string{fmt.Sprintf("Converted from %s %s %s (%s).", t.apiVersion, t.kind, t.id(), t.source)}
	if len(t.todo) > 0 {
		out = append(out, "Before applying:")
		out = append(out, bullets(t.todo)...)
	}
	if len(t.notes) > 0 {
		out = append(out, "Fields of theirs without an equivalent here:")
		out = append(out, bullets(t.notes)...)
	}
	return out
}

// attach adds the notes of an object that gives nothing of ours (a restore) to those of
// its cluster.
func (t *theirs) attach(o *theirs) {
	for _, n := range o.notes {
		t.notes = append(t.notes, o.kind+" "+o.name+": "+n)
	}
}

func bullets(lines []string) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = "- " + l
	}
	return out
}
