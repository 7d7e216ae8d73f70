package convert

import (
	"encoding/json"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

// commentWidth is where comments wrap.
const commentWidth = 100

// Render writes the objects as one YAML stream, each with its comments above it.
func Render(w io.Writer, objs []Object) error {
	var b strings.Builder
	for i, o := range objs {
		if i > 0 {
			b.WriteString("---\n")
		}
		for _, c := range o.Comments {
			for _, line := range wrap(c, commentWidth-2) {
				b.WriteString(strings.TrimRight("# "+line, " ") + "\n")
			}
		}
		data, err := clean(o.Value)
		if err != nil {
			return err
		}
		b.Write(data)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// clean writes an object as YAML without its status and the fields left empty.
func clean(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	return yaml.Marshal(prune(m))
}

// prune drops nulls, empty strings, and objects and lists left empty by that.
func prune(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, inner := range x {
			if inner = prune(inner); inner == nil {
				delete(x, k)
			} else {
				x[k] = inner
			}
		}
		if len(x) == 0 {
			return nil
		}
	case []any:
		if len(x) == 0 {
			return nil
		}
	case string:
		if x == "" {
			return nil
		}
	}
	return v
}

// wrap cuts a line into lines of at most width characters at spaces; a line that goes on
// is indented under the first.
func wrap(s string, width int) []string {
	var lines []string
	indent := ""
	if strings.HasPrefix(s, "- ") {
		indent = "  "
	}
	line := ""
	for _, word := range strings.Fields(s) {
		switch {
		case line == "":
			line = word
		case len(line)+1+len(word) > width:
			lines = append(lines, line)
			line = indent + word
		default:
			line += " " + word
		}
	}
	return append(lines, line)
}
