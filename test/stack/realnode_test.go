package stack

import (
	"archive/tar"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The real node's versions are the versions test/stack.mk builds.
func TestRealNodeVersionsMatchMakefile(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "test", "stack.mk"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"CONTAINERD_VERSION": ContainerdVersion, "CNI_PLUGINS_VERSION": CNIPluginsVersion} {
		m := regexp.MustCompile(`(?m)^` + name + ` := (\S+)$`).FindSubmatch(mk)
		if m == nil || string(m[1]) != want {
			t.Errorf("test/stack.mk: %s = %q, package stack says %s", name, m, want)
		}
	}
}

// An image archive is an OCI layout in a tar, named in index.json as containerd's import
// reads it, its one layer holding the files with their modes.
func TestImageArchive(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "tool")
	if err := os.WriteFile(bin, []byte("#!binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	im := ociImage{name: "example.org/tool:v1", archive: filepath.Join(dir, "images", "tool.tar"),
		files:      []imageFile{{path: "usr/local/bin/tool", mode: 0o755, from: bin}, {path: "etc/passwd", mode: 0o644, data: passwdFile}},
		entrypoint: []string{"/usr/local/bin/tool"}, user: "65532:65532"}
	if wrote, err := im.ensureArchive(); err != nil || !wrote {
		t.Fatalf("ensureArchive: %v %v", wrote, err)
	}
	if wrote, err := im.ensureArchive(); err != nil || wrote {
		t.Fatalf("a second ensureArchive wrote again: %v %v", wrote, err)
	}
	f, err := os.Open(im.archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = b
	}
	if _, ok := files["oci-layout"]; !ok {
		t.Fatalf("no oci-layout in %v", files)
	}
	var index struct {
		Manifests []struct {
			Digest      string            `json:"digest"`
			Annotations map[string]string `json:"annotations"`
		} `json:"manifests"`
	}
	if err := json.Unmarshal(files["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		t.Fatalf("index.json %s: %v", files["index.json"], err)
	}
	m := index.Manifests[0]
	if m.Annotations["io.containerd.image.name"] != im.name || m.Annotations["org.opencontainers.image.ref.name"] != "v1" {
		t.Fatalf("annotations %v", m.Annotations)
	}
	manifest := files["blobs/sha256/"+strings.TrimPrefix(m.Digest, "sha256:")]
	var man struct {
		Config struct{ Digest string }   `json:"config"`
		Layers []struct{ Digest string } `json:"layers"`
	}
	if err := json.Unmarshal(manifest, &man); err != nil || len(man.Layers) != 1 {
		t.Fatalf("manifest %s: %v", manifest, err)
	}
	var cfg struct {
		Config struct {
			Entrypoint []string
			User       string
		} `json:"config"`
	}
	if err := json.Unmarshal(files["blobs/sha256/"+strings.TrimPrefix(man.Config.Digest, "sha256:")], &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/usr/local/bin/tool" {
		t.Fatalf("config %+v", cfg.Config)
	}
	layer, err := im.layer()
	if err != nil {
		t.Fatal(err)
	}
	lt := tar.NewReader(strings.NewReader(string(layer)))
	var names []string
	for {
		h, err := lt.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Name == "usr/local/bin/tool" && h.Mode != 0o755 {
			t.Errorf("tool's mode %o", h.Mode)
		}
	}
	if got := strings.Join(names, " "); got != "tmp/ usr/ usr/local/ usr/local/bin/ usr/local/bin/tool etc/ etc/passwd" {
		t.Fatalf("layer: %s", got)
	}
}
