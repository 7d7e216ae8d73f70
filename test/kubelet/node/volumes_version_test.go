package node

import (
	"os"
	"path/filepath"
	"testing"
)

// A refresh switches every file of a volume at once, as a kubelet's atomic writer does:
// files are links through ..data, which one rename points at the new version. A reader that
// opens a certificate and then its key never gets a new one beside an old one; files no
// longer in the volume, and the old version, go.
func TestVolumeVersionsSwitchAtOnce(t *testing.T) {
	dir := t.TempDir()
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), []byte("plain file of an earlier layout"), 0o644); err != nil {
		t.Fatal(err)
	}
	v1 := map[string]file{"tls.crt": {[]byte("crt1"), 0o644}, "tls.key": {[]byte("key1"), 0o600}, "old": {[]byte("x"), 0o644}}
	if err := writeVersion(dir, v1, -1, -1); err != nil {
		t.Fatal(err)
	}
	first, err := os.Readlink(filepath.Join(dir, dataLink))
	if err != nil || read("tls.crt") != "crt1" || read("tls.key") != "key1" {
		t.Fatalf("version 1: link %q (%v), %q %q", first, err, read("tls.crt"), read("tls.key"))
	}
	if target, _ := os.Readlink(filepath.Join(dir, "tls.key")); target != filepath.Join(dataLink, "tls.key") {
		t.Fatalf("tls.key links to %q", target)
	}
	if err := writeVersion(dir, v1, -1, -1); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.Readlink(filepath.Join(dir, dataLink)); again != first {
		t.Fatalf("the same files made a new version: %s then %s", first, again)
	}
	v2 := map[string]file{"tls.crt": {[]byte("crt2"), 0o644}, "tls.key": {[]byte("key2"), 0o600}}
	if err := writeVersion(dir, v2, -1, -1); err != nil {
		t.Fatal(err)
	}
	if read("tls.crt") != "crt2" || read("tls.key") != "key2" {
		t.Fatalf("version 2: %q %q", read("tls.crt"), read("tls.key"))
	}
	if info, err := os.Stat(filepath.Join(dir, first)); err == nil {
		t.Fatalf("the old version is still there: %v", info.Name())
	}
	if _, err := os.Lstat(filepath.Join(dir, "old")); err == nil {
		t.Fatal("a file no longer in the volume is still there")
	}
	if info, err := os.Stat(filepath.Join(dir, dataLink)); err != nil || info.Mode().Perm() != 0o755 {
		t.Fatalf("the version directory is not readable by the container's user: %v %v", info, err)
	}
}
