//go:build linux

package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// A run given an --out that holds another run's results is refused: its
// workspaces would be copied over the first run's (and, before, through
// the first run's symlinks).
func TestReusedOutFolderIsRefused(t *testing.T) {
	base := t.TempDir()
	for _, c := range []struct {
		name  string
		setup func(dir string)
		ok    bool
	}{
		{"new", func(string) {}, true},
		{"empty", func(dir string) { os.Mkdir(dir, 0o755) }, true},
		{"results", func(dir string) {
			os.MkdirAll(filepath.Join(dir, "c6-first", "s0-a", "workspace"), 0o755)
			os.WriteFile(filepath.Join(dir, "results.json"), []byte("{}\n"), 0o644)
		}, false},
		{"claimed", func(dir string) {
			if err := ClaimOut(dir); err != nil {
				t.Fatal(err)
			}
		}, false},
		{"other files", func(dir string) {
			os.Mkdir(dir, 0o755)
			os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o644)
		}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(base, c.name)
			c.setup(dir)
			err := ClaimOut(dir)
			if c.ok != (err == nil) || (err != nil && !errors.Is(err, ErrOutTaken)) {
				t.Fatalf("ClaimOut: %v", err)
			}
			if _, serr := os.Stat(filepath.Join(dir, outMark)); c.name != "claimed" && (serr == nil) != c.ok {
				t.Errorf("the mark after ClaimOut (%v): %v", err, serr)
			}
		})
	}
}

// Two runs started in the same second got the same default folder name
// (results/RECIPE-ROUND-TIME): each now gets a folder of its own, and of
// runs given one folder at once, one has it.
func TestRunsStartedTogetherGetTheirOwnFolders(t *testing.T) {
	base := filepath.Join(t.TempDir(), "results", "work-c6-repeat-20260101-120000")
	const n = 8
	var wg sync.WaitGroup
	dirs := make([]string, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { dirs[i], errs[i] = NewOut(base) })
	}
	wg.Wait()
	seen := map[string]bool{}
	for i := range n {
		if errs[i] != nil || seen[dirs[i]] {
			t.Fatalf("run %d: folder %q, %v", i, dirs[i], errs[i])
		}
		seen[dirs[i]] = true
	}
	if !seen[base] || !seen[base+"-2"] {
		t.Errorf("folders %v", dirs)
	}
	shared := filepath.Join(t.TempDir(), "out")
	won := make(chan error, n)
	for range n {
		wg.Go(func() { won <- ClaimOut(shared) })
	}
	wg.Wait()
	close(won)
	ok := 0
	for err := range won {
		if err == nil {
			ok++
		} else if !errors.Is(err, ErrOutTaken) {
			t.Errorf("ClaimOut: %v", err)
		}
	}
	if ok != 1 {
		t.Errorf("%d runs claimed one folder", ok)
	}
}

// --resume takes back a run's folder once its run has stopped: a folder no
// run claimed is refused, and so is one whose run still holds it (here a
// lock on its mark taken as another process's claim would).
func TestResumeOutTakesBackAStoppedRunsFolder(t *testing.T) {
	base := t.TempDir()
	if err := ResumeOut(base); err == nil {
		t.Error("a folder without a run's mark was resumed")
	}
	dir := filepath.Join(base, "run")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, outMark), []byte("pid 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	other, err := os.Open(filepath.Join(dir, outMark))
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(other.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if err := ResumeOut(dir); !errors.Is(err, ErrOutRunning) {
		t.Errorf("a folder whose run still runs: %v", err)
	}
	other.Close() // that run ends: its lock goes with it
	if err := ResumeOut(dir); err != nil {
		t.Fatalf("a stopped run's folder: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, outMark)); !strings.Contains(string(b), "resumed by pid") {
		t.Errorf("mark %q", b)
	}
	// This process's own claims and resumes are its own to resume.
	mine := filepath.Join(base, "mine")
	if err := ClaimOut(mine); err != nil {
		t.Fatal(err)
	}
	if err := ResumeOut(mine); err != nil || ResumeOut(dir) != nil {
		t.Errorf("resuming what this process holds: %v", err)
	}
}
