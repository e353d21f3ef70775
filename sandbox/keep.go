//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A capped workspace is a tmpfs, in memory: its folder on disk holds a copy
// that is brought up to date after every command and every file the tools
// write (less often where a pass would take more than a tenth of the time:
// syncDue), and once more at Close, so a run that is killed (SIGKILL, a
// crash) still has, where its results are, the workspace as of its last
// command. The copy
//
//   - writes only beneath the folder's descriptor and never through a
//     symlink (openat2 with RESOLVE_BENEATH and RESOLVE_NO_SYMLINKS, the
//     other *at calls on single names): a link the sandbox made, copied on
//     an earlier pass as a link, cannot carry a later write out of the
//     folder;
//   - goes into a fresh folder only (New refuses one that holds anything);
//   - writes at most the workspace's cap in file data: holes stay holes, a
//     file with several names is written once and linked, and a file that
//     would pass the cap is left out and counted (Kept);
//   - replaces a changed file by renaming a fresh copy over it, so a crash
//     mid-copy leaves the previous version;
//   - skips what has not changed since the last pass (same inode, size and
//     change time, which the sandbox cannot set).

// mirror keeps a folder on disk equal to a tmpfs workspace.
type mirror struct {
	mu    sync.Mutex
	src   int      // the workspace (the sandbox's rootFD, not the mirror's to close)
	dir   *os.File // the folder on disk
	dst   int      // its descriptor
	cap   int64
	files map[string]copied // what the last pass left in the folder, by workspace path
	kept  Kept
	seq   int
	ended time.Time     // when the last pass ended
	took  time.Duration // and how long it took
}

// copied is one entry of the folder as the last pass left it.
type copied struct {
	kind  uint32 // unix.S_IFREG, S_IFDIR or S_IFLNK
	ino   uint64
	size  int64
	ctime unix.Timespec
	cost  int64  // data bytes it holds on disk (0 for a further name)
	link  string // a symlink's target
}

// entry is one thing of the workspace, as listed.
type entry struct {
	rel   string
	kind  uint32
	nlink uint32
	ino   uint64
	size  int64
	ctime unix.Timespec
	link  string
}

// newMirror opens dir, which must be an empty folder, as the copy of src.
func newMirror(src int, dir string, cap uint64) (*mirror, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("sandbox: workspace folder %s: %w", dir, err)
	}
	f := os.NewFile(uintptr(fd), dir)
	if names, _ := f.Readdirnames(1); len(names) > 0 {
		f.Close()
		return nil, fmt.Errorf("sandbox: workspace folder %s holds %q: a capped workspace is copied into a fresh folder only (is it another run's?)", dir, names[0])
	}
	return &mirror{src: src, dir: f, dst: int(f.Fd()), cap: int64(cap), files: map[string]copied{}}, nil
}

func (m *mirror) close() {
	if m != nil {
		m.dir.Close()
	}
}

// report is the state of the copy after the last pass.
func (m *mirror) report() Kept {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.kept
}

