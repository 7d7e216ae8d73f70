// Package resources renders the Kubernetes objects of an etcd cluster: member Pods and
// volume claims, the headless and client Services, the PodDisruptionBudget, and the Pods
// that work for backups. The names it writes are in api/vocab and api/v1alpha1 (labels.go);
// the in-Pod commands' arguments are executor/agent's.
package resources

import (
	"fmt"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/api/vocab"
)

// ClusterLabels select every object of a cluster.
func ClusterLabels(c *v1alpha1.EtcdCluster) map[string]string {
	return map[string]string{
		v1alpha1.LabelCluster: c.Name,
		vocab.LabelManagedBy:  vocab.ManagerName,
		vocab.LabelName:       "etcd",
		vocab.LabelInstance:   c.Name,
	}
}

// Selector is the label selector of a cluster's member Pods, as a string for /scale.
func Selector(c *v1alpha1.EtcdCluster) string {
	return fmt.Sprintf("%s=%s,%s=%s", v1alpha1.LabelCluster, c.Name, vocab.LabelManagedBy, vocab.ManagerName)
}

// Image is the etcd image of a version.
func Image(c *v1alpha1.EtcdCluster, defaultRepo, version string) string {
	repo := c.Spec.Image
	if repo == "" {
		repo = defaultRepo
	}
	return repo + ":v" + version
}
