// Package shim is the last step of starting a container. The kubelet starts
// `localkubelet container-exec <spec file>` in the Pod's network namespace and in a fresh mount
// namespace (`ip netns exec` provides both, plus the Pod's /etc/resolv.conf and /etc/hosts);
// the shim bind-mounts the volumes at their container paths, drops to the container's user and
// replaces itself with the container's binary, keeping its pid.
//
// Containers share the host's root filesystem: only the volume paths differ between them.
package shim

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Mount is a bind mount of a host path at a container path.
type Mount struct {
	Source   string `json:"source"`
	Target   string `json:"target"`
	ReadOnly bool   `json:"readOnly,omitempty"`
}

// Spec is what the shim does; the kubelet writes it as JSON.
type Spec struct {
	// Hostname is set when the shim runs in its own UTS namespace (NewUTS).
	Hostname string  `json:"hostname,omitempty"`
	NewUTS   bool    `json:"newUTS,omitempty"`
	Mounts   []Mount `json:"mounts,omitempty"`
	// UID and GID are the credentials to run with; -1 keeps root's.
	UID        int64    `json:"uid"`
	GID        int64    `json:"gid"`
	Groups     []int    `json:"groups,omitempty"`
	NoNewPrivs bool     `json:"noNewPrivs,omitempty"`
	WorkDir    string   `json:"workDir,omitempty"`
	Path       string   `json:"path"`
	Argv       []string `json:"argv"`
	Env        []string `json:"env"`
	// ParentPID is the kubelet's pid: the shim dies with it.
	ParentPID int `json:"parentPID"`
}

// Write stores the spec for the shim (mode 0600: the environment may hold secrets).
func Write(path string, s Spec) error {
	data, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o600)
}

// Main reads the spec file and execs the container. It returns only on failure.
func Main(specPath string) error {
	data, err := os.ReadFile(specPath)
	if err != nil {
		return err
	}
	var s Spec
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("spec %s: %w", specPath, err)
	}
	return Exec(s)
}

// Exec sets up the process as the spec says and execs the binary.
func Exec(s Spec) error {
	if s.NewUTS && s.Hostname != "" {
		if err := unix.Sethostname([]byte(s.Hostname)); err != nil {
			return fmt.Errorf("sethostname: %w", err)
		}
	}
	if len(s.Mounts) > 0 {
		if err := ownMountNamespace(s.ParentPID); err != nil {
			return err
		}
		if err := mountAll(s.Mounts); err != nil {
			return err
		}
	}
	if s.WorkDir != "" {
		if err := os.MkdirAll(s.WorkDir, 0o755); err != nil {
			return err
		}
		if err := os.Chdir(s.WorkDir); err != nil {
			return err
		}
	}
	if s.NoNewPrivs {
		if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
			return fmt.Errorf("no_new_privs: %w", err)
		}
	}
	if err := setCredentials(s); err != nil {
		return err
	}
	// Changing credentials clears the parent-death signal the kubelet asked for: arm it again,
	// then make sure the kubelet did not die in between.
	if s.ParentPID > 0 {
		if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
			return fmt.Errorf("pdeathsig: %w", err)
		}
		if os.Getppid() != s.ParentPID {
			return errors.New("kubelet exited before the container started")
		}
	}
	return syscall.Exec(s.Path, s.Argv, s.Env)
}

// ownMountNamespace refuses to mount anything in the kubelet's mount namespace: that would
// change the host.
func ownMountNamespace(parent int) error {
	self, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		return err
	}
	for _, pid := range []string{"1", fmt.Sprint(parent)} {
		other, err := os.Readlink("/proc/" + pid + "/ns/mnt")
		if err == nil && other == self {
			return fmt.Errorf("shim is in the mount namespace of pid %s; refusing to mount", pid)
		}
	}
	// Keep our mounts from propagating to the host, whatever the parent set up.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make / rslave: %w", err)
	}
	return nil
}

// mountAll bind-mounts sources at targets, parents before children, creating mount points.
// Every source is opened before the first mount: a volume mounted at /work would otherwise
// hide sources under /work on the host.
func mountAll(mounts []Mount) error {
	sorted := append([]Mount(nil), mounts...)
	sort.SliceStable(sorted, func(i, j int) bool {
		return strings.Count(filepath.Clean(sorted[i].Target), "/") < strings.Count(filepath.Clean(sorted[j].Target), "/")
	})
	srcs := make([]*os.File, len(sorted))
	for i, m := range sorted {
		fd, err := unix.Open(m.Source, unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("volume source %s: %w", m.Source, err)
		}
		srcs[i] = os.NewFile(uintptr(fd), m.Source)
		defer srcs[i].Close()
	}
	for i, m := range sorted {
		if err := bind(srcs[i], m); err != nil {
			return err
		}
	}
	return nil
}

func bind(src *os.File, m Mount) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(src.Fd()), &st); err != nil {
		return fmt.Errorf("volume source %s: %w", m.Source, err)
	}
	var err error
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		err = os.MkdirAll(m.Target, 0o755)
	} else {
		err = touch(m.Target)
	}
	if err != nil {
		return fmt.Errorf("mount point %s: %w", m.Target, err)
	}
	from := fmt.Sprintf("/proc/self/fd/%d", src.Fd())
	if err := unix.Mount(from, m.Target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s at %s: %w", m.Source, m.Target, err)
	}
	if m.ReadOnly {
		flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_RDONLY)
		if err := unix.Mount("", m.Target, "", flags, ""); err != nil {
			return fmt.Errorf("read-only %s: %w", m.Target, err)
		}
	}
	return nil
}

func touch(path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// setCredentials switches to the container's groups and user (Go applies these to every
// thread of the process).
func setCredentials(s Spec) error {
	if s.UID < 0 && s.GID < 0 && len(s.Groups) == 0 {
		return nil
	}
	if err := syscall.Setgroups(s.Groups); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	if s.GID >= 0 {
		if err := syscall.Setgid(int(s.GID)); err != nil {
			return fmt.Errorf("setgid: %w", err)
		}
	}
	if s.UID >= 0 {
		if err := syscall.Setuid(int(s.UID)); err != nil {
			return fmt.Errorf("setuid: %w", err)
		}
	}
	return nil
}
