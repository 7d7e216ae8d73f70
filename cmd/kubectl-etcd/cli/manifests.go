package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// document is one Kubernetes object as JSON, with where it came from for error messages.
type document struct {
	source string
	data   []byte
}

// readFiles reads every YAML or JSON document of the files; "-" is stdin and a directory
// stands for its .yaml, .yml and .json files (not its subdirectories), as with kubectl -f.
func readFiles(paths []string, stdin io.Reader) ([]document, error) {
	var docs []document
	for _, p := range paths {
		files, err := expand(p)
		if err != nil {
			return nil, err
		}
		for _, file := range files {
			d, err := readFile(file, stdin)
			if err != nil {
				return nil, err
			}
			docs = append(docs, d...)
		}
	}
	return docs, nil
}

// expand lists the manifest files a -f argument names.
func expand(path string) ([]string, error) {
	if path == "-" {
		return []string{path}, nil
	}
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		ext := filepath.Ext(e.Name())
		if !e.IsDir() && (ext == ".yaml" || ext == ".yml" || ext == ".json") {
			files = append(files, filepath.Join(path, e.Name()))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%s: no .yaml, .yml or .json files in the directory", path)
	}
	return files, nil
}

func readFile(path string, stdin io.Reader) ([]document, error) {
	r, name := stdin, "<stdin>"
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r, name = f, path
	}
	return split(name, r)
}

// split cuts a YAML stream into its documents and turns each into JSON. Duplicate keys are
// an error, as they are for the API server.
func split(name string, r io.Reader) ([]document, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var docs []document
	for n := 1; ; n++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		source := fmt.Sprintf("%s (document %d)", name, n)
		data, err := yaml.YAMLToJSONStrict(raw)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		if t := bytes.TrimSpace(data); len(t) == 0 || string(t) == "null" {
			continue // a comment or an empty document between separators
		}
		docs = append(docs, document{source: source, data: data})
	}
}

// kustomize renders a kustomization in-process, with kustomize's default options (no
// plugins, no Helm), as `kubectl kustomize DIR` would.
func kustomize(dir string) ([]document, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	resources, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomization %s: %w", dir, err)
	}
	var docs []document
	for _, r := range resources.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("kustomization %s: %s: %w", dir, r.CurId(), err)
		}
		docs = append(docs, document{source: "kustomization " + dir, data: data})
	}
	return docs, nil
}

// etcdClusters decodes the EtcdClusters among the documents and ignores other kinds.
func etcdClusters(docs []document) ([]*v1alpha1.EtcdCluster, error) {
	var out []*v1alpha1.EtcdCluster
	seen := map[string]string{}
	for _, d := range docs {
		c, err := decodeIfCluster(d)
		if err != nil || c == nil {
			if err != nil {
				return nil, err
			}
			continue
		}
		k := key(c)
		if first, dup := seen[k]; dup {
			return nil, fmt.Errorf("%s: EtcdCluster %s is also defined in %s", d.source, k, first)
		}
		seen[k] = d.source
		out = append(out, c)
	}
	if len(out) == 0 {
		return nil, errors.New("no EtcdCluster (apiVersion etcdplan.io/v1alpha1) in the manifests")
	}
	return out, nil
}

// key names a cluster as the observed-state file does: "namespace/name", or "name"
// when the manifest leaves the namespace to the context it is applied in.
func key(c *v1alpha1.EtcdCluster) string {
	if c.Namespace == "" {
		return c.Name
	}
	return c.Namespace + "/" + c.Name
}

// keys lists the names a cluster may have in a map of observed states, most precise first.
func keys(c *v1alpha1.EtcdCluster) []string {
	return slices.Compact([]string{key(c), c.Name})
}

// groupOf returns the API group of an apiVersion ("etcdplan.io/v1alpha1" -> "etcdplan.io").
func groupOf(apiVersion string) string {
	group, _, found := strings.Cut(apiVersion, "/")
	if !found {
		return "" // the core group: "v1"
	}
	return group
}
