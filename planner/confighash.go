package planner

import "github.com/etcdplan/etcdplan/api/v1alpha1"

// ConfigHash hashes the spec fields a member Pod is rendered from, apart from the version
// (upgrades are planned on their own). The executor stamps it on each Pod; a Pod whose hash
// differs is re-created by a RestartMember step.
func ConfigHash(spec *v1alpha1.EtcdClusterSpec) string {
	tls := v1alpha1.TLSSpec{Mode: v1alpha1.TLSDisabled}
	if spec.TLS != nil {
		tls = *spec.TLS
	}
	return hashJSON(struct {
		Image                     string
		Resources                 any
		Affinity                  any
		TopologySpreadConstraints any
		NodeSelector              any
		Tolerations               any
		PriorityClassName         string
		ImagePullSecrets          any
		PodMetadata               any
		Options                   any
		TLS                       v1alpha1.TLSSpec
		Auth                      bool
	}{spec.Image, spec.Resources, spec.Affinity, spec.TopologySpreadConstraints, spec.NodeSelector,
		spec.Tolerations, spec.PriorityClassName, spec.ImagePullSecrets, spec.PodMetadata, spec.Options,
		tls, spec.Auth != nil && spec.Auth.Enabled})
}
