package resources

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
)

// drillMember is the name of a drill's scratch member; it listens for peers on loopback,
// so nothing can join it.
const drillMember = "drill"

// DrillPod renders a backup's restore drill: the snapshot fetched and checked as a seed's
// restore does, restored by etcdutl of version as a one-member cluster of its own (a new
// cluster ID, peers on loopback), and etcd started on it, serving clients on the Pod's
// address for the operator to read what it holds. It carries no cluster label: no Service
// or member list of the cluster ever selects it. c places it as the cluster's members are
// placed; c may be empty when the cluster is gone.
func DrillPod(b *v1alpha1.EtcdBackup, c *v1alpha1.EtcdCluster, img Images, rs Restore, version string) *corev1.Pod {
	peer := fmt.Sprintf("http://127.0.0.1:%d", vocab.PeerPort)
	image := Image(c, img.EtcdRepository, version)
	secure := secureContainer()
	args := []string{"etcd", "--name=" + drillMember, "--data-dir=" + vocab.DataDir,
		fmt.Sprintf("--listen-client-urls=http://0.0.0.0:%d", vocab.ClientPort),
		fmt.Sprintf("--advertise-client-urls=http://127.0.0.1:%d", vocab.ClientPort),
		"--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=" + drillMember + "=" + peer,
		fmt.Sprintf("--listen-metrics-urls=http://0.0.0.0:%d", vocab.MetricsPort)}
	if q := c.Spec.Options.QuotaBackendBytes; q != nil {
		// A database near the cluster's quota would raise NOSPACE under etcd's default one.
		args = append(args, fmt.Sprintf("--quota-backend-bytes=%d", *q))
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: BackupPodName(b.Name, "drill"), Namespace: b.Namespace,
			Labels: map[string]string{vocab.LabelBackup: b.Name, vocab.LabelManagedBy: vocab.ManagerName}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](5),
			EnableServiceLinks:            ptr.To(false),
			AutomountServiceAccountToken:  ptr.To(false),
			SecurityContext:               securePod(),
			InitContainers: []corev1.Container{
				fetchContainer(img, rs, secure),
				etcdutlRestore(image, vocab.DataDir, drillMember, []string{drillMember + "=" + peer}, "drill-"+string(b.UID), secure),
			},
			Containers: []corev1.Container{{
				Name:            vocab.ContainerEtcd,
				Image:           image,
				Command:         args,
				Resources:       c.Spec.Resources,
				SecurityContext: secure,
				Ports:           []corev1.ContainerPort{{Name: "client", ContainerPort: vocab.ClientPort}},
				ReadinessProbe: &corev1.Probe{
					ProbeHandler:  corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/health?exclude=NOSPACE", Port: intstrPort(vocab.MetricsPort)}},
					PeriodSeconds: 1, TimeoutSeconds: 2, FailureThreshold: 3,
				},
				VolumeMounts:             []corev1.VolumeMount{{Name: "data", MountPath: vocab.DataMount}},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
			Volumes: append([]corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
				restoreVolumes(rs)...),
			Affinity:          nodeAffinity(c.Spec.Affinity),
			NodeSelector:      c.Spec.NodeSelector,
			Tolerations:       c.Spec.Tolerations,
			PriorityClassName: c.Spec.PriorityClassName,
			ImagePullSecrets:  c.Spec.ImagePullSecrets,
		},
	}
}

// nodeAffinity keeps a cluster's node affinity and drops its Pod (anti-)affinity: that
// places members among each other, and a drill is no member (with one member per node
// required, a drill would find no node).
func nodeAffinity(a *corev1.Affinity) *corev1.Affinity {
	if a == nil || a.NodeAffinity == nil {
		return nil
	}
	return &corev1.Affinity{NodeAffinity: a.NodeAffinity}
}
