package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
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
