package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/planner"
)

// ObservedSource gives the observed state a cluster is planned against, and the spec
// generation its plan is for. The file source below reads saved states, planned for
// generation 0; liveSource reads the cluster the kubeconfig points at.
type ObservedSource interface {
	Observed(ctx context.Context, c *v1alpha1.EtcdCluster) (planner.Observed, int64, error)
}

// fileSource holds the observed states of an --observed file, by cluster key.
type fileSource struct {
	path   string
	states map[string]planner.Observed
}

// OpenObservedFile reads an --observed file for the clusters about to be planned. The file
// holds either one observed state (an object with formatVersion), for a single cluster, or
// an object mapping "namespace/name" or "name" to observed states, for several.
func OpenObservedFile(path string, clusters []*v1alpha1.EtcdCluster) (ObservedSource, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("%s: not an observed state: %w", path, err)
	}
	src := &fileSource{path: path, states: map[string]planner.Observed{}}
	if _, single := top["formatVersion"]; single {
		if len(clusters) > 1 {
			return nil, fmt.Errorf("%s holds the observed state of one cluster and %d clusters are planned: "+
				`map each "namespace/name" to its observed state (see docs/cli.md)`, path, len(clusters))
		}
		o, err := decodeObserved(path, data)
		if err != nil {
			return nil, err
		}
		src.states[key(clusters[0])] = o
		return src, nil
	}
	if len(top) == 0 {
		return nil, fmt.Errorf("%s: neither an observed state (it has no formatVersion) nor a map of them", path)
	}
	for k, raw := range top {
		o, err := decodeObserved(fmt.Sprintf("%s: %q", path, k), raw)
		if err != nil {
			return nil, err
		}
		src.states[k] = o
	}
	return src, nil
}

// decodeObserved reads one observed state strictly: a misspelt field would silently
// change the plan.
func decodeObserved(where string, data []byte) (planner.Observed, error) {
	var o planner.Observed
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&o); err != nil {
		return o, fmt.Errorf("%s: %w", where, err)
	}
	if err := o.Upgrade(); err != nil {
		return o, fmt.Errorf("%s: %w", where, err)
	}
	return o, nil
}

func (s *fileSource) Observed(_ context.Context, c *v1alpha1.EtcdCluster) (planner.Observed, int64, error) {
	for _, k := range keys(c) {
		if o, ok := s.states[k]; ok {
			return o, 0, nil
		}
	}
	have := make([]string, 0, len(s.states))
	for k := range s.states {
		have = append(have, fmt.Sprintf("%q", k))
	}
	sort.Strings(have)
	return planner.Observed{}, 0, fmt.Errorf("%s has no observed state for EtcdCluster %s (it has %s)",
		s.path, key(c), strings.Join(have, ", "))
}
