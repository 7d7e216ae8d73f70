// Command release-manifests renders a kustomization of the install as one YAML file with
// the operator's image set, for `kubectl apply --server-side -f`:
//
//	go run ./tools/release-manifests -image registry.example/etcdplan:v0.3.0 -o dist/etcdplan.yaml
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

func main() {
	image := flag.String("image", "", "the operator's image, REPOSITORY:TAG")
	dir := flag.String("k", "kustomize/default", "the kustomization to render")
	out := flag.String("o", "", "the file to write (default: standard output)")
	flag.Parse()
	data, err := render(*dir, *image)
	if err == nil && *out != "" {
		if err = os.MkdirAll(filepath.Dir(*out), 0o755); err == nil {
			err = os.WriteFile(*out, data, 0o644)
		}
	} else if err == nil {
		_, err = os.Stdout.Write(data)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "release-manifests:", err)
		os.Exit(1)
	}
}

// defaultImage is the operator's image as kustomize/manager names it.
const defaultImage = "ghcr.io/etcdplan/etcdplan"

// render builds dir through an overlay that sets the operator's image.
func render(dir, image string) ([]byte, error) {
	name, tag, ok := cutTag(image)
	if !ok {
		return nil, fmt.Errorf("-image %q: want REPOSITORY:TAG", image)
	}
	base, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	overlay, err := os.MkdirTemp("", "release-manifests")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(overlay)
	if base, err = filepath.Rel(overlay, base); err != nil { // kustomize takes no absolute base
		return nil, err
	}
	k := fmt.Sprintf("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - %s\nimages:\n  - name: %s\n    newName: %s\n    newTag: %q\n",
		base, defaultImage, name, tag)
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(k), 0o644); err != nil {
		return nil, err
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), overlay)
	if err != nil {
		return nil, fmt.Errorf("kustomization %s: %w", dir, err)
	}
	y, err := res.AsYaml()
	if err != nil {
		return nil, err
	}
	head := fmt.Sprintf("# etcdplan %s, rendered from %s: kubectl apply --server-side -f <this file>\n", tag, dir)
	return append([]byte(head), y...), nil
}

// cutTag splits "repo/name:tag" at the tag's colon (a registry's port has one too).
func cutTag(image string) (name, tag string, ok bool) {
	i := strings.LastIndexByte(image, ':')
	if i <= 0 || i == len(image)-1 || strings.Contains(image[i:], "/") {
		return "", "", false
	}
	return image[:i], image[i+1:], true
}
