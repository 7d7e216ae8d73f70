package resources

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/agent"
)

// BackupPodName is the name of a Pod working for a backup: suffix says what it does
// ("snapshot", "prune", "drill").
func BackupPodName(backup, suffix string) string {
	suffix = "-" + suffix
	if len(backup) > 253-len(suffix) {
		backup = backup[:253-len(suffix)]
	}
	return backup + suffix
}

// backupVolume is a pvc destination's claim, for a Pod to mount at BackupMount; nothing for
// other destinations.
func backupVolume(d v1alpha1.BackupDestination, readOnly bool) ([]corev1.Volume, []corev1.VolumeMount) {
	if d.PVC == nil {
		return nil, nil
	}
	return []corev1.Volume{{Name: "backup", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: d.PVC.ClaimName, ReadOnly: readOnly}}}},
		[]corev1.VolumeMount{{Name: "backup", MountPath: vocab.BackupMount, ReadOnly: readOnly}}
}

// SnapshotPod renders the Pod that stores a backup's snapshot on its pvc destination:
// the operator's binary, given the member to read and the key's parts, with the claim
// mounted. It reports what it stored in its termination message.
// With client TLS, it mounts the operator's client certificate and dials with it.
func SnapshotPod(b *v1alpha1.EtcdBackup, c *v1alpha1.EtcdCluster, img Images, a agent.Snapshot) *corev1.Pod {
	a.Destination = b.Spec.Destination
	if !c.Spec.TLS.ClientTLS() {
		return backupPod(b, img, "snapshot", a.Argv())
	}
	a.TLSDir, a.ServerName = vocab.OperatorTLSMount, ServerName(c)
	p := backupPod(b, img, "snapshot", a.Argv())
	vol, mount := secretVolume("operator-tls", OperatorSecret(c), vocab.OperatorTLSMount)
	p.Spec.Volumes = append(p.Spec.Volumes, vol)
	p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, mount)
	return p
}

// PrunePod renders the Pod that deletes a backup's snapshot from its pvc destination.
func PrunePod(b *v1alpha1.EtcdBackup, img Images, key string) *corev1.Pod {
	return backupPod(b, img, "prune", agent.DeleteObject{Destination: b.Spec.Destination, Key: key}.Argv())
}

func backupPod(b *v1alpha1.EtcdBackup, img Images, what string, command []string) *corev1.Pod {
	vols, mounts := backupVolume(b.Spec.Destination, false)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: BackupPodName(b.Name, what), Namespace: b.Namespace,
			Labels: map[string]string{vocab.LabelBackup: b.Name, vocab.LabelManagedBy: vocab.ManagerName}},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			EnableServiceLinks:           ptr.To(false),
			AutomountServiceAccountToken: ptr.To(false),
			SecurityContext:              securePod(),
			Containers: []corev1.Container{{
				Name:                     what,
				Image:                    img.Operator,
				Command:                  command,
				SecurityContext:          secureContainer(),
				VolumeMounts:             mounts,
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
			Volumes: vols,
		},
	}
}
