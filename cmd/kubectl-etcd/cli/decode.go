package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	sigsjson "sigs.k8s.io/json"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/schedule"
)

// decodeIfCluster decodes the document when it is an EtcdCluster, as the API server would
// admit it: unknown fields are errors, the CRD's defaults are applied and what the CRD
// refuses cheaply is refused. Other kinds give nil.
func decodeIfCluster(d document) (*v1alpha1.EtcdCluster, error) {
	var obj map[string]any
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(d.data, &obj); err != nil {
		return nil, fmt.Errorf("%s: not a Kubernetes object: %w", d.source, err)
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if kind != "EtcdCluster" || groupOf(apiVersion) != v1alpha1.GroupVersion.Group {
		return nil, nil
	}
	name := nameOf(obj)
	if apiVersion != v1alpha1.GroupVersion.String() {
		return nil, fmt.Errorf("%s: EtcdCluster %s: apiVersion %s is not supported; use %s", d.source, name, apiVersion, v1alpha1.GroupVersion)
	}
	applyDefaults(obj)
	c, err := decodeStrict(obj)
	if err == nil {
		err = validate(c)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: EtcdCluster %s: %w", d.source, name, err)
	}
	return c, nil
}

// decodeStrict decodes the object into an EtcdCluster; every unknown or duplicate field
// is named with its path ("unknown field \"spec.replica\"").
func decodeStrict(obj map[string]any) (*v1alpha1.EtcdCluster, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	c := &v1alpha1.EtcdCluster{}
	strict, err := sigsjson.UnmarshalStrict(data, c, sigsjson.DisallowUnknownFields)
	if err != nil {
		return nil, err
	}
	return c, errors.Join(strict...)
}

func nameOf(obj map[string]any) string {
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	ns, _ := meta["namespace"].(string)
	switch {
	case name == "":
		return "<no name>"
	case ns != "":
		return ns + "/" + name
	}
	return name
}

// versionFormat and versionTooOld are the CRD's rules for spec.version, and nameFormat its
// rule for metadata.name; TestValidationMatchesCRD keeps them equal.
var (
	versionFormat = regexp.MustCompile(`^3\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)
	versionTooOld = regexp.MustCompile(`^3\.[0-4]\.`)
	nameFormat    = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)
)

// maxNameLength is the CRD's bound on metadata.name.
const maxNameLength = 50

// Bounds of spec.replicas in the CRD.
const minReplicas, maxReplicas = 0, 9

// validate refuses what the CRD refuses and is cheap to check here, with the CRD's words.
// The API server remains the judge; this catches mistakes before a pull request merges.
func validate(c *v1alpha1.EtcdCluster) error {
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	s := c.Spec
	switch {
	case c.Name == "":
		add("metadata.name is required")
	case len(c.Name) > maxNameLength || !nameFormat.MatchString(c.Name):
		add("metadata.name %q must be a DNS label of at most 50 characters that starts with a letter (lowercase letters, digits and '-'): it names Services and member Pods", c.Name)
	case strings.HasSuffix(c.Name, "-client"):
		add("metadata.name %q cannot end in -client: the client Service of the cluster named without it would take that name", c.Name)
	}
	switch {
	case s.Version == "":
		add("spec.version is required")
	case !versionFormat.MatchString(s.Version):
		add("spec.version %q: version must be an etcd 3.x.y release such as 3.6.16, without a leading v", s.Version)
	case versionTooOld.MatchString(s.Version):
		add("spec.version %q: version must be 3.5.0 or newer: the operator relies on etcd 3.5's learners, linearizable member list and health checks that leave alarms out", s.Version)
	}
	if len(s.AuthUsers()) > 0 && !s.TLS.ClientMode().OwnCA() {
		add("spec.auth.users needs client TLS from the cluster's own CA (tls.mode or tls.client.mode Auto or CertManager): it issues each user's certificate")
	}
	if s.Auth != nil && s.Auth.Enabled && s.TLS.ClientMode() == v1alpha1.TLSDisabled {
		add("spec.auth.enabled needs client TLS (tls.mode or tls.client.mode other than Disabled): the operator and clients are etcd users by their client certificates' common names")
	}
	if why := schedule.DefragInvalid(&s); why != "" {
		add("%s", why)
	}
	if d := s.Maintenance; d != nil && d.Defrag != nil && d.Defrag.Schedule == "" && d.Defrag.ThresholdPercent == 0 {
		add("spec.maintenance.defrag needs a schedule, a thresholdPercent or both")
	}
	if s.Replicas < minReplicas || s.Replicas > maxReplicas {
		add("spec.replicas %d: must be between %d and %d", s.Replicas, minReplicas, maxReplicas)
	}
	if s.Replicas == 0 && s.Storage.Medium == v1alpha1.StorageMediumMemory {
		add("spec: replicas 0 parks a cluster on its volumes, which storage.medium Memory cannot keep: use a disk-backed medium or keep at least one replica")
	}
	if len(errs) == 0 {
		return nil
	}
	return errors.New(strings.Join(errs, "; "))
}
