package convert

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// Gardener etcd-druid: druid.gardener.cloud/v1alpha1 Etcd. Its members are the Pods
// <etcd>-<ordinal> of a StatefulSet, named in the Service <etcd>-peer; clients reach them
// through the Service <etcd>-client. Its image is etcd-wrapper, whose tag is not etcd's
// release: the release comes from --etcd-version.
const (
	druidGroup = "druid.gardener.cloud"
	druidLabel = "app.kubernetes.io/part-of"
)

func druidEtcd(t *theirs, opts Options) (*cluster, error) {
	s := t.spec
	c, err := newCluster(t, opts, "replicas", 0, "")
	if err != nil {
		return nil, err
	}
	e := s.obj("etcd")
	port, ok := e.num("clientPort")
	if !ok {
		port = 2379
	}
	client := t.name + "-client"
	c.hosts = append([]string{client}, ordinals(t.name, c.replicas())...)
	c.join([]string{hostPort(c.svc(client), port)}, druidTLS(e), "")
	druidSelected(s)
	druidDrops(s, e)
	scheduling := s.obj("schedulingConstraints")
	c.out.Spec.Storage.StorageClassName = s.str("storageClass")
	return c, errors.Join(
		druidOptions(c, e),
		c.podMetadata(s),
		c.scheduling(scheduling, druidLabel),
		c.scheduling(s, druidLabel),
		e.into("resources", &c.out.Spec.Resources),
		c.clientService(e.obj("clientService"), ""),
		c.size(s.at("storageCapacity"), s.str("storageCapacity")),
		druidBackup(c, s.obj("backup")),
	)
}

// druidTLS reads spec.etcd.clientUrlTls and peerUrlTls: a CA Secret (key dataKey, ca.crt
// unless set), a server Secret and, for clients, a client Secret.
func druidTLS(e fields) sourceTLS {
	client, peer := e.obj("clientUrlTls"), e.obj("peerUrlTls")
	tls := sourceTLS{client: e.has("clientUrlTls"), peer: e.has("peerUrlTls"), ca: druidCA(client), peerCA: druidCA(peer)}
	if name := client.obj("clientTLSSecretRef").str("name"); name != "" {
		tls.cert = "tls.crt and tls.key of Secret " + name
	}
	client.obj("serverTLSSecretRef").take("name")
	client.obj("clientTLSSecretRef").take("namespace")
	peer.obj("serverTLSSecretRef").take("name")
	peer.drop("skipClientSANVerification", "our peer certificates name our members, so the source can check them: skipping the check is not needed")
	return tls
}

func druidCA(f fields) string {
	ref := f.obj("tlsCASecretRef")
	key := ref.str("dataKey")
	if key == "" {
		key = "ca.crt"
	}
	return key + " of Secret " + ref.str("name")
}

func druidOptions(c *cluster, e fields) error {
	o := &c.out.Spec.Options
	if q := e.str("quota"); q != "" {
		v, err := resource.ParseQuantity(q)
		if err != nil {
			return fmt.Errorf("%s: %w", e.at("quota"), err)
		}
		n := v.Value()
		o.QuotaBackendBytes = &n
	}
	if n, ok := e.num("snapshotCount"); ok {
		o.SnapshotCount = &n
	}
	if f := e.str("backendBboltFreelistType"); f != "" {
		o.ExtraArgs = map[string]string{"backend-bbolt-freelist-type": f}
	}
	if d := e.str("defragmentationSchedule"); d != "" {
		c.out.Spec.Maintenance = &v1alpha1.MaintenanceSpec{Defrag: &v1alpha1.DefragSpec{Schedule: d}}
	}
	shared := c.from.spec.obj("sharedConfig")
	o.AutoCompactionMode = v1alpha1.AutoCompactionMode(shared.str("autoCompactionMode"))
	o.AutoCompactionRetention = shared.str("autoCompactionRetention")
	return nil
}

// druidDrops notes what of an Etcd has no equivalent.
func druidDrops(s, e fields) {
	s.drop("selector", fmt.Sprintf("the operator selects its members by %s", v1alpha1.LabelCluster))
	s.drop("memberNamePrefix", "members here are named <cluster>-<ordinal>")
	s.drop("volumeClaimTemplate", "member claims here are named by the operator")
	s.drop("runAsRoot", "member Pods here run as non-root")
	e.drop("serverPort", "members here talk to peers on port 2380")
	e.drop("wrapperPort", "member Pods here run etcd itself, with no wrapper")
	e.drop("image", "the etcd-wrapper image: members here run etcd's own image of spec.version (spec.image names another repository)")
	e.drop("metrics", "members here serve etcd's metrics at their basic level")
	e.drop("enableGRPCGateway", "etcd's gRPC gateway is on, as etcd has it by default")
	e.drop("authSecretRef", "used by their backup sidecar: give the operator a user with spec.bootstrap.join.credentialsSecretName when authentication is on")
	e.drop("etcdDefragTimeout", "each defragmentation step is bounded by spec.updateStrategy.progressDeadlineSeconds")
	e.drop("heartbeatDuration", "the lease heartbeat of their member leases: members here have no leases")
	e.drop("additionalAdvertisePeerURLs", "members here advertise the peer URL of their own name alone")
	e.drop("bootstrapWithExistingCluster", "their own join of a running cluster: the join here is of this cluster, which holds those members now")
	e.obj("clientService").drop("trafficDistribution", "no equivalent on the client Service here")
}

