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
func (spec *EtcdClusterSpec) ConfigHash() string { return shortHash(spec.configInput(), 16) }

// configInput is the JSON of the fields ConfigHash covers. Its form is fixed: a change
// would give every running Pod another hash, and restart it, on an operator upgrade.
func (spec *EtcdClusterSpec) configInput() []byte {
	// Without TLS on either side, the TLS fields (and their defaults) render nothing.
	// Certificates are renewed without a restart: their validity is no Pod's configuration.
	// Auth is switched on and off through etcd's API, never a Pod's: its field stays false.
	tls := TLSSpec{Mode: TLSDisabled}
	if spec.TLS.ClientMode() != TLSDisabled || spec.TLS.PeerMode() != TLSDisabled {
		tls = *spec.TLS
		tls.CertificateValidity = nil
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
		tls, false})
	if err != nil {
		panic(err) // plain data always marshals
	}
	return b
}

// ConfigFields hashes each of the fields ConfigHash covers on its own, as "field=hash"
// pairs sorted by field and joined by commas. The executor stamps it on each Pod beside
// ConfigHash, so a plan can say which fields a restart is for.
func (spec *EtcdClusterSpec) ConfigFields() string {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(spec.configInput(), &fields); err != nil {
		panic(err) // it was just marshalled
	}
	byName := map[string]string{}
	for goName, raw := range fields {
		byName[specName(goName)] = shortHash(raw, 8)
	}
	var pairs []string
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		pairs = append(pairs, name+"="+byName[name])
	}
	return strings.Join(pairs, ",")
}

// specName is a spec field's name from its Go name: TopologySpreadConstraints ->
// topologySpreadConstraints, TLS -> tls.
func specName(goName string) string {
	if strings.ToUpper(goName) == goName {
		return strings.ToLower(goName)
	}
	return strings.ToLower(goName[:1]) + goName[1:]
}

func shortHash(b []byte, n int) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:n]
}
