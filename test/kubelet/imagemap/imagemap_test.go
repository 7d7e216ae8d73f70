package imagemap

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func writeBin(t *testing.T, dir, name string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestResolve(t *testing.T) {
	root := t.TempDir()
	etcd := writeBin(t, filepath.Join(root, "etcd-v3.6.16"), "etcd")
	etcdctl := writeBin(t, filepath.Join(root, "etcd-v3.6.16"), "etcdctl")
	manager := writeBin(t, filepath.Join(root, "op"), "manager")
	file := filepath.Join(root, "images.json")
	data := `[
	 {"pattern": "quay.io/coreos/etcd:(?P<version>v[0-9.]+)", "dir": "` + root + `/etcd-${version}", "entrypoint": "etcd"},
	 {"pattern": "ghcr.io/etcdplan/manager:.*", "dir": "` + root + `/op", "entrypoint": "manager", "args": ["--leader-elect"], "user": 65532}
	]`
	if err := os.WriteFile(file, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name          string
		image         string
		command, args []string
		path          string
		argv          []string
		wantErr       bool
	}{
		{name: "entrypoint", image: "quay.io/coreos/etcd:v3.6.16", args: []string{"--name=a"},
			path: etcd, argv: []string{etcd, "--name=a"}},
		{name: "command by base name", image: "quay.io/coreos/etcd:v3.6.16",
			command: []string{"/usr/local/bin/etcdctl", "get"}, args: []string{"k"},
			path: etcdctl, argv: []string{"/usr/local/bin/etcdctl", "get", "k"}},
		{name: "image default args", image: "ghcr.io/etcdplan/manager:dev",
			path: manager, argv: []string{manager, "--leader-elect"}},
		{name: "args replace default args", image: "ghcr.io/etcdplan/manager:dev", args: []string{"-v"},
			path: manager, argv: []string{manager, "-v"}},
		{name: "missing version", image: "quay.io/coreos/etcd:v3.4.0", wantErr: true},
		{name: "unknown command", image: "quay.io/coreos/etcd:v3.6.16", command: []string{"/bin/sh"}, wantErr: true},
		{name: "unmapped image", image: "busybox", wantErr: true},
		{name: "pattern is anchored", image: "xquay.io/coreos/etcd:v3.6.16", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := m.Resolve(tt.image, tt.command, tt.args)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("want error, got %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Path != tt.path || !reflect.DeepEqual(got.Argv, tt.argv) {
				t.Fatalf("got %s %q, want %s %q", got.Path, got.Argv, tt.path, tt.argv)
			}
		})
	}
	got, _ := m.Resolve("ghcr.io/etcdplan/manager:dev", nil, nil)
	if got.User == nil || *got.User != 65532 {
		t.Fatalf("user not carried: %+v", got.User)
	}
}

func TestBadPattern(t *testing.T) {
	if _, err := Parse([]byte(`[{"pattern": "(", "dir": "x"}]`)); err == nil {
		t.Fatal("want error for a bad regexp")
	}
	if _, err := Parse([]byte(`[{"pattern": "x"}]`)); err == nil {
		t.Fatal("want error for a rule without dir")
	}
}
