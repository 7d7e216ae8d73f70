package node

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/etcdplan/etcdplan/test/kubelet/imagemap"
	"github.com/etcdplan/etcdplan/test/kubelet/shim"
)

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// shimSpec describes how the shim starts a container: mounts, user, environment, binary.
func (w *podWorker) shimSpec(c *v1.Container, res imagemap.Resolved, env []kv) (shim.Spec, error) {
	pod := w.podCopy()
	mounts, err := w.mounts(c, envLookup(env))
	if err != nil {
		return shim.Spec{}, err
	}
	uid, gid, groups, err := credentials(pod, c, res.User)
	if err != nil {
		return shim.Spec{}, err
	}
	return shim.Spec{
		Hostname:   podHostname(pod),
		NewUTS:     !pod.Spec.HostNetwork,
		Mounts:     mounts,
		UID:        uid,
		GID:        gid,
		Groups:     groups,
		NoNewPrivs: c.SecurityContext != nil && c.SecurityContext.AllowPrivilegeEscalation != nil && !*c.SecurityContext.AllowPrivilegeEscalation,
		WorkDir:    c.WorkingDir,
		Path:       res.Path,
		Argv:       res.Argv,
		Env:        processEnv(pod, res, env, uid),
		ParentPID:  os.Getpid(),
	}, nil
}

// processEnv layers the environment: PATH (the image's binaries first), HOSTNAME and HOME
// (/ for non-root users, as runtimes do for users the image does not know), the image's env,
// then the container's.
func processEnv(pod *v1.Pod, res imagemap.Resolved, env []kv, uid int64) []string {
	home := "/root"
	if uid > 0 {
		home = "/"
	}
	all := []kv{{"PATH", res.Dir + ":" + defaultPath}, {"HOSTNAME", podHostname(pod)}, {"HOME", home}}
	set := func(name, value string) {
		for i := range all {
			if all[i].name == name {
				all[i].value = value
				return
			}
		}
		all = append(all, kv{name, value})
	}
	for k, v := range res.Env {
		set(k, v)
	}
	for _, e := range env {
		set(e.name, e.value)
	}
	out := make([]string, len(all))
	for i, e := range all {
		out[i] = e.name + "=" + e.value
	}
	return out
}

// mounts maps the container's volumeMounts to host paths (subPath included).
func (w *podWorker) mounts(c *v1.Container, lookup func(string) (string, bool)) ([]shim.Mount, error) {
	w.mu.Lock()
	vols := w.volumes
	w.mu.Unlock()
	var mounts []shim.Mount
	for _, m := range c.VolumeMounts {
		src, ok := vols[m.Name]
		if !ok {
			return nil, fmt.Errorf("volume %s is not ready", m.Name)
		}
		sub := m.SubPath
		if m.SubPathExpr != "" {
			sub = expand(m.SubPathExpr, lookup)
		}
		if sub != "" {
			if strings.Contains(sub, "..") || filepath.IsAbs(sub) {
				return nil, fmt.Errorf("bad subPath %q", sub)
			}
			src = filepath.Join(src, sub)
			if _, err := os.Stat(src); os.IsNotExist(err) {
				if err := os.MkdirAll(src, 0o777); err != nil {
					return nil, err
				}
			}
		}
		mounts = append(mounts, shim.Mount{Source: src, Target: m.MountPath, ReadOnly: m.ReadOnly})
	}
	return mounts, nil
}

// credentials resolves the user, group and supplementary groups of a container, checking
// runAsNonRoot. Root with no extra groups keeps the shim's credentials (-1).
func credentials(pod *v1.Pod, c *v1.Container, imageUser *int64) (uid, gid int64, groups []int, err error) {
	uid, gid = 0, 0
	if imageUser != nil {
		uid = *imageUser
	}
	nonRoot := false
	if sc := pod.Spec.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = *sc.RunAsGroup
		}
		if sc.RunAsNonRoot != nil {
			nonRoot = *sc.RunAsNonRoot
		}
		if sc.FSGroup != nil {
			groups = append(groups, int(*sc.FSGroup))
		}
		for _, g := range sc.SupplementalGroups {
			groups = append(groups, int(g))
		}
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.RunAsUser != nil {
			uid = *sc.RunAsUser
		}
		if sc.RunAsGroup != nil {
			gid = *sc.RunAsGroup
		}
		if sc.RunAsNonRoot != nil {
			nonRoot = *sc.RunAsNonRoot
		}
	}
	if nonRoot && uid == 0 {
		return 0, 0, nil, fmt.Errorf("container has runAsNonRoot and image will run as root")
	}
	if uid == 0 && gid == 0 && len(groups) == 0 {
		return -1, -1, nil, nil
	}
	return uid, gid, append([]int{int(gid)}, groups...), nil
}

// podHostname is the Pod's hostname: spec.hostname or the Pod's name, at most 63 bytes.
func podHostname(pod *v1.Pod) string {
	h := pod.Spec.Hostname
	if h == "" {
		h = pod.Name
	}
	if len(h) > 63 {
		h = strings.TrimRight(h[:63], "-.")
	}
	return h
}
