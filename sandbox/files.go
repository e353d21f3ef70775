//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// The host-side file tools reach the workspace only through these: every
// open is relative to the workspace's own descriptor with openat2's
// RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS (what resolve checks by name, the
// kernel enforces, so nothing swapped in between escapes), with O_NONBLOCK
// and only for regular files: a FIFO, socket or device the sandbox made is
// refused, never waited on.

// beneath opens rel under dir with flags, refusing symlinks and escapes.
func beneath(dir int, rel string, flags int, mode uint32) (int, error) {
	how := &unix.OpenHow{
		Flags:   uint64(flags | unix.O_CLOEXEC | unix.O_NOFOLLOW),
		Mode:    uint64(mode),
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	for {
		fd, err := unix.Openat2(dir, rel, how)
		if err == unix.EINTR {
			continue
		}
		if err == unix.ENOSYS {
			// Before Linux 5.6: resolve has checked the path by name.
			return unix.Openat(dir, rel, flags|unix.O_CLOEXEC|unix.O_NOFOLLOW, mode)
		}
		return fd, err
	}
}

// Open opens a workspace file for reading: a regular file only, never through
// a symlink, never outside the workspace, and without waiting on anything.
func (s *Sandbox) Open(rel string) (*os.File, error) {
	if _, err := s.Path(rel); err != nil {
		return nil, err
	}
	if err := s.notSpecial(s.rootFD, cleanRel(rel), rel); err != nil {
		return nil, err
	}
	fd, err := beneath(s.rootFD, cleanRel(rel), unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), rel)
	if err := regular(f, rel); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// notSpecial looks at what rel is without opening it (O_PATH opens no FIFO,
// socket or device): anything but a regular file is refused.
func (s *Sandbox) notSpecial(dir int, name, rel string) error {
	fd, err := beneath(dir, name, unix.O_PATH, 0)
	if err != nil {
		return &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	return regular(f, rel)
}

// regular refuses anything but a regular file.
func regular(f *os.File, rel string) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return &fs.PathError{Op: "open", Path: rel, Err: fmt.Errorf("%w (%s)", ErrNotRegular, kind(fi.Mode()))}
	}
	return nil
}

func kind(m fs.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "not a file"
}

// FileSizeLimit is the most bytes one file may have (RLIMIT_FSIZE inside,
// WriteFile's bound outside).
func (s *Sandbox) FileSizeLimit() int64 { return int64(s.limits.FileSize) }

// WriteFile writes a workspace file, making its directories, owned by the
// sandbox's user so its shell can change it. It refuses content over the
// file-size limit and any existing path that is not a regular file.
func (s *Sandbox) WriteFile(rel string, data []byte) error {
	err := s.writeFile(rel, data, true)
	s.syncDue()
	return err
}

// writeFile writes a file, within the file-size limit when capped (the
// recipe's seed files are not the session's to bound).
func (s *Sandbox) writeFile(rel string, data []byte, capped bool) error {
	p, err := s.Path(rel)
	if err != nil {
		return err
	}
	if p == s.root {
		return fmt.Errorf("%q: is the workspace itself", rel)
	}
	if lim := s.FileSizeLimit(); capped && lim > 0 && int64(len(data)) > lim {
		return fmt.Errorf("%q: %d bytes is over the sandbox's file-size limit of %d bytes", rel, len(data), lim)
	}
	clean := cleanRel(rel)
	dir, err := s.mkdirAll(filepath.Dir(clean))
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	name := filepath.Base(clean)
	if err := s.notSpecial(dir, name, rel); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	fd, err := beneath(dir, name, unix.O_WRONLY|unix.O_CREAT|unix.O_NONBLOCK, 0o644)
	if err != nil {
		return &fs.PathError{Op: "open", Path: rel, Err: err}
	}
	f := os.NewFile(uintptr(fd), rel)
	defer f.Close()
	if err := regular(f, rel); err != nil {
		return err
	}
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		return err
	}
	if s.dedicated {
		return f.Chown(s.uid, s.uid)
	}
	return nil
}

// mkdirAll makes the workspace directory rel (and its parents), owned by the
// sandbox's user, and returns a descriptor of it.
func (s *Sandbox) mkdirAll(rel string) (int, error) {
	fd, err := unix.Dup(s.rootFD)
	if err != nil {
		return -1, err
	}
	if rel == "." {
		return fd, nil
	}
	for _, part := range strings.Split(rel, "/") {
		err := unix.Mkdirat(fd, part, 0o755)
		made := err == nil
		if err != nil && err != unix.EEXIST {
			unix.Close(fd)
			return -1, &fs.PathError{Op: "mkdir", Path: rel, Err: err}
		}
		next, err := beneath(fd, part, unix.O_PATH|unix.O_DIRECTORY, 0)
		unix.Close(fd)
		if err != nil {
			if err == unix.ENOTDIR {
				return -1, fmt.Errorf("%s: not a directory", part)
			}
			return -1, &fs.PathError{Op: "open", Path: rel, Err: err}
		}
		fd = next
		if made && s.dedicated {
			unix.Fchownat(fd, "", s.uid, s.uid, unix.AT_EMPTY_PATH)
		}
	}
	return fd, nil
}

// Walk calls fn for rel and everything under it, in lexical order, with
// workspace-relative paths, as fs.WalkDir does (SkipDir and SkipAll work);
// symlinks are reported, never followed.
func (s *Sandbox) Walk(rel string, fn fs.WalkDirFunc) error {
	if _, err := s.Path(rel); err != nil {
		return err
	}
	return fs.WalkDir(os.DirFS(s.Root()), cleanRel(rel), fn)
}

// cleanRel is rel as openat2 takes it under the workspace ("." for the root).
func cleanRel(rel string) string {
	if rel == "" {
		return "."
	}
	return filepath.Clean(rel)
}
