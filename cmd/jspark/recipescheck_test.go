package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// `jspark recipes check` on the built-in recipe: every task's oracle passes
// its hidden tests and its nop fails them; check.json records each trial.
func TestRecipesCheckBuiltin(t *testing.T) {
	out := filepath.Join(t.TempDir(), "check")
	stdout, stderr, code := jspark(t, "recipes", "check", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	ok := regexp.MustCompile(`(?m)^  \S+ +ok +oracle passes .*; nop fails .*$`)
	if n := len(ok.FindAllString(stdout, -1)); n != 7 || !strings.HasSuffix(stdout, "7 tasks: 7 discriminate, 0 do not, 0 not runnable here\n") {
		t.Errorf("%d ok lines:\n%s", n, stdout)
	}
	var rec struct {
		Recipe string `json:"recipe"`
		Tasks  []struct {
			Task   string
			Oracle struct{ Result struct{ Passed bool } }
			Nop    struct{ Result struct{ Passed bool } }
		}
	}
	b, err := os.ReadFile(filepath.Join(out, "check.json"))
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	if err != nil || rec.Recipe != "builtin:work" || len(rec.Tasks) != 7 || !rec.Tasks[0].Oracle.Result.Passed || rec.Tasks[0].Nop.Result.Passed {
		t.Errorf("check.json: %v %+v", err, rec)
	}
	if _, err := os.Stat(filepath.Join(out, "ttl_lru_cache", "oracle", "workspace", "test_cache_hidden.py")); err != nil {
		t.Errorf("the oracle's workspace: %v", err)
	}
}

// A task whose untouched workspace passes is named, with the check's
// output, and the command exits 1.
func TestRecipesCheckNamesTasksThatDoNotDiscriminate(t *testing.T) {
	dir := t.TempDir()
	recipe := filepath.Join(dir, "r.yaml")
	os.WriteFile(recipe, []byte(`name: r
tools: [bash]
sampling: {max_tokens: 16}
tasks:
  - id: good
    kind: code
    prompt: Make the file done.
    check: test -f done
    solution: {script: touch done}
  - id: loose
    kind: code
    prompt: Make the file done.
    check: echo anything goes
    solution: {script: touch done}
rounds:
  - {name: r, concurrency: 2, tasks: [good, loose]}
`), 0o644)
	stdout, stderr, code := jspark(t, "recipes", "check", recipe, "--out", filepath.Join(dir, "out"))
	if code != 1 || !strings.Contains(stderr, "1 of 2 tasks do not discriminate") {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	want := "  loose                    FAIL  the untouched workspace passes it: the check does not tell work from none\n" +
		"      nop's check output, last lines:\n        anything goes\n"
	if !strings.Contains(stdout, want) || !strings.Contains(stdout, "  good                     ok    oracle passes (exit 0") {
		t.Errorf("stdout:\n%s", stdout)
	}
	// The output folder is the run's: a second check into it is refused.
	if _, stderr, code := jspark(t, "recipes", "check", recipe, "--out", filepath.Join(dir, "out")); code == 0 || !strings.Contains(stderr, "holds another run's results") {
		t.Errorf("reused --out: %d %s", code, stderr)
	}
}

// `jspark recipes import harbor` on two task folders: the one whose tests
// need only the base tools is imported runnable and `recipes check` runs
// and scores it; the one that needs its Docker image is listed as not
// runnable here, with the reason.
func TestRecipesImportHarbor(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "tasks")
	for p, c := range map[string]string{
		"count-lines/task.toml":               "version = \"1.0\"\n[verifier]\ntimeout_sec = 20.0\n",
		"count-lines/instruction.md":          "Write the number of lines of /app/data.txt to /app/count.txt.\n",
		"count-lines/environment/Dockerfile":  "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY data.txt .\n",
		"count-lines/environment/data.txt":    "a\nb\nc\n",
		"count-lines/tests/test.sh":           "#!/bin/bash\nif [ \"$(cat /app/count.txt)\" = 3 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n",
		"count-lines/solution/solve.sh":       "#!/bin/bash\nwc -l < /app/data.txt > /app/count.txt\n",
		"build-kernel/task.toml":              "version = \"1.0\"\n",
		"build-kernel/instruction.md":         "Build the kernel in /src.\n",
		"build-kernel/environment/Dockerfile": "FROM ubuntu:24.04\nRUN apt-get install -y build-essential\n",
		"build-kernel/tests/test.sh":          "make -C /src check\n",
	} {
		full := filepath.Join(dir, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		os.WriteFile(full, []byte(c), 0o644)
	}
	recipe := filepath.Join(t.TempDir(), "tasks.yaml")
	stdout, stderr, code := jspark(t, "recipes", "import", "harbor", dir, "-o", recipe)
	want := "build-kernel: not runnable here: environment/Dockerfile:2: RUN changes the image (RUN apt-get install -y build-essential), which cannot be built here\ncount-lines: runnable\n"
	if code != 0 || stdout != "" || stderr != want {
		t.Fatalf("import: exit %d\nstdout %q\nstderr %q\nwant   %q", code, stdout, stderr, want)
	}
	stdout, stderr, code = jspark(t, "recipes", "check", recipe, "--out", filepath.Join(t.TempDir(), "out"))
	if code != 0 || !strings.Contains(stdout, "  count-lines              ok    oracle passes (exit 0") ||
		!strings.Contains(stdout, "  build-kernel             skip  not runnable here: environment/Dockerfile:2: RUN") ||
		!strings.HasSuffix(stdout, "2 tasks: 1 discriminate, 0 do not, 1 not runnable here\n") {
		t.Errorf("check: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if _, stderr, code := jspark(t, "recipes", "import", "harbor", dir, "-o", recipe); code == 0 || !strings.Contains(stderr, "exists: the import does not overwrite a file") {
		t.Errorf("import over a file: %d %s", code, stderr)
	}
}
