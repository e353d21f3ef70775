package sandbox

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ErrOutside is the error of a path that leaves the workspace.
var ErrOutside = errors.New("path leaves the workspace")

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

// tmpfsWorkspace makes a detached tmpfs of size bytes, its root owned by uid:
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
	for _, kv := range [][2]string{{"size", strconv.FormatUint(size, 10)}, {"mode", "0755"}, {"uid", strconv.Itoa(uid)}, {"gid", strconv.Itoa(uid)}} {
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

// copyOut copies the workspace under from (a descriptor) into the folder dir:
// directories, regular files and symlinks (as links); FIFOs, sockets and
// devices are not files to keep. Every open is beneath from, without
// following links, so nothing the sandbox left there is read outside it.
func copyOut(from int, dir string) error {
	var first error
	keep := func(err error) {
		if first == nil && err != nil {
			first = err
		}
	}
	var walk func(fd int, dst string)
	walk = func(fd int, dst string) {
		f := os.NewFile(uintptr(fd), dst)
		defer f.Close()
		ents, err := f.ReadDir(-1)
		if err != nil {
			keep(err)
			return
		}
		for _, e := range ents {
			name, target := e.Name(), filepath.Join(dst, e.Name())
			switch t := e.Type(); {
			case t.IsDir():
				sub, err := beneath(fd, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
				if err != nil {
					keep(err)
					continue
				}
				if err := os.Mkdir(target, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
					unix.Close(sub)
					keep(err)
					continue
				}
				walk(sub, target)
			case t&fs.ModeSymlink != 0:
				link, err := readlinkat(fd, name)
				if err == nil {
					os.Remove(target)
					err = os.Symlink(link, target)
				}
				keep(err)
			case t.IsRegular():
				keep(copyFile(fd, name, target))
			}
		}
	}
	fd, err := unix.Openat(from, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	walk(fd, dir)
	if first != nil {
		return fmt.Errorf("copy the workspace out to %s: %w", dir, first)
	}
	return nil
}

func readlinkat(dir int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dir, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

func copyFile(dir int, name, target string) error {
	fd, err := beneath(dir, name, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	src := os.NewFile(uintptr(fd), name)
	defer src.Close()
	fi, err := src.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return err
	}
	os.Remove(target) // a link or FIFO of the same name on disk is not to be written through
	dst, err := os.OpenFile(target, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	_, err = io.Copy(dst, src)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	return err
}