// sync brings the folder up to date with the workspace (see above).
func (m *mirror) sync() {
	m.mu.Lock()
	defer m.mu.Unlock()
	start := time.Now()
	var k Kept
	fail := func(err error) {
		if k.Error == "" && err != nil {
			k.Error = err.Error()
		}
	}
	ents, err := listTree(m.src)
	fail(err)
	now := make(map[string]uint32, len(ents)) // path → kind
	for i := range ents {
		now[ents[i].rel] = ents[i].kind
	}
	// What is gone or changed kind goes first: its bytes count no more.
	var gone []string
	for rel, c := range m.files {
		if now[rel] != c.kind {
			gone = append(gone, rel)
		}
	}
	now = nil
	sort.Sort(sort.Reverse(sort.StringSlice(gone))) // children before their folder
	for _, rel := range gone {
		fail(m.at(rel, func(dir int, name string) error { return removeAt(dir, name) }))
		delete(m.files, rel)
	}
	var used int64
	for _, c := range m.files {
		used += c.cost
	}
	first := map[uint64]string{} // an inode of several names → its name copied this pass
	for i := range ents {
		e := &ents[i]
		old, had := m.files[e.rel]
		c := copied{kind: e.kind, ino: e.ino, size: e.size, ctime: e.ctime, link: e.link}
		same := had && old.ino == c.ino && old.size == c.size && old.ctime == c.ctime && old.link == c.link
		var err error
		switch c.kind {
		case unix.S_IFDIR:
			if !had {
				err = m.at(e.rel, mkdirAt)
			}
		case unix.S_IFLNK:
			if !same {
				err = m.at(e.rel, func(dir int, name string) error {
					return m.replace(dir, name, func(tmp string) error { return unix.Symlinkat(e.link, dir, tmp) })
				})
			}
		case unix.S_IFREG:
			linked := e.nlink > 1 && first[e.ino] != ""
			switch {
			case same:
				c.cost = old.cost
			case linked:
				err = m.link(first[e.ino], e.rel)
			default:
				c.cost, err = m.copyFile(e, used-old.cost)
				if err == nil {
					used += c.cost - old.cost
				}
			}
			if err == nil && e.nlink > 1 && first[e.ino] == "" {
				first[e.ino] = e.rel
			}
			if err != nil {
				k.LeftOut++
				k.LeftOutBytes += e.size
			} else {
				k.Files++
			}
		}
		switch {
		case err == nil:
			m.files[e.rel] = c
		case errors.Is(err, errCap):
			k.Capped = true
		default:
			fail(fmt.Errorf("%s: %w", e.rel, err))
		}
		// On an error an older copy (still in m.files) stays.
	}
	k.Bytes = used
	m.kept = k
	m.ended = time.Now()
	m.took = m.ended.Sub(start)
}

// syncDue is sync after a command, skipped while passes would take more
// than a tenth of the time: the copy of a workspace of many files (listing
// 256k takes seconds) is brought up to date every few commands, a small one
// after each.
func (m *mirror) syncDue() {
	m.mu.Lock()
	due := time.Since(m.ended) >= 10*m.took
	m.mu.Unlock()
	if due {
		m.sync()
	}
}

// errCap is a file left out because it would pass the cap.
var errCap = errors.New("over the workspace's cap")

// at calls f with the folder of rel in the copy (opened beneath it, no
// symlinks) and rel's last name.
func (m *mirror) at(rel string, f func(dir int, name string) error) error {
	dir, err := beneath(m.dst, path.Dir(rel), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(dir)
	return f(dir, path.Base(rel))
}

// replace makes a new entry under a fresh name with make, then renames it
// over name.
func (m *mirror) replace(dir int, name string, make func(tmp string) error) error {
	for range 100 {
		m.seq++
		tmp := ".jspark-copy-" + strconv.Itoa(m.seq)
		err := make(tmp)
		if err == unix.EEXIST {
			continue // the workspace has a file of that name
		}
		if err != nil {
			return err
		}
		if err := unix.Renameat(dir, tmp, dir, name); err != nil {
			unix.Unlinkat(dir, tmp, 0)
			return err
		}
		return nil
	}
	return errors.New("no free temporary name")
}

// link makes rel a further name of the copy of first.
func (m *mirror) link(first, rel string) error {
	from, err := beneath(m.dst, path.Dir(first), unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer unix.Close(from)
	return m.at(rel, func(dir int, name string) error {
		return m.replace(dir, name, func(tmp string) error { return unix.Linkat(from, path.Base(first), dir, tmp, 0) })
	})
}

// copyFile copies one file's data, hole by hole, unless that would take the
// copy past the cap (used is what the rest of it holds); it returns the data
// bytes written.
func (m *mirror) copyFile(e *entry, used int64) (int64, error) {
	fd, err := beneath(m.src, e.rel, unix.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return 0, err
	}
	src := os.NewFile(uintptr(fd), e.rel)
	defer src.Close()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return 0, ErrNotRegular
	}
	extents, cost := dataExtents(fd, st.Size)
	if used+cost > m.cap {
		return 0, errCap
	}
	err = m.at(e.rel, func(dir int, name string) error {
		return m.replace(dir, name, func(tmp string) error {
			out, err := beneath(dir, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL, st.Mode&0o777)
			if err != nil {
				return err
			}
			dst := os.NewFile(uintptr(out), tmp)
			err = writeExtents(dst, src, extents, st.Size)
			if cerr := dst.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				unix.Unlinkat(dir, tmp, 0)
			}
			return err
		})
	})
	return cost, err
}

