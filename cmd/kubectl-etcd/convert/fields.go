package convert

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// fields reads one object of another operator's manifest. Each field read is taken out of
// it, so that what is left at the end is what has no equivalent: leftovers are noted with
// their path, and no field of theirs goes by without a word.
type fields struct {
	m     map[string]any
	path  string
	notes *[]string
}

func newFields(m map[string]any, path string, notes *[]string) fields {
	if m == nil {
		m = map[string]any{}
	}
	return fields{m: m, path: path, notes: notes}
}

func (f fields) at(key string) string {
	if f.path == "" {
		return key
	}
	return f.path + "." + key
}

// has reports whether the field is set (and not taken yet).
func (f fields) has(key string) bool {
	v, ok := f.m[key]
	return ok && v != nil
}

// take removes the field and returns its value (nil when absent).
func (f fields) take(key string) any {
	v := f.m[key]
	delete(f.m, key)
	return v
}

// str takes a string field; a number is written as etcd would read it.
func (f fields) str(key string) string {
	switch v := f.take(key).(type) {
	case string:
		return v
	case nil:
		return ""
	default:
		return fmt.Sprint(v)
	}
}

// num takes an integer field; ok is false when it is absent.
func (f fields) num(key string) (int64, bool) {
	switch v := f.take(key).(type) {
	case int64:
		return v, true
	case float64:
		return int64(v), true
	case json.Number:
		n, err := v.Int64()
		return n, err == nil
	}
	return 0, false
}

func (f fields) flag(key string) bool {
	b, _ := f.take(key).(bool)
	return b
}

// obj reads an object field; an absent one reads as empty. Its fields are taken one by one,
// and what is left of it is noted with the rest. A value that is not an object is left to
// be noted.
func (f fields) obj(key string) fields {
	m, _ := f.m[key].(map[string]any)
	return newFields(m, f.at(key), f.notes)
}

// into takes a field and decodes it into one of our types.
func (f fields) into(key string, out any) error {
	v := f.take(key)
	if v == nil {
		return nil
	}
	data, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(data, out)
	}
	if err != nil {
		return fmt.Errorf("%s: %w", f.at(key), err)
	}
	return nil
}

// drop takes a field that has no equivalent and notes why, when it is set.
func (f fields) drop(key, why string) {
	if f.take(key) != nil {
		f.note(key, why)
	}
}

// note says what became of a field of theirs.
func (f fields) note(key, why string) {
	*f.notes = append(*f.notes, f.at(key)+": "+why)
}

// rest notes every field not taken, looking into objects whose other fields were read.
func (f fields) rest() {
	for _, k := range slices.Sorted(maps.Keys(f.m)) {
		switch f.m[k].(type) {
		case nil:
		case map[string]any:
			f.obj(k).rest()
		default:
			f.note(k, "not a field this converter knows; carry it over by hand if it matters")
		}
	}
}

// quote shortens a value for a comment.
func quote(v string) string {
	if strings.ContainsAny(v, " :#") {
		return fmt.Sprintf("%q", v)
	}
	return v
}
