package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	authenticationv1 "k8s.io/api/authentication/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// prepareVolumes makes every volume of the Pod available as a host path. PVC volumes wait
// until their claim is bound; Secret, ConfigMap, projected and downward API volumes are
// written as files under the Pod's directory.
func (w *podWorker) prepareVolumes() error {
	pod := w.podCopy()
	paths := map[string]string{}
	for _, vol := range pod.Spec.Volumes {
		p, err := w.prepareVolume(w.ctx, pod, vol)
		if err != nil {
			return fmt.Errorf("volume %s: %w", vol.Name, err)
		}
		paths[vol.Name] = p
	}
	if err := w.setOwnership(pod, paths); err != nil {
		return err
	}
	w.mu.Lock()
	w.volumes = paths
	w.mu.Unlock()
	return nil
}

func (w *podWorker) volumeDir(name string) string {
	return filepath.Join(w.dir, "volumes", name)
}

func (w *podWorker) prepareVolume(ctx context.Context, pod *v1.Pod, vol v1.Volume) (string, error) {
	src := vol.VolumeSource
	dir := w.volumeDir(vol.Name)
	switch {
	case src.EmptyDir != nil:
		return dir, w.emptyDir(dir, src.EmptyDir)
	case src.HostPath != nil:
		t := src.HostPath.Type
		if t != nil && (*t == v1.HostPathDirectoryOrCreate) {
			if err := os.MkdirAll(src.HostPath.Path, 0o755); err != nil {
				return "", err
			}
		}
		return src.HostPath.Path, nil
	case src.PersistentVolumeClaim != nil:
		return w.claimPath(ctx, pod.Namespace, src.PersistentVolumeClaim.ClaimName)
	case src.Ephemeral != nil:
		return w.claimPath(ctx, pod.Namespace, pod.Name+"-"+vol.Name)
	case src.Secret != nil, src.ConfigMap != nil, src.Projected != nil, src.DownwardAPI != nil:
		return dir, w.writeFiles(ctx, pod, vol)
	}
	return "", errors.New("volume type not supported by the local kubelet")
}

// emptyDir creates the directory (mode 0777, like Kubernetes); medium Memory mounts a tmpfs.
func (w *podWorker) emptyDir(dir string, src *v1.EmptyDirVolumeSource) error {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return err
	}
	if src.Medium != v1.StorageMediumMemory || isMountPoint(dir) {
		return nil
	}
	opts := "mode=0777"
	if src.SizeLimit != nil && !src.SizeLimit.IsZero() {
		opts += fmt.Sprintf(",size=%d", src.SizeLimit.Value())
	}
	return unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts)
}

func isMountPoint(dir string) bool {
	var a, b unix.Stat_t
	if unix.Stat(dir, &a) != nil || unix.Stat(filepath.Dir(dir), &b) != nil {
		return false
	}
	return a.Dev != b.Dev
}

// claimPath returns the directory of a bound claim's volume; it fails while unbound, which
// makes setup retry.
func (w *podWorker) claimPath(ctx context.Context, ns, name string) (string, error) {
	core := w.k.client.CoreV1()
	pvc, err := core.PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("claim %s: %w", name, err)
	}
	if pvc.Status.Phase != v1.ClaimBound || pvc.Spec.VolumeName == "" {
		return "", fmt.Errorf("claim %s is not bound yet", name)
	}
	pv, err := core.PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("volume %s: %w", pvc.Spec.VolumeName, err)
	}
	var path string
	switch {
	case pv.Spec.HostPath != nil:
		path = pv.Spec.HostPath.Path
	case pv.Spec.Local != nil:
		path = pv.Spec.Local.Path
	default:
		return "", fmt.Errorf("volume %s is neither hostPath nor local", pv.Name)
	}
	if err := os.MkdirAll(path, 0o777); err != nil {
		return "", err
	}
	return path, nil
}

// owner is who a Pod's writable volumes belong to: the Pod's user and fsGroup (-1: unchanged).
func podOwner(pod *v1.Pod) (uid, gid int64) {
	uid, gid = -1, -1
	if sc := pod.Spec.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = *sc.RunAsUser
		}
		if sc.FSGroup != nil {
			gid = *sc.FSGroup
		}
	}
	if uid < 0 {
		// Containers that all set the same user count as the Pod's user.
		for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
			if c.SecurityContext == nil || c.SecurityContext.RunAsUser == nil {
				continue
			}
			if uid >= 0 && uid != *c.SecurityContext.RunAsUser {
				return -1, gid
			}
			uid = *c.SecurityContext.RunAsUser
		}
	}
	return uid, gid
}

