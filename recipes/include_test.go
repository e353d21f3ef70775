package recipes

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// withFiles is good with task a given a check, a seed file, a hidden test
// and a solution, each written as a !file.
const withFiles = `name: t
system: !file sys.txt
tools: [bash, read]
sampling:
  max_tokens: 64
tasks:
  - id: a
    kind: code
    prompt: !file a/prompt.md
    check: python3 -m unittest -q
    files:
      m.py: &seed !file a/files/m.py
    tests:
      m.py: *seed
      test_m.py: !file a/tests/test_m.py
    solution:
      files:
        m.py: !file a/solution/m.py
rounds:
  - name: r1
    concurrency: 2
    tasks: [a]
`

// writeFiles writes files (slash path → content) under dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

var includedFiles = map[string]string{
	"sys.txt":            "Be brief.\n",
	"a/prompt.md":        "Write m.py.\n",
	"a/files/m.py":       "raise NotImplementedError\n",
	"a/tests/test_m.py":  "import m\n",
	"a/solution/m.py":    "X = 1\n",
	"recipe.yaml":        withFiles,
	"other/recipe2.yaml": "",
}

// A !file value is its file's text, read from the recipe's folder; an
// alias of one is the same text.
func TestFileValues(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, includedFiles)
	r, err := Load(filepath.Join(dir, "recipe.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	a := r.Task("a")
	got := map[string]string{
		"system": r.System, "prompt": a.Prompt, "files": a.Files["m.py"], "tests m": a.Tests["m.py"],
		"tests test_m": a.Tests["test_m.py"], "solution": a.Solution.Files["m.py"],
	}
	want := map[string]string{
		"system": "Be brief.\n", "prompt": "Write m.py.\n", "files": "raise NotImplementedError\n", "tests m": "raise NotImplementedError\n",
		"tests test_m": "import m\n", "solution": "X = 1\n",
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %q, want %q", k, got[k], w)
		}
	}
}

// Each way a !file can be wrong is named at its line and field.
func TestBadFileValues(t *testing.T) {
	outside := t.TempDir()
	writeFiles(t, outside, map[string]string{"secret.txt": "SECRET\n"})
	cases := []struct {
		name, from, to, want string
		setup                func(dir string)
	}{
		{"missing", "a/tests/test_m.py", "a/tests/nope.py", "recipe.yaml:15: tasks[0].tests.test_m.py: !file a/tests/nope.py: no such file", nil},
		{"dot-dot", "a/tests/test_m.py", "../x.py", "recipe.yaml:15: tasks[0].tests.test_m.py: !file ../x.py: not a plain relative path inside the recipe's folder", nil},
		{"absolute", "a/tests/test_m.py", "/etc/passwd", "recipe.yaml:15: tasks[0].tests.test_m.py: !file /etc/passwd: not a plain relative path inside the recipe's folder", nil},
		{"unclean", "a/tests/test_m.py", "a/./tests/test_m.py", "recipe.yaml:15: tasks[0].tests.test_m.py: !file a/./tests/test_m.py: not a plain relative path inside the recipe's folder", nil},
		{"symlink out", "a/tests/test_m.py", "link/secret.txt", "recipe.yaml:15: tasks[0].tests.test_m.py: !file link/secret.txt: path escapes from parent",
			func(dir string) { os.Symlink(outside, filepath.Join(dir, "link")) }},
		{"folder", "a/tests/test_m.py", "a/tests", "recipe.yaml:15: tasks[0].tests.test_m.py: !file a/tests: not a regular file", nil},
		{"fifo", "a/tests/test_m.py", "fifo", "recipe.yaml:15: tasks[0].tests.test_m.py: !file fifo: not a regular file",
			func(dir string) { syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644) }},
		{"binary", "a/tests/test_m.py", "bin.dat", "recipe.yaml:15: tasks[0].tests.test_m.py: !file bin.dat: not UTF-8 text",
			func(dir string) { os.WriteFile(filepath.Join(dir, "bin.dat"), []byte{0xff, 0xfe, 0}, 0o644) }},
		{"too big", "a/tests/test_m.py", "big.txt", "recipe.yaml:15: tasks[0].tests.test_m.py: !file big.txt: the recipe and its files are over 1048576 bytes together",
			func(dir string) { os.WriteFile(filepath.Join(dir, "big.txt"), make([]byte, MaxBytes), 0o644) }},
		{"not a text field", "name: t\n", "name: !file sys.txt\n", "recipe.yaml:1: name: !file is for text fields (system, nudge.message, and a task's prompt, check, files, tests and solution)", nil},
		{"number field", "max_tokens: 64", "max_tokens: !file sys.txt", "recipe.yaml:5: sampling.max_tokens: !file is for text fields (system, nudge.message, and a task's prompt, check, files, tests and solution)", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, includedFiles)
			if c.setup != nil {
				c.setup(dir)
			}
			y := strings.Replace(withFiles, c.from, c.to, 1)
			_, err := Parse(filepath.Join(dir, "recipe.yaml"), []byte(y))
			if err == nil {
				t.Fatalf("no error, want %s", c.want)
			}
			if got := strings.ReplaceAll(err.Error(), dir+string(filepath.Separator), ""); got != c.want {
				t.Errorf("got  %s\nwant %s", got, c.want)
			}
		})
	}
}

// The built-in recipe's files are embedded with it: its tasks' programs
// are its files' text.
func TestBuiltinFileValues(t *testing.T) {
	r, err := Load("work")
	if err != nil {
		t.Fatal(err)
	}
	want, err := builtin.ReadFile("builtin/work/ttl_lru_cache/tests/test_cache_hidden.py")
	if err != nil {
		t.Fatal(err)
	}
	task := r.Task("ttl_lru_cache")
	if task.Tests["test_cache_hidden.py"] != string(want) || task.Tests["test_cache.py"] != task.Files["test_cache.py"] ||
		!strings.Contains(task.Files["test_cache.py"], "class TestTTLCache") {
		t.Errorf("ttl_lru_cache's files: %v", task.Tests)
	}
	if _, err := Load("work/ttl_lru_cache/files/cache"); err == nil {
		t.Error("a file of the built-in's folder loads as a recipe")
	}
}
