package resources

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
	"github.com/etcdplan/etcdplan/executor/agent"
)

// CheckPodName names the check Pod of a member (CheckData). Member names end in an
// ordinal, so it is never a member's.
func CheckPodName(member string) string { return member + "-check" }

// CheckPod renders the Pod that reads, beside a member's going Pod, whether the member's
// volume claim still holds its data: the preflight check of a member that joined before,
// with the claim mounted read-only, so it can change nothing. It runs on the node of the
// member's going Pod (a volume attached there can be mounted there at once). Its
// preflight container's exit code is the answer (agent.ExitDataLost: the data is gone).
// It carries the claim's UID, a reading counting for that claim only, and the going Pod's:
// once that Pod is gone, no etcd of it can write the directory again.
func CheckPod(c *v1alpha1.EtcdCluster, img Images, claim *corev1.PersistentVolumeClaim, going *corev1.Pod) *corev1.Pod {
	check := agent.Preflight{DataDir: vocab.DataDir, ExpectData: true}
	member := claim.Name
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: CheckPodName(member), Namespace: c.Namespace,
			Labels: map[string]string{vocab.LabelDataCheck: c.Name, vocab.LabelManagedBy: vocab.ManagerName},
			Annotations: map[string]string{vocab.AnnotationMember: member, vocab.AnnotationClaimUID: string(claim.UID),
				vocab.AnnotationBesidePod: string(going.UID)}},
		Spec: corev1.PodSpec{
			NodeName:                      going.Spec.NodeName,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: ptr.To[int64](1),
			EnableServiceLinks:            ptr.To(false),
			AutomountServiceAccountToken:  ptr.To(false),
			SecurityContext:               securePod(),
			Containers: []corev1.Container{{
				Name:                     vocab.ContainerPreflight,
				Image:                    img.Operator,
				Command:                  check.Argv(),
				SecurityContext:          secureContainer(),
				VolumeMounts:             []corev1.VolumeMount{{Name: "data", MountPath: vocab.DataMount, ReadOnly: true}},
				TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
			}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
				PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: claim.Name, ReadOnly: true}}}},
			NodeSelector:      c.Spec.NodeSelector,
			Tolerations:       c.Spec.Tolerations,
			PriorityClassName: c.Spec.PriorityClassName,
			ImagePullSecrets:  c.Spec.ImagePullSecrets,
		},
	}
}