// setOwnership gives the Pod's writable volumes (emptyDir, claims) and its API-written files
// to the Pod's user and fsGroup, group-writable, as the kubelet does with fsGroup.
func (w *podWorker) setOwnership(pod *v1.Pod, paths map[string]string) error {
	uid, gid := podOwner(pod)
	if uid < 0 && gid < 0 {
		return nil
	}
	for _, vol := range pod.Spec.Volumes {
		if vol.HostPath != nil {
			continue
		}
		root := paths[vol.Name]
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if err := os.Lchown(path, int(uid), int(gid)); err != nil {
				return err
			}
			if gid < 0 || d.Type()&fs.ModeSymlink != 0 {
				return nil
			}
			info, err := d.Info()
			if err != nil {
				return err
			}
			mode := info.Mode().Perm() | 0o060
			if d.IsDir() {
				mode |= 0o010 | fs.ModeSetgid
			}
			return os.Chmod(path, mode)
		})
		if err != nil {
			return fmt.Errorf("volume %s ownership: %w", vol.Name, err)
		}
	}
	return nil
}

// token is a service-account token written into a projected volume.
type token struct {
	value   string
	expires time.Time
	issued  time.Time
}

// writeFiles renders a Secret, ConfigMap, projected or downward API volume into its
// directory. As a kubelet's atomic writer does, the files of one version are written into a
// directory of their own and switched to at once (writeVersion): a refresh never shows half a
// file, nor a new file beside an old one (a new certificate beside its old key).
func (w *podWorker) writeFiles(ctx context.Context, pod *v1.Pod, vol v1.Volume) error {
	files := map[string]file{}
	src := vol.VolumeSource
	var err error
	switch {
	case src.Secret != nil:
		err = w.secretFiles(ctx, pod.Namespace, src.Secret.SecretName, src.Secret.Items,
			src.Secret.Optional, mode(src.Secret.DefaultMode), files)
	case src.ConfigMap != nil:
		err = w.configMapFiles(ctx, pod.Namespace, src.ConfigMap.Name, src.ConfigMap.Items,
			src.ConfigMap.Optional, mode(src.ConfigMap.DefaultMode), files)
	case src.DownwardAPI != nil:
		err = w.downwardFiles(pod, src.DownwardAPI.Items, mode(src.DownwardAPI.DefaultMode), files)
	case src.Projected != nil:
		err = w.projectedFiles(ctx, pod, vol.Name, src.Projected, files)
	}
	if err != nil {
		return err
	}
	dir := w.volumeDir(vol.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	uid, gid := podOwner(pod)
	return writeVersion(dir, files, uid, gid)
}

// dataLink names the link to the current version's directory; each file of the volume is a
// link through it (<file> -> ..data/<file>), as a kubelet lays them out.
const dataLink = "..data"

// writeVersion writes files into a new version directory, unless the current version holds
// exactly them, then points ..data at it in one rename, links each file through ..data,
// and removes the files and the version no longer shown.
func writeVersion(dir string, files map[string]file, uid, gid int64) error {
	if same(dir, files) {
		return nil
	}
	version, err := os.MkdirTemp(dir, "..version-")
	if err != nil {
		return err
	}
	if err := os.Chmod(version, 0o755); err != nil { // MkdirTemp makes it 0700: containers run as other users
		return err
	}
	for rel, f := range files {
		if strings.Contains(rel, "..") {
			return fmt.Errorf("bad path %s", rel)
		}
		if err := writeAtomic(filepath.Join(version, rel), f, uid, gid); err != nil {
			return err
		}
	}
	tmp := filepath.Join(dir, dataLink+".tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(version), tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, dataLink)); err != nil {
		return err
	}
	tops := map[string]bool{} // the volume's top-level names, each a link through ..data
	for rel := range files {
		tops[strings.SplitN(rel, "/", 2)[0]] = true
	}
	for top := range tops {
		if target, _ := os.Readlink(filepath.Join(dir, top)); target == filepath.Join(dataLink, top) {
			continue
		}
		link := filepath.Join(dir, top+".tmp")
		_ = os.Remove(link)
		if err := os.Symlink(filepath.Join(dataLink, top), link); err != nil {
			return err
		}
		if err := os.Rename(link, filepath.Join(dir, top)); err != nil {
			_ = os.RemoveAll(filepath.Join(dir, top)) // a directory of an earlier layout
			if err := os.Rename(link, filepath.Join(dir, top)); err != nil {
				return err
			}
		}
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		name := e.Name()
		stale := strings.HasPrefix(name, "..version-") && name != filepath.Base(version)
		if stale || !strings.HasPrefix(name, "..") && !tops[name] {
			_ = os.RemoveAll(filepath.Join(dir, name))
		}
	}
	return nil
}

// same: the version ..data points at holds exactly these files.
func same(dir string, files map[string]file) bool {
	cur := filepath.Join(dir, dataLink)
	if _, err := os.Readlink(cur); err != nil {
		return false
	}
	n := 0
	err := filepath.WalkDir(cur+"/", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		n++
		rel, _ := filepath.Rel(cur, path)
		f, ok := files[rel]
		data, rerr := os.ReadFile(path)
		if !ok || rerr != nil || string(data) != string(f.data) {
			return errors.New("differs")
		}
		return nil
	})
	return err == nil && n == len(files)
}

type file struct {
	data []byte
	mode os.FileMode
}

func mode(m *int32) os.FileMode {
	if m == nil {
		return 0o644
	}
	return os.FileMode(*m)
}

func itemMode(m *int32, def os.FileMode) os.FileMode {
	if m == nil {
		return def
	}
	return os.FileMode(*m)
}

