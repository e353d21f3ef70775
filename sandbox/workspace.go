//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// resolve maps a workspace-relative path to a host path, refusing absolute
// paths, paths that climb out with "..", and any symlink along the way (a link
// inside the workspace may point anywhere, so none is followed).
func resolve(root, rel string) (string, error) {
	if rel == "" {
		rel = "."
	}
	if filepath.IsAbs(rel) {
		return "", fmt.Errorf("%q: absolute paths are refused (paths are relative to the workspace): %w", rel, ErrOutside)
	}
	clean := filepath.Clean(rel)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%q: %w", rel, ErrOutside)
	}
	p := root
	if clean == "." {
		return p, nil
	}
	for _, part := range strings.Split(clean, "/") {
		p = filepath.Join(p, part)
		fi, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			break // the rest does not exist yet: nothing to follow
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return "", fmt.Errorf("%q: %q is a symlink; symlinks are refused: %w", rel, part, ErrOutside)
		}
	}
	return filepath.Join(root, clean), nil
}

// workspaceInodes bounds the files and folders of a capped workspace (and so
// of its copy on disk).
const workspaceInodes = 1 << 18

// tmpfsWorkspace makes a detached tmpfs of size bytes and workspaceInodes
// inodes, its root owned by uid:
// the workspace of a capped sandbox. It is in no mount table (nothing to
// leak if jspark dies); each shell attaches a clone of it at Home, and the
// host side reaches it through the returned descriptor. Writes past size fail
// with ENOSPC, inside the sandbox and out.
func tmpfsWorkspace(size uint64, uid int) (int, error) {
	fs, err := unix.Fsopen("tmpfs", unix.FSOPEN_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("workspace tmpfs: %w", err)
	}
	defer unix.Close(fs)
	for _, kv := range [][2]string{{"size", strconv.FormatUint(size, 10)}, {"nr_inodes", strconv.Itoa(workspaceInodes)},
		{"mode", "0755"}, {"uid", strconv.Itoa(uid)}, {"gid", strconv.Itoa(uid)}} {
		if err := unix.FsconfigSetString(fs, kv[0], kv[1]); err != nil {
			return -1, fmt.Errorf("workspace tmpfs %s=%s: %w", kv[0], kv[1], err)
		}
	}
	if err := unix.FsconfigCreate(fs); err != nil {
		return -1, fmt.Errorf("workspace tmpfs: %w", err)
	}
	fd, err := unix.Fsmount(fs, unix.FSMOUNT_CLOEXEC, unix.MOUNT_ATTR_NOSUID|unix.MOUNT_ATTR_NODEV)
	if err != nil {
		return -1, fmt.Errorf("workspace tmpfs: %w", err)
	}
	return fd, nil
}