// dataExtents lists the [start, end) ranges of a file that hold data (a
// file system without SEEK_DATA has one: the whole file) and their total.
func dataExtents(fd int, size int64) ([][2]int64, int64) {
	var out [][2]int64
	var total int64
	for off := int64(0); off < size; {
		start, err := unix.Seek(fd, off, unix.SEEK_DATA)
		if err == unix.ENXIO {
			break // only a hole is left
		}
		if err != nil {
			return [][2]int64{{0, size}}, size
		}
		end, err := unix.Seek(fd, start, unix.SEEK_HOLE)
		if err != nil || end > size {
			end = size
		}
		out = append(out, [2]int64{start, end})
		total += end - start
		off = end
	}
	return out, total
}

// writeExtents copies the extents of src into dst at the same offsets and
// gives dst src's size, so what lies between them stays a hole.
func writeExtents(dst, src *os.File, extents [][2]int64, size int64) error {
	for _, x := range extents {
		if _, err := io.Copy(io.NewOffsetWriter(dst, x[0]), io.NewSectionReader(src, x[0], x[1]-x[0])); err != nil {
			return err
		}
	}
	return dst.Truncate(size)
}

// listTree lists the workspace under fd in lexical order, a folder before
// what it holds: folders, regular files and symlinks (FIFOs, sockets and
// devices are not files to keep).
func listTree(fd int) ([]entry, error) {
	var out []entry
	var first error
	var walk func(dir int, rel string)
	walk = func(dir int, rel string) {
		f := os.NewFile(uintptr(dir), rel)
		defer f.Close()
		names, err := f.Readdirnames(-1)
		if err != nil && first == nil {
			first = fmt.Errorf("%s: %w", rel, err)
		}
		sort.Strings(names)
		var st unix.Stat_t
		for _, name := range names {
			if err := unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				continue // gone since the listing
			}
			e := entry{rel: path.Join(rel, name), kind: st.Mode & unix.S_IFMT, nlink: uint32(st.Nlink), ino: st.Ino, size: st.Size, ctime: st.Ctim}
			switch e.kind {
			case unix.S_IFDIR:
				out = append(out, e)
				sub, err := beneath(dir, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
				if err != nil {
					if first == nil {
						first = fmt.Errorf("%s: %w", e.rel, err)
					}
					continue
				}
				walk(sub, e.rel)
			case unix.S_IFLNK:
				if e.link, err = readlinkat(dir, name); err == nil {
					out = append(out, e)
				}
			case unix.S_IFREG:
				out = append(out, e)
			}
		}
	}
	top, err := unix.Openat(fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	walk(top, ".")
	return out, first
}

func readlinkat(dir int, name string) (string, error) {
	buf := make([]byte, unix.PathMax)
	n, err := unix.Readlinkat(dir, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// mkdirAt makes the folder name under dir, or finds it there.
func mkdirAt(dir int, name string) error {
	err := unix.Mkdirat(dir, name, 0o755)
	if err == unix.EEXIST {
		var st unix.Stat_t
		if unix.Fstatat(dir, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return nil
		}
	}
	return err
}

// removeAt removes name under dir and, for a folder, everything in it,
// never following a symlink.
func removeAt(dir int, name string) error {
	err := unix.Unlinkat(dir, name, 0)
	if err == unix.ENOENT {
		return nil
	}
	if err != unix.EISDIR {
		return err
	}
	fd, err := beneath(dir, name, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), name)
	names, err := f.Readdirnames(-1)
	for _, n := range names {
		if rerr := removeAt(fd, n); err == nil {
			err = rerr
		}
	}
	f.Close()
	if err != nil {
		return err
	}
	return unix.Unlinkat(dir, name, unix.AT_REMOVEDIR)
}