func writeAtomic(path string, f file, uid, gid int64) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, f.data, f.mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, f.mode); err != nil {
		return err
	}
	if uid >= 0 || gid >= 0 {
		if err := os.Lchown(tmp, int(uid), int(gid)); err != nil {
			return err
		}
	}
	return os.Rename(tmp, path)
}

func (w *podWorker) secretFiles(ctx context.Context, ns, name string, items []v1.KeyToPath, optional *bool, def os.FileMode, files map[string]file) error {
	s, err := w.k.client.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if isOptional(optional) {
			return nil
		}
		return fmt.Errorf("secret %s: %w", name, err)
	}
	return project(s.Data, items, optional, def, files, "secret "+name)
}

func (w *podWorker) configMapFiles(ctx context.Context, ns, name string, items []v1.KeyToPath, optional *bool, def os.FileMode, files map[string]file) error {
	cm, err := w.k.client.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		if isOptional(optional) {
			return nil
		}
		return fmt.Errorf("configmap %s: %w", name, err)
	}
	data := map[string][]byte{}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	return project(data, items, optional, def, files, "configmap "+name)
}

// project picks keys into files: all keys by name, or the listed items at their paths.
func project(data map[string][]byte, items []v1.KeyToPath, optional *bool, def os.FileMode, files map[string]file, what string) error {
	if len(items) == 0 {
		for k, v := range data {
			files[k] = file{v, def}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if isOptional(optional) {
				continue
			}
			return fmt.Errorf("%s has no key %s", what, it.Key)
		}
		files[it.Path] = file{v, itemMode(it.Mode, def)}
	}
	return nil
}

func (w *podWorker) downwardFiles(pod *v1.Pod, items []v1.DownwardAPIVolumeFile, def os.FileMode, files map[string]file) error {
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = w.fieldValue(pod, it.FieldRef.FieldPath)
		case it.ResourceFieldRef != nil:
			c := &pod.Spec.Containers[0]
			v, err = w.resourceValue(pod, c, it.ResourceFieldRef)
		}
		if err != nil {
			return err
		}
		files[it.Path] = file{[]byte(v), itemMode(it.Mode, def)}
	}
	return nil
}

func (w *podWorker) projectedFiles(ctx context.Context, pod *v1.Pod, volName string, p *v1.ProjectedVolumeSource, files map[string]file) error {
	def := mode(p.DefaultMode)
	for i, s := range p.Sources {
		var err error
		switch {
		case s.Secret != nil:
			err = w.secretFiles(ctx, pod.Namespace, s.Secret.Name, s.Secret.Items, s.Secret.Optional, def, files)
		case s.ConfigMap != nil:
			err = w.configMapFiles(ctx, pod.Namespace, s.ConfigMap.Name, s.ConfigMap.Items, s.ConfigMap.Optional, def, files)
		case s.DownwardAPI != nil:
			err = w.downwardFiles(pod, s.DownwardAPI.Items, def, files)
		case s.ServiceAccountToken != nil:
			var t string
			t, err = w.serviceAccountToken(ctx, pod, fmt.Sprintf("%s/%d", volName, i), s.ServiceAccountToken)
			files[s.ServiceAccountToken.Path] = file{[]byte(t), def}
		default:
			err = errors.New("projected source not supported by the local kubelet")
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// serviceAccountToken returns a token bound to the Pod, requesting a new one when the cached
// one has lived 80% of its life (the kubelet's rule).
func (w *podWorker) serviceAccountToken(ctx context.Context, pod *v1.Pod, key string, src *v1.ServiceAccountTokenProjection) (string, error) {
	w.mu.Lock()
	t := w.tokens[key]
	w.mu.Unlock()
	if t != nil && time.Since(t.issued) < t.expires.Sub(t.issued)*8/10 {
		return t.value, nil
	}
	exp := int64(3600)
	if src.ExpirationSeconds != nil {
		exp = *src.ExpirationSeconds
	}
	req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: &exp,
		BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}
	if src.Audience != "" {
		req.Spec.Audiences = []string{src.Audience}
	}
	sa := pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	resp, err := w.k.client.CoreV1().ServiceAccounts(pod.Namespace).CreateToken(ctx, sa, req, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for service account %s: %w", sa, err)
	}
	t = &token{value: resp.Status.Token, expires: resp.Status.ExpirationTimestamp.Time, issued: time.Now()}
	w.mu.Lock()
	w.tokens[key] = t
	w.mu.Unlock()
	return t.value, nil
}

// refreshVolumes rewrites the API-backed volumes now and then, as the kubelet does, so
// rotated Secrets and tokens reach running containers.
func (w *podWorker) refreshVolumes() {
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-w.ctx.Done():
			return
		case <-tick.C:
		}
		pod := w.podCopy()
		for _, vol := range pod.Spec.Volumes {
			s := vol.VolumeSource
			if s.Secret != nil || s.ConfigMap != nil || s.Projected != nil || s.DownwardAPI != nil {
				_ = w.writeFiles(w.ctx, pod, vol)
			}
		}
	}
}
