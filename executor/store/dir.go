package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Dir is a directory on a mounted volume: a pvc destination, seen from a Pod that mounts
// its claim. Objects are files; a file appears under its key only once complete and on disk.
type Dir struct {
	root string
	uri  func(key string) string
}

// NewDir is the store of the directory root; uri names an object as its destination does.
func NewDir(root string, uri func(key string) string) *Dir { return &Dir{root: root, uri: uri} }

func (d *Dir) path(key string) (string, error) {
	p := filepath.Join(d.root, filepath.FromSlash(key))
	if !strings.HasPrefix(p, filepath.Clean(d.root)+string(filepath.Separator)) {
		return "", fmt.Errorf("%w: key %q leaves the destination's directory", ErrRefused, key)
	}
	return p, nil
}

// Put writes r to a hidden file beside the key's, syncs it, and renames it into place.
// A volume out of space (or over its quota) is ErrFull, whatever step met it.
func (d *Dir) Put(_ context.Context, key string, r io.Reader) error {
	err := d.put(key, r)
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Errorf("%w: %v", ErrFull, err)
	}
	return err
}

func (d *Dir) put(key string, r io.Reader) (err error) {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".partial-*")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrRefused, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err = io.Copy(f, r); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	if err = os.Rename(f.Name(), p); err != nil {
		return err
	}
	return syncDir(filepath.Dir(p))
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer f.Close()
	return f.Sync()
}

// Get opens the file under key.
func (d *Dir) Get(_ context.Context, key string) (io.ReadCloser, error) {
	p, err := d.path(key)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %s does not exist", ErrRefused, d.URI(key))
	}
	return f, err
}

// Delete removes the file under key; one already gone is no error.
func (d *Dir) Delete(_ context.Context, key string) error {
	p, err := d.path(key)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// List lists the complete files whose keys start with prefix.
func (d *Dir) List(_ context.Context, prefix string) ([]Object, error) {
	var out []Object
	err := filepath.WalkDir(d.root, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			return nil
		}
		rel, _ := filepath.Rel(d.root, p)
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		out = append(out, Object{Key: key, Size: info.Size(), Modified: info.ModTime()})
		return nil
	})
	return out, err
}

// URI names the file under key as the destination does: pvc://claim/subPath/key.
func (d *Dir) URI(key string) string { return d.uri(key) }

// Close does nothing: a directory holds no client.
func (d *Dir) Close() error { return nil }
