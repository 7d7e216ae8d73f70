package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// ConfigHash hashes the spec fields a member Pod is rendered from, apart from the version
// (upgrades are planned on their own). The executor stamps it on each Pod; a Pod whose hash
// differs is re-created by a RestartMember step.
func (spec *EtcdClusterSpec) ConfigHash() string {
	tls := TLSSpec{Mode: TLSDisabled}
	if spec.TLS != nil {
		tls = *spec.TLS
	}
	b, err := json.Marshal(struct {
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
		TLS                       TLSSpec
		Auth                      bool
	}{spec.Image, spec.Resources, spec.Affinity, spec.TopologySpreadConstraints, spec.NodeSelector,
		spec.Tolerations, spec.PriorityClassName, spec.ImagePullSecrets, spec.PodMetadata, spec.Options,
		tls, spec.Auth != nil && spec.Auth.Enabled})
	if err != nil {
		panic(err) // plain data always marshals
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}
