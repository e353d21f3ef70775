package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// ErrOutside is the error of a path that leaves the workspace.
var ErrOutside = errors.New("path leaves the workspace")

// seed writes files (relative path → content) under root, in sorted order so a
// failure names the same file on every run.
func seed(root string, files map[string]string) error {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p, err := resolve(root, n)
		if err != nil {
			return fmt.Errorf("seed file %q: %w", n, err)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(files[n]), 0o644); err != nil {
			return err
		}
	}
	return nil
}

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
