package render

import (
	"encoding/json"
	"io"

	"github.com/etcdplan/etcdplan/api/plan"
)

// document is a plan as JSON: the plan's own fields (formatVersion first) and the cluster
// it is for. A reader that wants a plan.Plan decodes the document into one directly.
type document struct {
	plan.Plan
	Cluster string `json:"cluster"`
	// Unknown says what the plan cannot know (Cluster.Unknown).
	Unknown string `json:"unknown,omitempty"`
}

// JSON writes one indented JSON document per cluster, each followed by a newline. With one
// cluster the output is a single object; with several it is a stream that `jq` and
// json.Decoder read document by document.
func JSON(w io.Writer, clusters ...Cluster) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false) // reasons read "3 -> 5", not "3 -\u003e 5"
	for _, c := range clusters {
		if err := enc.Encode(document{Plan: c.Plan, Cluster: c.Name, Unknown: c.Unknown}); err != nil {
			return err
		}
	}
	return nil
}
