package convert

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// managedFlags are etcd flags the operator sets itself: the CRD refuses them in
// spec.options.extraArgs.
var managedFlags = []string{
	"name", "data-dir", "wal-dir", "listen-peer-urls", "listen-client-urls", "advertise-client-urls",
	"initial-advertise-peer-urls", "initial-cluster", "initial-cluster-state", "initial-cluster-token",
	"cert-file", "key-file", "trusted-ca-file", "peer-cert-file", "peer-key-file", "peer-trusted-ca-file",
	"client-cert-auth", "peer-client-cert-auth", "listen-metrics-urls",
	"force-new-cluster", "unsafe-no-fsync", "discovery", "discovery-srv", "discovery-srv-name",
	"discovery-fallback", "discovery-proxy",
}

// etcdFlags reads a map of etcd flags (without dashes): the typed options by their flag
// names, the others as extraArgs, save those the operator sets itself.
func (c *cluster) etcdFlags(f fields) {
	o := &c.out.Spec.Options
	for _, flag := range slices.Sorted(maps.Keys(f.m)) {
		v := f.str(flag)
		var err error
		switch flag {
		case "quota-backend-bytes":
			o.QuotaBackendBytes, err = int64Of(v)
		case "snapshot-count":
			o.SnapshotCount, err = int64Of(v)
		case "heartbeat-interval":
			o.HeartbeatInterval, err = int32Of(v)
		case "election-timeout":
			o.ElectionTimeout, err = int32Of(v)
		case "auto-compaction-mode":
			o.AutoCompactionMode = v1alpha1.AutoCompactionMode(v)
		case "auto-compaction-retention":
			o.AutoCompactionRetention = v
		default:
			if slices.Contains(managedFlags, flag) {
				f.note(flag, "the operator sets this etcd flag itself")
				continue
			}
			if o.ExtraArgs == nil {
				o.ExtraArgs = map[string]string{}
			}
			o.ExtraArgs[flag] = v
		}
		if err != nil {
			f.note(flag, fmt.Sprintf("%q is not a number: set spec.options by hand", v))
		}
	}
}

func int64Of(v string) (*int64, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return nil, err
	}
	return &n, nil
}

func int32Of(v string) (*int32, error) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return nil, err
	}
	m := int32(n)
	return &m, nil
}

// clientService carries the labels, annotations and type of their client Service over to ours.
func (c *cluster) clientService(meta fields, typ string) error {
	s := &v1alpha1.ClientServiceSpec{Type: corev1.ServiceType(typ)}
	err := errors.Join(meta.into("labels", &s.Labels), meta.into("annotations", &s.Annotations))
	if s.Type != "" || len(s.Labels)+len(s.Annotations) > 0 {
		c.out.Spec.ClientService = s
	}
	return err
}

// auth keeps etcd's authentication on, as the running cluster has it: the operator is then an
// etcd user by its client certificate. how says who their operator is in etcd.
func (c *cluster) auth(on bool, how string) {
	if !on {
		return
	}
	t := c.from
	if !c.out.Spec.TLS.ClientTLS() {
		t.notes = append(t.notes, "authentication is on without client TLS: etcdplan needs client TLS for it; switch their TLS on first")
		return
	}
	c.out.Spec.Auth = &v1alpha1.AuthSpec{Enabled: true}
	t.todo = append(t.todo, fmt.Sprintf("the running cluster has authentication on: the common name of the certificate in Secret %s must be a user with the root role there (%s)",
		c.out.Spec.TLS.ClientSecretName, how))
}
