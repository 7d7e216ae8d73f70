// Package observe gathers the planner's inputs: the desired state from an EtcdCluster and
// the observed state from Kubernetes objects and etcd.
package observe

import (
	"k8s.io/utils/ptr"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/planner"
)

// Desired is what the cluster's spec asks of the planner.
func Desired(c *v1alpha1.EtcdCluster) planner.Desired {
	return planner.Desired{
		Name:             c.Name,
		Namespace:        c.Namespace,
		Generation:       c.Generation,
		Replicas:         int(c.Spec.Replicas),
		Version:          c.Spec.Version,
		ConfigHash:       c.Spec.ConfigHash(),
		ConfigFields:     c.Spec.ConfigFields(),
		Memory:           c.Spec.Storage.Medium == v1alpha1.StorageMediumMemory,
		RecoveryApproved: c.Spec.RecoveryApproved(),
		StorageClass:     c.Spec.Storage.StorageClassName,
		StorageBytes:     c.Spec.Storage.Size.Value(),
		QuotaBytes:       ptr.Deref(c.Spec.Options.QuotaBackendBytes, 0),
		DefragPercent:    defragPercent(c.Spec.Maintenance),
		Restore:          RestoreSource(c.Spec.Bootstrap),
		ClientTLS:        c.Spec.TLS.ClientTLS(),
		PeerTLS:          c.Spec.TLS.PeerTLS(),
		Auth:             c.Spec.AuthOn(),
		Users:            c.Spec.UsersHash(),
		Join:             c.Spec.Bootstrap != nil && c.Spec.Bootstrap.Join != nil,
	}
}

// RestoreSource names the snapshot spec.bootstrap.restore seeds the cluster from, as the
// plan says it: "EtcdBackup <name>" or the source's URI; "" for none.
func RestoreSource(b *v1alpha1.BootstrapSpec) string {
	if b == nil {
		return ""
	}
	return RestoreName(b.Restore)
}

// RestoreName names the snapshot a restore reads: "EtcdBackup <name>" or the source's
// URI; "" for none.
func RestoreName(r *v1alpha1.RestoreSpec) string {
	switch {
	case r == nil:
		return ""
	case r.Source != nil:
		return r.Source.URI(r.Source.Key)
	}
	return "EtcdBackup " + r.BackupName
}

// defragPercent is the threshold that defragments a member whenever it reaches it: none
// with a schedule, which says when (the executor marks the members due then).
func defragPercent(m *v1alpha1.MaintenanceSpec) int {
	if m == nil || m.Defrag == nil || m.Defrag.Schedule != "" {
		return 0
	}
	return int(m.Defrag.ThresholdPercent)
}

// ScheduledDefragPercent is the share of free space that makes a member due when
// spec.maintenance.defrag.schedule comes: the threshold, or without one any free space
// worth giving back.
func ScheduledDefragPercent(d *v1alpha1.DefragSpec) int {
	if d.ThresholdPercent == 0 {
		return 1
	}
	return int(d.ThresholdPercent)
}
