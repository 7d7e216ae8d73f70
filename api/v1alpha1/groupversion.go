// Package v1alpha1 holds the etcdplan.io/v1alpha1 API: EtcdCluster, EtcdBackup and
// EtcdBackupSchedule.
// +kubebuilder:object:generate=true
// +groupName=etcdplan.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of this package.
var GroupVersion = schema.GroupVersion{Group: "etcdplan.io", Version: "v1alpha1"}

// SchemeBuilder registers the types of this package. It is apimachinery's builder, not
// controller-runtime's, so the pure planner can import the API without a client library.
var SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

// AddToScheme adds the types of this package to a scheme.
var AddToScheme = SchemeBuilder.AddToScheme

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion,
		&EtcdCluster{}, &EtcdClusterList{},
		&EtcdBackup{}, &EtcdBackupList{},
		&EtcdBackupSchedule{}, &EtcdBackupScheduleList{},
	)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
