package stack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	ocilayout "github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The real node has no registry: its images are OCI archives written from static builds
// (test/stack.mk: real-node-bins) and imported into its containerd when it starts, under the
// names the operator and the tests already use. Pods on node-4 need imagePullPolicy
// IfNotPresent (the default for a tag other than latest).
const (
	// PauseImage is the real node's sandbox image, and the self-tests' tool (pause cat,
	// alloc, serve: see test/stack/cmd/pause).
	PauseImage = "registry.k8s.io/pause:3.10.1"
	// OperatorImage is the operator's image as the tests name it.
	OperatorImage = "ghcr.io/etcdplan/etcdplan:dev"
	// EtcdRepository is the etcd images' repository; tags are v<version>.
	EtcdRepository = "quay.io/coreos/etcd"
)

// imageFile is one file of an image: its path inside, its mode, and where it comes from (a
// file on the host) or what it holds.
type imageFile struct {
	path string
	mode int64
	from string
	data []byte
}

// ociImage is an image the real node imports.
type ociImage struct {
	name       string // full reference
	archive    string // the OCI archive under bin/
	files      []imageFile
	entrypoint []string
	user       string
	env        []string
}

// staticBin is where test/stack.mk puts the static (CGO_ENABLED=0) builds the images hold.
func (l layout) staticBin(parts ...string) string {
	return l.bin(append([]string{"static"}, parts...)...)
}

// passwd and group name root and the nonroot user (65532) the images and Pods run as.
var (
	passwdFile = []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")
	groupFile  = []byte("root:x:0:\nnonroot:x:65532:\n")
)

// realNodeImages lists the images the real node imports: etcd of every version the tests
// run, the operator and the pause image.
func realNodeImages(l layout) []ociImage {
	base := []imageFile{
		{path: "etc/passwd", mode: 0o644, data: passwdFile},
		{path: "etc/group", mode: 0o644, data: groupFile},
	}
	var out []ociImage
	for _, v := range []string{EtcdVersion, EtcdPrevVersion} {
		files := append([]imageFile(nil), base...)
		for _, cmd := range []string{"etcd", "etcdctl", "etcdutl"} {
			files = append(files, imageFile{path: "usr/local/bin/" + cmd, mode: 0o755, from: l.staticBin("etcd-"+v, cmd)})
		}
		out = append(out, ociImage{
			name: EtcdRepository + ":" + v, archive: l.bin("images", "etcd-"+v+".tar"), files: files,
			entrypoint: []string{"/usr/local/bin/etcd"},
			env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
		})
	}
	out = append(out,
		ociImage{name: OperatorImage, archive: l.bin("images", "etcdplan.tar"),
			files:      append(append([]imageFile(nil), base...), imageFile{path: "manager", mode: 0o755, from: l.staticBin("manager")}),
			entrypoint: []string{"/manager"}, user: "65532:65532"},
		ociImage{name: PauseImage, archive: l.bin("images", "pause.tar"),
			files:      append(append([]imageFile(nil), base...), imageFile{path: "pause", mode: 0o755, from: l.staticBin("pause")}),
			entrypoint: []string{"/pause"}, user: "65535:65535"},
	)
	return out
}

// ensureArchive writes the image's OCI archive unless one newer than every file it holds
// exists.
func (im ociImage) ensureArchive() (bool, error) {
	if st, err := os.Stat(im.archive); err == nil {
		fresh := true
		for _, f := range im.files {
			if f.from == "" {
				continue
			}
			fst, err := os.Stat(f.from)
			if err != nil {
				return false, fmt.Errorf("stack: %s: %w (build it with `make real-node-bins`)", im.name, err)
			}
			if fst.ModTime().After(st.ModTime()) {
				fresh = false
			}
		}
		if fresh {
			return false, nil
		}
	}
	return true, im.write()
}

// write builds the image (one layer on an empty base) and writes it as an OCI archive: an
// OCI layout (oci-layout, index.json, blobs) in a tar, the image named in index.json.
func (im ociImage) write() error {
	layerTar, err := im.layer()
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config.Entrypoint = im.entrypoint
	cf.Config.User = im.user
	cf.Config.Env = im.env
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(filepath.Dir(filepath.Dir(im.archive)), ".image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := ocilayout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	tag := im.name[strings.LastIndex(im.name, ":")+1:]
	if err := p.AppendImage(img, ocilayout.WithAnnotations(map[string]string{
		"io.containerd.image.name":          im.name,
		"org.opencontainers.image.ref.name": tag,
	})); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(im.archive), 0o755); err != nil {
		return err
	}
	tmp := im.archive + ".tmp"
	if err := tarDir(dir, tmp); err != nil {
		return err
	}
	return os.Rename(tmp, im.archive)
}

// layer is the image's one layer, uncompressed: its directories, then its files.
func (im ociImage) layer() ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	dirs := map[string]bool{}
	addDir := func(d string, mode int64) error {
		if d == "." || dirs[d] {
			return nil
		}
		dirs[d] = true
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: epoch})
	}
	if err := addDir("tmp", 0o1777); err != nil {
		return nil, err
	}
	for _, f := range im.files {
		var parents []string
		for d := filepath.Dir(f.path); d != "."; d = filepath.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if err := addDir(d, 0o755); err != nil {
				return nil, err
			}
		}
		data := f.data
		if f.from != "" {
			b, err := os.ReadFile(f.from)
			if err != nil {
				return nil, fmt.Errorf("stack: image %s: %w (build it with `make real-node-bins`)", im.name, err)
			}
			data = b
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: f.path, Mode: f.mode, Size: int64(len(data)), ModTime: epoch}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// tarDir writes the files under dir into the tar file out, paths relative to dir.
func tarDir(dir, out string) error {
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(f)
	err = filepath.Walk(dir, func(path string, info os.FileInfo, err error) error {
		if err != nil || path == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if info.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.IsDir() {
			return nil
		}
		src, err := os.Open(path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(tw, src)
		return err
	})
	if cerr := tw.Close(); err == nil {
		err = cerr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// importImages writes any missing or stale archive and imports every image into the real
// node's containerd (namespace k8s.io, where the CRI plugin looks).
func importImages(ctx context.Context, l layout, log logger) error {
	for _, im := range realNodeImages(l) {
		start := time.Now()
		wrote, err := im.ensureArchive()
		if err != nil {
			return err
		}
		if wrote {
			log.printf("wrote %s (%s) in %.1f s", im.archive, im.name, time.Since(start).Seconds())
		}
		cmd := exec.CommandContext(ctx, l.containerdBin("ctr"), "--address", l.realNode("containerd.sock"),
			"-n", "k8s.io", "images", "import", im.archive)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("stack: importing %s: %v: %s", im.archive, err, bytes.TrimSpace(out))
		}
	}
	return nil
}
