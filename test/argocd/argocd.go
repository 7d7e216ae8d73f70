// Package argocd runs the EtcdCluster health check and actions of examples/argocd/argocd-cm.yaml
// the way Argo CD runs resource customizations: gopher-lua (the interpreter Argo CD embeds) with
// only the package, base and table libraries, the object as the global `obj`, one second per
// script, and the returned table read through gopher-json as Argo CD reads it.
package argocd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	lua "github.com/yuin/gopher-lua"
	luajson "layeh.com/gopher-json"
	"sigs.k8s.io/yaml"
)

// Health statuses Argo CD accepts from a script; anything else reads as Unknown.
var statuses = map[string]bool{"Healthy": true, "Progressing": true, "Degraded": true, "Suspended": true, "Missing": true, "Unknown": true}

// Scripts are the customizations of one kind, as argocd-cm holds them.
type Scripts struct {
	HealthLua string
	Discovery string
	Actions   map[string]string
}

// Load reads the EtcdCluster customizations from the argocd-cm.yaml of the repository at root.
func Load(root string) (*Scripts, error) {
	b, err := os.ReadFile(filepath.Join(root, "examples", "argocd", "argocd-cm.yaml"))
	if err != nil {
		return nil, err
	}
	var cm struct{ Data map[string]string }
	if err := yaml.Unmarshal(b, &cm); err != nil {
		return nil, err
	}
	const key = "etcdplan.io_EtcdCluster"
	var actions struct {
		Discovery   string `json:"discovery.lua"`
		Definitions []struct {
			Name   string `json:"name"`
			Action string `json:"action.lua"`
		} `json:"definitions"`
	}
	if err := yaml.Unmarshal([]byte(cm.Data["resource.customizations.actions."+key]), &actions); err != nil {
		return nil, fmt.Errorf("actions: %w", err)
	}
	s := &Scripts{HealthLua: cm.Data["resource.customizations.health."+key], Discovery: actions.Discovery, Actions: map[string]string{}}
	for _, d := range actions.Definitions {
		s.Actions[d.Name] = d.Action
	}
	if s.HealthLua == "" || s.Discovery == "" || len(s.Actions) == 0 {
		return nil, fmt.Errorf("argocd-cm.yaml lacks the health check, the discovery or the actions of %s", key)
	}
	return s, nil
}

// Status is what a health script returned.
type Status struct {
	Status  string `json:"status"`
	Message string `json:"message"`
}

// Health runs the health script on obj.
func (s *Scripts) Health(obj map[string]any) (Status, error) {
	var st Status
	if err := run(obj, s.HealthLua, &st); err != nil {
		return st, err
	}
	if !statuses[st.Status] {
		return Status{Status: "Unknown", Message: "invalid health status " + st.Status}, nil
	}
	return st, nil
}

// Available runs the discovery script: each action's name, and whether it can run now.
func (s *Scripts) Available(obj map[string]any) (map[string]bool, error) {
	var found map[string]struct {
		Disabled bool `json:"disabled"`
	}
	if err := run(obj, s.Discovery, &found); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for name, a := range found {
		out[name] = !a.Disabled
	}
	return out, nil
}

// Act runs the named action on obj and returns the object it makes.
func (s *Scripts) Act(name string, obj map[string]any) (map[string]any, error) {
	script, ok := s.Actions[name]
	if !ok {
		return nil, fmt.Errorf("no action %q", name)
	}
	var out map[string]any
	return out, run(obj, script, &out)
}

// run runs script with obj as its global and decodes the table it returns into out.
func run(obj map[string]any, script string, out any) error {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for name, open := range map[string]lua.LGFunction{lua.LoadLibName: lua.OpenPackage, lua.BaseLibName: lua.OpenBase, lua.TabLibName: lua.OpenTable} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(open), Protect: true}, lua.LString(name)); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", toLua(l, obj))
	if err := l.DoString(script); err != nil {
		return err
	}
	ret := l.Get(-1)
	if ret.Type() != lua.LTTable {
		return fmt.Errorf("the script returned a %s, not a table", ret.Type())
	}
	b, err := luajson.Encode(ret)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// toLua turns a JSON value into Lua's: objects and arrays into tables, numbers into numbers.
func toLua(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := l.NewTable()
		for k, e := range v {
			t.RawSetString(k, toLua(l, e))
		}
		return t
	case []any:
		t := l.NewTable()
		for _, e := range v {
			t.Append(toLua(l, e))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case float64:
		return lua.LNumber(v)
	case int64:
		return lua.LNumber(v)
	case json.Number:
		f, _ := v.Float64()
		return lua.LNumber(f)
	}
	return lua.LNil
}
