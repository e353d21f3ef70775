//go:build linux

package sandbox

import (
	"bytes"
	"crypto/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// capped makes a sandbox whose workspace is a tmpfs copied to dir, or skips
// saying why there is none.
func capped(t *testing.T, dir string) *Sandbox {
	t.Helper()
	s, err := New(dir, nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if !s.tmpfs {
		lacks(t, "no capped workspace here (%s)", s.Isolation().Workspace)
	}
	return s
}

// victim is a folder outside every workspace holding a root-only file, as
// /victim was in the attack.
func victim(t *testing.T) (dir, file string) {
	dir = t.TempDir()
	file = filepath.Join(dir, "secret")
	if err := os.WriteFile(file, []byte("ORIGINAL\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, file
}

func checkVictim(t *testing.T, dir, file string) {
	t.Helper()
	if b, err := os.ReadFile(file); err != nil || string(b) != "ORIGINAL\n" {
		t.Errorf("the file outside the workspace was replaced: %q %v", b, err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Errorf("files were created outside the workspace: %v", ents)
	}
}

// Run 1 leaves a symlink d -> /victim in its folder; run 2, given the same
// folder, has a real folder d/ with files in it. The copy-out followed the
// link and replaced a root-owned file outside the workspace. A capped
// workspace now goes into a fresh folder only.
func TestReusedFolderSymlinkCannotCarryTheCopyOut(t *testing.T) {
	vdir, vfile := victim(t)
	ws := filepath.Join(t.TempDir(), "ws")
	s := capped(t, ws)
	run(t, s, "ln -s "+vdir+" d", 10*time.Second)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if l, err := os.Readlink(filepath.Join(ws, "d")); err != nil || l != vdir {
		t.Fatalf("run 1's link: %q %v", l, err)
	}
	s2, err := New(ws, nil, Options{})
	if err == nil {
		run(t, s2, "rm d; mkdir d && echo PWNED > d/secret && echo NEW > d/created", 10*time.Second)
		s2.Close()
	}
	if err == nil || !strings.Contains(err.Error(), "copied into a fresh folder only") {
		t.Errorf("New on a folder holding run 1's files: %v", err)
	}
	checkVictim(t, vdir, vfile)
}

// Within one run, the copy made after a command holds the command's symlink
// d -> /victim; the next command replaces it with a real folder d/. The
// next copy replaces the link, never writes through it.
func TestCopiedSymlinkCannotCarryALaterCopy(t *testing.T) {
	vdir, vfile := victim(t)
	ws := filepath.Join(t.TempDir(), "ws")
	s := capped(t, ws)
	run(t, s, "ln -s "+vdir+" d && ln -s "+vfile+" f", 10*time.Second)
	if l, err := os.Readlink(filepath.Join(ws, "d")); err != nil || l != vdir {
		t.Fatalf("the copy after the first command: %q %v", l, err)
	}
	run(t, s, "rm d f && mkdir d && echo PWNED > d/secret && echo NEW > d/created && echo PWNED > f", 10*time.Second)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	checkVictim(t, vdir, vfile)
	for name, want := range map[string]string{"d/secret": "PWNED\n", "d/created": "NEW\n", "f": "PWNED\n"} {
		if b, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(b) != want {
			t.Errorf("%s in the copy: %q %v", name, b, err)
		}
	}
}

// diskBytes is what the files under dir take on disk.
func diskBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	seen := map[uint64]bool{}
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			st := fi.Sys().(*syscall.Stat_t)
			if !seen[st.Ino] {
				seen[st.Ino] = true
				n += st.Blocks * 512
			}
		}
		return nil
	})
	return n
}

// Twelve sparse files wrote 3.0 GiB to the host's disk past the 1 GiB cap
// (the copy wrote their holes as zeros): holes stay holes.
func TestSparseFilesCopyAsHoles(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	s := capped(t, ws)
	run(t, s, "for i in $(seq 1 12); do truncate -s 64M sparse$i && echo data$i | dd of=sparse$i bs=1 seek=$((32<<20)) conv=notrunc 2>/dev/null; done", 30*time.Second)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 12; i++ {
		fi, err := os.Stat(filepath.Join(ws, "sparse"+strconv.Itoa(i)))
		if err != nil || fi.Size() != 64<<20 {
			t.Fatalf("sparse%d in the copy: %v %v", i, fi, err)
		}
	}
	if n := diskBytes(t, ws); n > 1<<20 {
		t.Errorf("the copy of 12 sparse files takes %d bytes on disk, want their data only", n)
	}
	if k := s.Kept(); k.Files != 12 || k.Bytes > 12*4096 || k.LeftOut != 0 {
		t.Errorf("Kept %+v", k)
	}
}

// A file with nine more hard links wrote its data ten times (2.0 GiB for a
// 200 MiB file): each further name is a link in the copy.
func TestHardLinksCopyOnce(t *testing.T) {
	ws := filepath.Join(t.TempDir(), "ws")
	s := capped(t, ws)
	run(t, s, "head -c 4M /dev/urandom > f0 && for i in $(seq 1 9); do ln f0 f$i; done", 30*time.Second)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	first, err := os.Stat(filepath.Join(ws, "f0"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 9; i++ {
		fi, err := os.Stat(filepath.Join(ws, "f"+strconv.Itoa(i)))
		if err != nil || !os.SameFile(first, fi) {
			t.Errorf("f%d is not a link of f0 in the copy: %v", i, err)
		}
	}
	if n := diskBytes(t, ws); n > 5<<20 {
		t.Errorf("the copy takes %d bytes on disk, want 4 MiB", n)
	}
	if k := s.Kept(); k.Files != 10 || k.Bytes != 4<<20 {
		t.Errorf("Kept %+v, want 10 files and 4 MiB", k)
	}
}

// Past the cap the copy leaves files out and says so; what fits is kept.
func TestCopyStopsAtTheCap(t *testing.T) {
	src := t.TempDir()
	data := make([]byte, 600<<10)
	rand.Read(data)
	for _, n := range []string{"a", "b", "c"} {
		if err := os.WriteFile(filepath.Join(src, n), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(filepath.Join(src, "small"), []byte("x"), 0o644)
	fd, err := unix.Open(src, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	dst := t.TempDir()
	m, err := newMirror(fd, dst, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	m.sync()
	k := m.report()
	if k.Files != 2 || k.LeftOut != 2 || k.LeftOutBytes != 2*600<<10 || !k.Capped || k.Error != "" {
		t.Errorf("Kept %+v, want a and small kept, b and c left out at the cap", k)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "a")); err != nil || !bytes.Equal(b, data) {
		t.Errorf("a: %d bytes, %v", len(b), err)
	}
	for _, n := range []string{"b", "c"} {
		if _, err := os.Lstat(filepath.Join(dst, n)); err == nil {
			t.Errorf("%s was copied past the cap", n)
		}
	}
	// Once a is gone, b fits.
	os.Remove(filepath.Join(src, "a"))
	m.sync()
	if k := m.report(); k.Files != 2 || k.LeftOut != 1 {
		t.Errorf("after a is gone: %+v", k)
	}
	if _, err := os.Stat(filepath.Join(dst, "b")); err != nil {
		t.Errorf("b: %v", err)
	}
}

// A pass that takes long (a workspace of many files) is not repeated after
// every command: passes take at most a tenth of the time. Close's is made
// whatever it costs.
func TestSlowCopyIsNotRepeatedAfterEveryCommand(t *testing.T) {
	src, dst := t.TempDir(), t.TempDir()
	fd, err := unix.Open(src, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	m, err := newMirror(fd, dst, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	m.syncDue()
	os.WriteFile(filepath.Join(src, "a"), []byte("a"), 0o644)
	m.took = time.Hour // as if listing the workspace took that long
	m.syncDue()
	if _, err := os.Stat(filepath.Join(dst, "a")); err == nil {
		t.Errorf("a pass of an hour was repeated at once")
	}
	m.sync()
	if _, err := os.Stat(filepath.Join(dst, "a")); err != nil {
		t.Errorf("sync: %v", err)
	}
	os.WriteFile(filepath.Join(src, "b"), []byte("b"), 0o644)
	m.ended = m.ended.Add(-time.Second) // a quick pass, then a command of a second
	m.syncDue()
	if _, err := os.Stat(filepath.Join(dst, "b")); err != nil {
		t.Errorf("after a quick pass: %v", err)
	}
}
