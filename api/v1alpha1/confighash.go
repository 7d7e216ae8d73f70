package v1alpha1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strings"
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

// ConfigFields hashes each of the fields ConfigHash covers on its own, as "field=hash"
// pairs sorted by field and joined by commas. The executor stamps it on each Pod beside
// ConfigHash, so a plan can say which fields a restart is for.
func (spec *EtcdClusterSpec) ConfigFields() string {
	tls := TLSSpec{Mode: TLSDisabled}
	if spec.TLS != nil {
		tls = *spec.TLS
	}
	fields := map[string]any{
		"image": spec.Image, "resources": spec.Resources, "affinity": spec.Affinity,
		"topologySpreadConstraints": spec.TopologySpreadConstraints, "nodeSelector": spec.NodeSelector,
		"tolerations": spec.Tolerations, "priorityClassName": spec.PriorityClassName,
		"imagePullSecrets": spec.ImagePullSecrets, "podMetadata": spec.PodMetadata, "options": spec.Options,
		"tls": tls, "auth": spec.Auth != nil && spec.Auth.Enabled,
	}
	var pairs []string
	for _, name := range slices.Sorted(maps.Keys(fields)) {
		b, err := json.Marshal(fields[name])
		if err != nil {
			panic(err) // plain data always marshals
		}
		sum := sha256.Sum256(b)
		pairs = append(pairs, name+"="+hex.EncodeToString(sum[:])[:8])
	}
	return strings.Join(pairs, ",")
}
