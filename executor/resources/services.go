package resources

import (
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
)

func intstrPort(p int) intstr.IntOrString { return intstr.FromInt32(int32(p)) }

func memberSelector(c *v1alpha1.EtcdCluster) map[string]string {
	return map[string]string{v1alpha1.LabelCluster: c.Name, vocab.LabelManagedBy: vocab.ManagerName}
}

// Headless renders the Service that gives each member its DNS name. It publishes members
// before they are ready: peers must find each other to elect a leader in the first place.
func Headless(c *v1alpha1.EtcdCluster) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: vocab.HeadlessService(c.Name), Namespace: c.Namespace, Labels: ClusterLabels(c)},
		Spec: corev1.ServiceSpec{
			ClusterIP:                corev1.ClusterIPNone,
			PublishNotReadyAddresses: true,
			Selector:                 memberSelector(c),
			Ports: []corev1.ServicePort{
				{Name: "client", Port: vocab.ClientPort, TargetPort: intstrPort(vocab.ClientPort)},
				{Name: "peer", Port: vocab.PeerPort, TargetPort: intstrPort(vocab.PeerPort)},
			},
		},
	}
}

// Client renders the Service clients connect through: ready voters only. A learner
// refuses most requests until it is promoted, so clients never reach one.
func Client(c *v1alpha1.EtcdCluster) *corev1.Service {
	sel := memberSelector(c)
	sel[v1alpha1.LabelRole] = string(v1alpha1.RoleVoter)
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: vocab.ClientService(c.Name), Namespace: c.Namespace, Labels: ClusterLabels(c)},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: sel,
			Ports:    []corev1.ServicePort{{Name: "client", Port: vocab.ClientPort, TargetPort: intstrPort(vocab.ClientPort)}},
		},
	}
	if cs := c.Spec.ClientService; cs != nil {
		if cs.Type != "" {
			svc.Spec.Type = cs.Type
		}
		svc.Labels = merge(cs.Labels, svc.Labels)
		svc.Annotations = cs.Annotations
	}
	return svc
}

// PDB renders the PodDisruptionBudget over voting members: a voluntary disruption (a node
// drain) may never take voters below quorum.
func PDB(c *v1alpha1.EtcdCluster, voters int) *policyv1.PodDisruptionBudget {
	sel := memberSelector(c)
	sel[v1alpha1.LabelRole] = string(v1alpha1.RoleVoter)
	minAvailable := intstr.FromInt32(int32(voters/2 + 1))
	return &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Namespace: c.Namespace, Labels: ClusterLabels(c)},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MinAvailable: &minAvailable,
			Selector:     &metav1.LabelSelector{MatchLabels: sel},
		},
	}
}
