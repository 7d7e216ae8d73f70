package stack

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The versions the stack runs are the versions test/stack.mk builds.
func TestVersionsMatchMakefile(t *testing.T) {
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	mk, err := os.ReadFile(filepath.Join(root, "test", "stack.mk"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"KUBE_VERSION": KubeVersion, "ETCD_VERSION": EtcdVersion, "ETCD_PREV_VERSION": EtcdPrevVersion, "MINIO_VERSION": MinioVersion, "FAKE_GCS_VERSION": FakeGCSVersion,
		"FLUX_SOURCE_VERSION": FluxSourceVersion, "FLUX_KUSTOMIZE_VERSION": FluxKustomizeVersion,
		"CERT_MANAGER_VERSION": CertManagerVersion,
	} {
		m := regexp.MustCompile(`(?m)^` + name + ` := (\S+)$`).FindSubmatch(mk)
		if m == nil {
			t.Errorf("test/stack.mk sets no %s", name)
			continue
		}
		if string(m[1]) != want {
			t.Errorf("test/stack.mk: %s = %s, package stack says %s", name, m[1], want)
		}
	}
}

func TestImageRules(t *testing.T) {
	l := layout{root: "/repo"}
	rules := imageRules(l)
	resolve := func(image string) (dir, entry string) {
		for _, r := range rules {
			re := regexp.MustCompile(r.Pattern)
			m := re.FindStringSubmatchIndex(image)
			if m == nil {
				continue
			}
			return string(re.ExpandString(nil, r.Dir, image, m)), r.Entrypoint
		}
		return "", ""
	}
	for _, c := range []struct{ image, dir, entry string }{
		{"quay.io/coreos/etcd:v3.6.16", "/repo/bin/etcd-v3.6.16", "etcd"},
		{"gcr.io/etcd-development/etcd:v3.5.35", "/repo/bin/etcd-v3.5.35", "etcd"},
		{"registry.k8s.io/etcd:3.6.16-0", "/repo/bin/etcd-v3.6.16", "etcd"},
		{"etcd:3.5.35", "/repo/bin/etcd-v3.5.35", "etcd"},
		{"localhost:5000/team/my-etcd:v3.6.16@sha256:" + strings.Repeat("a", 64), "/repo/bin/etcd-v3.6.16", "etcd"},
		{"ghcr.io/etcdplan/etcdplan:dev", "/repo/bin", "manager"},
		{"etcdplan", "/repo/bin", "manager"},
		{"localhost:5000/etcdplan:v0.1.0", "/repo/bin", "manager"},
		{"ghcr.io/fluxcd/source-controller:v1.9.6", "/repo/bin/flux-source-controller-v1.9.6", "source-controller"},
		{"fluxcd/kustomize-controller:v1.9.5", "/repo/bin/flux-kustomize-controller-v1.9.5", "kustomize-controller"},
		{"ghcr.io/fluxcd/source-controller:latest", "", ""},
		{"quay.io/jetstack/cert-manager-controller:v1.21.2", "/repo/bin/cert-manager-v1.21.2", "cert-manager"},
		{"quay.io/jetstack/cert-manager-webhook:v1.21.2", "", ""},
		{"busybox", "/bin", "sh"},
		{"docker.io/library/busybox:1.37", "/bin", "sh"},
		{"nginx:1.27", "", ""},
		{"quay.io/coreos/etcd:latest", "", ""},
		{"etcd-backup:v3.6.16", "", ""},
	} {
		dir, entry := resolve(c.image)
		if dir != c.dir || entry != c.entry {
			t.Errorf("%s -> %q %q, want %q %q", c.image, dir, entry, c.dir, c.entry)
		}
	}
}

func TestNodes(t *testing.T) {
	if got := strings.Join(Nodes(), ","); got != "node-1,node-2,node-3" {
		t.Fatalf("Nodes() = %s", got)
	}
	l := layout{root: "/repo"}
	if a, err := l.adminAddr("node-2"); err != nil || a != "127.0.0.1:10252" {
		t.Fatalf("adminAddr(node-2) = %q, %v", a, err)
	}
	if _, err := l.adminAddr("node-4"); err == nil {
		t.Fatal("adminAddr(node-4) did not fail")
	}
	l.n = 3
	if a, _ := l.adminAddr("node-2"); a != "127.0.0.1:10552" || l.kubeletAPIAddr("node-1") != "10.91.0.1:10561" {
		t.Fatalf("stack 3: adminAddr(node-2) = %q, kubeletAPIAddr(node-1) = %q", a, l.kubeletAPIAddr("node-1"))
	}
	if l.n.Bridge() != "etcdplan3" || l.n.NetnsPrefix() != "lk3-" || l.n.podCIDR(2) != "10.91.2.0/24" || l.n.APIServerPort() != 6743 {
		t.Fatalf("stack 3: %s %s %s %d", l.n.Bridge(), l.n.NetnsPrefix(), l.n.podCIDR(2), l.n.APIServerPort())
	}
}

func TestIsMainModule(t *testing.T) {
	if !isMainModule([]byte("// x\nmodule github.com/etcdplan/etcdplan\n\ngo 1.26\n")) {
		t.Fatal("main module not recognised")
	}
	if isMainModule([]byte("module github.com/etcdplan/etcdplan/test/tools/kube\n")) {
		t.Fatal("tools module taken for the main module")
	}
}
