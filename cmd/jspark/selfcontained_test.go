package main

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestSelfContained fails when any file of the repository names the
// development workspace's sibling folder: a user's clone has nothing beside
// it, so tests, docs and code must carry what they need (testdata/).
func TestSelfContained(t *testing.T) {
	root := filepath.Join("..", "..")
	needle := []byte(".." + "/shared")
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); name == ".git" || name == "bin" || name == "results" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if i := bytes.Index(b, needle); i >= 0 {
			line := bytes.Count(b[:i], []byte("\n")) + 1
			t.Errorf("%s:%d names %s", path, line, needle)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
