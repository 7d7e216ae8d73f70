// Package imagemap maps container images to binaries built on this machine.
//
// The local kubelet has no image store: an image reference is matched against a list of rules
// (the images file, JSON) and the container runs a binary from the rule's directory.
package imagemap

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"
)

// Rule maps the images matching Pattern to the binaries in Dir.
type Rule struct {
	// Pattern is a Go regexp matched against the whole image reference; named groups may be
	// used in Dir as ${name}.
	Pattern string `json:"pattern"`
	// Dir holds the binaries of the image. A relative Dir is relative to the kubelet's
	// working directory.
	Dir string `json:"dir"`
	// Entrypoint is the binary run when the container has no command: a name in Dir or an
	// absolute path.
	Entrypoint string `json:"entrypoint"`
	// Args are the image's default arguments (its CMD), used when the container sets neither
	// command nor args.
	Args []string `json:"args,omitempty"`
	// User is the image's default user id (its USER); nil means root.
	User *int64 `json:"user,omitempty"`
	// Env is the image's environment; the container's env overrides it.
	Env map[string]string `json:"env,omitempty"`

	re *regexp.Regexp
}

// Resolved is what a container runs.
type Resolved struct {
	Dir  string   // the image's binary directory, first in the container's PATH
	Path string   // the binary
	Argv []string // argv, argv[0] included
	User *int64
	Env  map[string]string
}

// Map is a parsed images file. It reloads the file when it changes, so the stack can rewrite
// it while kubelets run.
type Map struct {
	path string

	mu      sync.Mutex
	modTime time.Time
	rules   []Rule
}

// Load reads the images file at path.
func Load(path string) (*Map, error) {
	m := &Map{path: path}
	if err := m.reload(); err != nil {
		return nil, err
	}
	return m, nil
}

// New returns a Map of fixed rules (for tests).
func New(rules []Rule) (*Map, error) {
	m := &Map{}
	var err error
	m.rules, err = compile(rules)
	return m, err
}

// Parse parses the JSON form of an images file.
func Parse(data []byte) ([]Rule, error) {
	var rules []Rule
	if err := json.Unmarshal(data, &rules); err != nil {
		return nil, fmt.Errorf("images file: %w", err)
	}
	return compile(rules)
}

func compile(rules []Rule) ([]Rule, error) {
	for i := range rules {
		re, err := regexp.Compile("^(?:" + rules[i].Pattern + ")$")
		if err != nil {
			return nil, fmt.Errorf("image rule %d: %w", i, err)
		}
		if rules[i].Dir == "" {
			return nil, fmt.Errorf("image rule %d (%s): no dir", i, rules[i].Pattern)
		}
		rules[i].re = re
	}
	return rules, nil
}

func (m *Map) reload() error {
	if m.path == "" {
		return nil
	}
	st, err := os.Stat(m.path)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if st.ModTime().Equal(m.modTime) && m.rules != nil {
		return nil
	}
	data, err := os.ReadFile(m.path)
	if err != nil {
		return err
	}
	rules, err := Parse(data)
	if err != nil {
		return err
	}
	m.rules, m.modTime = rules, st.ModTime()
	return nil
}

// Resolve finds the binary and argv of a container with the given image, command and args,
// following Kubernetes' rules: command replaces the entrypoint, args replace the image's
// default args. command[0] is looked up by its base name in the image's directory.
func (m *Map) Resolve(image string, command, args []string) (Resolved, error) {
	if err := m.reload(); err != nil {
		return Resolved{}, err
	}
	m.mu.Lock()
	rules := m.rules
	m.mu.Unlock()
	for _, r := range rules {
		match := r.re.FindStringSubmatchIndex(image)
		if match == nil {
			continue
		}
		dir := string(r.re.ExpandString(nil, r.Dir, image, match))
		if abs, err := filepath.Abs(dir); err == nil {
			dir = abs
		}
		return resolveIn(r, dir, command, args)
	}
	return Resolved{}, fmt.Errorf("no rule in the images file maps image %q to a binary", image)
}

func resolveIn(r Rule, dir string, command, args []string) (Resolved, error) {
	res := Resolved{Dir: dir, User: r.User, Env: r.Env}
	switch {
	case len(command) > 0:
		res.Path = filepath.Join(dir, filepath.Base(command[0]))
		res.Argv = append(append([]string{command[0]}, command[1:]...), args...)
	case r.Entrypoint == "":
		return Resolved{}, fmt.Errorf("image rule %q has no entrypoint and the container no command", r.Pattern)
	default:
		res.Path = r.Entrypoint
		if !filepath.IsAbs(res.Path) {
			res.Path = filepath.Join(dir, res.Path)
		}
		if args == nil {
			args = r.Args
		}
		res.Argv = append([]string{res.Path}, args...)
	}
	if err := executable(res.Path); err != nil {
		return Resolved{}, err
	}
	return res, nil
}

func executable(path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("binary not found: %w", err)
	}
	if st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", path)
	}
	return nil
}