// druidBackup reads spec.backup: full snapshots on a schedule to a store are an
// EtcdBackupSchedule here; the rest is their backup sidecar's.
func druidBackup(c *cluster, b fields) error {
	drops := map[string]string{
		"port": sidecar, "tls": sidecar, "image": sidecar, "resources": sidecar, "leaderElection": sidecar, "enableProfiling": sidecar,
		"snapshotCompaction":           "no delta snapshots here, so nothing to compact",
		"deltaSnapshotPeriod":          deltas,
		"deltaSnapshotMemoryLimit":     deltas,
		"deltaSnapshotRetentionPeriod": deltas,
		"compression":                  "snapshots are stored as etcd writes them",
		"garbageCollectionPeriod":      "retention applies after each backup here",
		"etcdSnapshotTimeout":          "each backup is bounded by the cluster's spec.updateStrategy.progressDeadlineSeconds",
	}
	for _, key := range slices.Sorted(maps.Keys(drops)) {
		b.drop(key, drops[key])
	}
	schedule := b.str("fullSnapshotSchedule")
	keep := druidRetention(b)
	if !b.has("store") {
		return nil
	}
	dest, ok := druidStore(c.from, b.obj("store"))
	if !ok {
		return nil
	}
	if schedule == "" {
		schedule = "@daily"
		c.from.todo = append(c.from.todo, "spec.backup.fullSnapshotSchedule is not set: their operator's default applies there; the schedule here is @daily")
	}
	t := *c.from
	t.of = c
	objs, err := newSchedule(&t, schedule, dest, keep)
	c.extra = append(c.extra, objs...)
	return err
}

const (
	sidecar = "a setting of their backup sidecar: backups here are taken by the operator"
	deltas  = "no delta snapshots here: each backup is a full snapshot; a shorter schedule takes them more often"
)

// druidRetention reads the garbage collection of their snapshots: LimitBased keeps a count.
func druidRetention(b fields) int64 {
	policy := b.str("garbageCollectionPolicy")
	limit, _ := b.num("maxBackupsLimitBasedGC")
	if policy == "LimitBased" {
		return limit
	}
	if policy != "" || limit > 0 {
		b.note("garbageCollectionPolicy", quote(policy)+" keeps snapshots of each hour, day and week; retention here keeps a count (keepLast) or an age (maxAge): set spec.retention")
	}
	return 0
}

// druidStore reads spec.backup.store: S3 and GCS have equivalents.
func druidStore(t *theirs, f fields) (v1alpha1.BackupDestination, bool) {
	provider := f.str("provider")
	bucket, prefix, endpoint := f.str("container"), f.str("prefix"), f.str("endpointOverride")
	secret := f.obj("secretRef").str("name")
	f.obj("secretRef").take("namespace")
	switch strings.ToLower(provider) {
	case "s3", "aws":
		d := v1alpha1.BackupDestination{S3: &v1alpha1.S3Destination{Bucket: bucket, Prefix: prefix, Endpoint: endpoint, ForcePathStyle: endpoint != "", CredentialsSecret: secret}}
		if secret != "" {
			t.todo = append(t.todo, fmt.Sprintf("Secret %s: the region of their Secret goes to spec.destination.s3.region of the EtcdBackupSchedule", secret))
		}
		return d, true
	case "gcs", "gcp":
		d := v1alpha1.BackupDestination{GCS: &v1alpha1.GCSDestination{Bucket: bucket, Prefix: prefix, Endpoint: endpoint, CredentialsSecret: secret}}
		credentials(t, d, "serviceaccount.json")
		return d, true
	}
	t.notes = append(t.notes, fmt.Sprintf("spec.backup.store: the provider %s has no equivalent store here (s3, gcs or a volume claim): give the EtcdBackupSchedule one by hand", quote(provider)))
	return v1alpha1.BackupDestination{}, false
}

// druidSelected notes the Pod labels their selector selects by: on our members, their
// Services would select them too.
func druidSelected(s fields) {
	selected := s.obj("selector").obj("matchLabels")
	labels := s.obj("labels")
	for _, k := range slices.Sorted(maps.Keys(selected.m)) {
		if labels.has(k) {
			labels.drop(k, "their spec.selector selects their Pods by it: on ours, their Services would select them too")
		}
	}
}
