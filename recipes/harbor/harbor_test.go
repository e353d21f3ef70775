package harbor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"jspark/recipes"
	"jspark/recipes/check"
)

// writeTree writes files (slash path → content) under dir.
func writeTree(t *testing.T, dir string, files map[string]string) {
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

// A task whose image is a plain base and whose tests need only sh and
// python3, written as Harbor lays a task out.
var plainTask = map[string]string{
	"task.toml": `version = "1.0"

[metadata]
difficulty = "easy"
tags = ["files"]

[agent]
timeout_sec = 120.0

[verifier]
timeout_sec = 30.0
env = { GREETING_NAME = "world" }

[environment]
cpus = 1
memory_mb = 2048
`,
	"instruction.md":         "Make /app/greet.py print `Hello, NAME!` for the NAME in its first argument, and\nwrite its output for `world` to /app/greeting.txt.\n",
	"environment/Dockerfile": "# A plain image: nothing installed.\nFROM python:3.12-slim\n\nWORKDIR /app\nCOPY greet.py /app/\n",
	"environment/greet.py":   "import sys\n\nraise SystemExit('not written yet')\n",
	"tests/test.sh": `#!/bin/bash
# Harbor runs this after the agent stops.
cd /app
if /tests/run.sh; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
`,
	"tests/run.sh": "#!/bin/sh\nexec python3 /tests/test_greeting.py\n",
	"tests/test_greeting.py": `import os
import subprocess
import sys
import unittest


class TestGreeting(unittest.TestCase):
    def test_file(self):
        with open("/app/greeting.txt") as f:
            self.assertEqual(f.read(), "Hello, " + os.environ["GREETING_NAME"] + "!\n")

    def test_program(self):
        out = subprocess.run([sys.executable, "/app/greet.py", "Ada"], capture_output=True, text=True)
        self.assertEqual(out.stdout, "Hello, Ada!\n")


if __name__ == "__main__":
    unittest.main()
`,
	"solution/solve.sh": `#!/bin/bash
cat > /app/greet.py <<'EOF'
import sys

print(f"Hello, {sys.argv[1]}!")
EOF
python3 /app/greet.py world > /app/greeting.txt
`,
}

// A task that needs its own image: it installs packages, and its tests run
// pytest through uvx.
var imageTask = map[string]string{
	"task.toml":              "version = \"1.0\"\n[agent]\ntimeout_sec = 900.0\n",
	"instruction.md":         "Fix the web server in /app so that /health answers 200.\n",
	"environment/Dockerfile": "FROM ubuntu:24.04\nRUN apt-get update && \\\n    apt-get install -y curl nginx\nWORKDIR /app\n",
	"tests/test.sh":          "#!/bin/bash\ncurl -LsSf https://astral.sh/uv/install.sh | sh\nuvx pytest /tests/test_outputs.py\n",
	"tests/test_outputs.py":  "import requests\n\ndef test_health():\n    assert requests.get('http://localhost/health').status_code == 200\n",
	"solution/solve.sh":      "#!/bin/bash\nnginx -s reload\n",
}

// Two task folders: the plain one is imported runnable and its oracle
// passes `recipes check` (and its nop fails); the other is listed as not
// runnable here, with the reason, and no round runs it.
func TestImportTwoTasks(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bench")
	writeTree(t, filepath.Join(dir, "hello-greeting"), plainTask)
	writeTree(t, filepath.Join(dir, "fix-nginx"), imageTask)
	im, err := Import(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Task{
		{Dir: filepath.Join(dir, "fix-nginx"), ID: "fix-nginx", NotRunnable: "environment/Dockerfile:2: RUN changes the image (RUN apt-get update && apt-get install -y curl nginx), which cannot be built here"},
		{Dir: filepath.Join(dir, "hello-greeting"), ID: "hello-greeting"},
	}
	if len(im.Tasks) != 2 || im.Tasks[0] != want[0] || im.Tasks[1] != want[1] {
		t.Fatalf("tasks %+v", im.Tasks)
	}
	r, err := recipes.Parse("bench.yaml", im.YAML)
	if err != nil {
		t.Fatalf("%v\n%s", err, im.YAML)
	}
	if len(r.Rounds) != 1 || strings.Join(r.Rounds[0].Tasks, ",") != "hello-greeting" || r.Window.D().Seconds() != 120 {
		t.Errorf("rounds %+v window %v", r.Rounds, r.Window.D())
	}
	hello := r.Task("hello-greeting")
	if hello.CheckTimeout.D().Seconds() != 30 || hello.Files["greet.py"] != plainTask["environment/greet.py"] ||
		!strings.Contains(hello.Prompt, "Make ./greet.py print") || !strings.Contains(hello.Prompt, "to ./greeting.txt.") {
		t.Errorf("hello-greeting: %+v", hello)
	}
	if got := hello.Tests[".harbor/tests/test.sh"]; !strings.Contains(got, "echo 1 > .harbor/logs/verifier/reward.txt") || !strings.Contains(got, "cd .\n") {
		t.Errorf("test.sh as imported:\n%s", got)
	}
	if !strings.Contains(string(im.YAML), "# Not runnable here: fix-nginx: environment/Dockerfile:2") {
		t.Errorf("the header does not list the task that cannot run:\n%s", im.YAML)
	}

	reports, err := check.Recipe(context.Background(), r, check.Options{Out: t.TempDir(), OutputLimit: 4000, Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	fix, hi := reports[0], reports[1]
	if fix.NotRunnable != im.Tasks[0].NotRunnable || fix.Oracle != nil {
		t.Errorf("fix-nginx: %+v", fix)
	}
	if hi.Problem != "" || !hi.Oracle.Result.Passed || hi.Nop.Result.Passed || !strings.Contains(hi.Oracle.Result.Output, "reward: 1.0") {
		t.Errorf("hello-greeting: problem %q\noracle %+v\nnop %+v", hi.Problem, hi.Oracle, hi.Nop)
	}
}

// Each kind of task that cannot run here, with the reason it is given.
func TestNotRunnableReasons(t *testing.T) {
	with := func(edits map[string]string) map[string]string {
		m := map[string]string{}
		for k, v := range plainTask {
			m[k] = v
		}
		for k, v := range edits {
			if v == "" {
				delete(m, k)
			} else {
				m[k] = v
			}
		}
		return m
	}
	cases := []struct {
		name  string
		edits map[string]string
		want  string
	}{
		{"custom image", map[string]string{"environment/Dockerfile": "FROM ghcr.io/acme/tools:1\nWORKDIR /app\n"},
			"environment/Dockerfile:1: FROM ghcr.io/acme/tools:1: an image whose contents are not known here (plain bases: python, ubuntu, debian, alpine, busybox)"},
		{"env", map[string]string{"environment/Dockerfile": "FROM debian:12\nENV X=1\nWORKDIR /app\n"},
			"environment/Dockerfile:2: ENV changes the image (ENV X=1), which cannot be built here"},
		{"multi-stage", map[string]string{"environment/Dockerfile": "FROM python:3 AS a\nFROM python:3\n"},
			"environment/Dockerfile:2: a second FROM (a multi-stage build) builds an image that cannot be built here"},
		{"no workdir", map[string]string{"environment/Dockerfile": "FROM alpine:3\n"},
			"environment/Dockerfile sets no WORKDIR: the task's paths have no folder to become the workspace"},
		{"copy outside", map[string]string{"environment/Dockerfile": "FROM python:3\nWORKDIR /app\nCOPY greet.py /etc/\n"},
			"environment/Dockerfile:3: COPY to /etc/, outside the WORKDIR /app: only the workspace is imported"},
		{"compose", map[string]string{"environment/docker-compose.yaml": "services: {}\n"},
			"environment/docker-compose.yaml defines services; Docker Compose cannot run here"},
		{"prebuilt image", map[string]string{"environment/Dockerfile": "", "task.toml": "[environment]\ndocker_image = \"acme/x:1\"\n"},
			"task.toml's environment.docker_image acme/x:1: an image whose contents are not known here (plain bases: python, ubuntu, debian, alpine, busybox)"},
		{"pip in the tests", map[string]string{"tests/test.sh": "pip install pytest\npytest /tests\n"},
			"tests/test.sh:1 runs pip, which is not among the base tools (sh, python3, coreutils, grep, sed, awk, find)"},
		{"python -m pytest", map[string]string{"tests/test.sh": "#!/bin/sh\nset -e\npython3 -m pytest -q /tests/test_greeting.py\n"},
			"tests/test.sh:3 runs python3 -m pytest, which is not in Python's standard library"},
		{"numpy", map[string]string{"tests/test_greeting.py": "import os, numpy as np\n"},
			"tests/test_greeting.py:1 imports numpy, which is neither in Python's standard library nor a module of the task"},
		{"cd elsewhere", map[string]string{"tests/test.sh": "cd /tmp && ls\n"},
			"tests/test.sh:1 changes directory to /tmp: the import runs scripts from the workspace (the WORKDIR /app), where its paths are relative"},
		{"command in the solution", map[string]string{"solution/solve.sh": "echo ok | jq .\n"},
			"solution/solve.sh:1 runs jq, which is not among the base tools (sh, python3, coreutils, grep, sed, awk, find)"},
		{"binary test file", map[string]string{"tests/data.bin": "\x00\x01"}, "tests/data.bin is binary: a recipe holds text files"},
		{"host secret", map[string]string{"task.toml": "[verifier]\nenv = { OPENAI_API_KEY = \"${OPENAI_API_KEY}\" }\n"},
			"its verifier needs OPENAI_API_KEY from the host (verifier.env)"},
		{"separate verifier", map[string]string{"task.toml": "[verifier]\nenvironment_mode = \"separate\"\n"},
			"its verifier runs in an environment of its own (verifier.environment_mode = \"separate\")"},
		{"steps", map[string]string{"task.toml": "[[steps]]\nname = \"one\"\n"},
			"a multi-step task ([[steps]] in task.toml): each step's tests run between agent turns, which jspark does not do"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "one-task")
			writeTree(t, dir, with(c.edits))
			im, err := Import(dir)
			if !errors.Is(err, ErrNoneRunnable) {
				t.Fatalf("Import: %v, want ErrNoneRunnable", err)
			}
			if len(im.Tasks) != 1 || im.Tasks[0].NotRunnable != c.want {
				t.Errorf("got  %q\nwant %q", im.Tasks[0].NotRunnable, c.want)
			}
		})
	}
}

// A folder that is not a task, or a task with a broken task.toml, is an
// error naming the file.
func TestImportErrors(t *testing.T) {
	empty := t.TempDir()
	if _, err := Import(empty); err == nil || !strings.Contains(err.Error(), "no task.toml in it or in its folders") {
		t.Errorf("empty folder: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	writeTree(t, bad, map[string]string{"task.toml": "version = \"1.0\"\n[agent\n", "instruction.md": "x\n", "tests/test.sh": "true\n"})
	if _, err := Import(bad); err == nil || !strings.HasPrefix(err.Error(), filepath.Join(bad, "task.toml")+":3: expected '.' or ']' to end table name") {
		t.Errorf("broken task.toml: %v", err)
	}
	noTests := filepath.Join(t.TempDir(), "nt")
	writeTree(t, noTests, map[string]string{"task.toml": "", "instruction.md": "x\n"})
	if _, err := Import(noTests); err == nil || !strings.Contains(err.Error(), "no tests/test.sh") {
		t.Errorf("no tests: %v", err)
	}
}

func TestRewrite(t *testing.T) {
	maps := rewriter("/app")
	cases := []struct{ in, want string }{
		{"cat /app/out.txt", "cat ./out.txt"},
		{"cd /app", "cd ."},
		{"open('/app')", "open('.')"},
		{"the folder /app.", "the folder .."},
		{"/application and /app.py and /app_x", "/application and /app.py and /app_x"},
		{"echo 1 > /logs/verifier/reward.txt", "echo 1 > .harbor/logs/verifier/reward.txt"},
		{"python3 /tests/t.py", "python3 .harbor/tests/t.py"},
		{"/usr/tests/x and x/tests", "/usr/tests/x and x/tests"},
		{"bash /solution/solve.sh", "bash .harbor/solution/solve.sh"},
	}
	for _, c := range cases {
		if got := rewrite(c.in, maps); got != c.want {
			t.Errorf("rewrite(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// The script scanner reads what bash would run, not the words around it.
func TestScriptScanner(t *testing.T) {
	sc := &scanner{workdir: "/app", stdlib: set("unittest json os sys"), local: set("mine")}
	ok := []string{
		"#!/bin/bash\nset -euo pipefail\nX=1 python3 -c 'import json'\n",
		"for f in a b c; do echo $f | tr a-z A-Z; done\n",
		"case \"$1\" in\n  start) echo go ;;\n  *) exit 1 ;;\nesac\n",
		"check() { grep -q ok \"$1\"; }\ncheck out.txt && echo 1\n",
		"cat <<EOF > x.txt\ncurl is only text here\nEOF\n",
		"result=$(python3 -m unittest -q 2>&1) || true\n",
		"if [ -f ./x ]; then timeout 10s python3 x.py; fi\n",
		"echo 'uvx # not a command'  # a comment: curl\n",
		"(cd . && ls)\n",
		"./run_me.sh --fast\n",
		"if true; then echo 1; fi > out.txt 2>&1\n",
		">log echo hi; echo x 2>/dev/null >> y; cat < in.txt\n",
	}
	for _, s := range ok {
		if why := sc.script("t.sh", s); why != "" {
			t.Errorf("%q: %s", s, why)
		}
	}
	bad := map[string]string{
		"apt-get install -y jq\n":          "t.sh:1 runs apt-get,",
		"echo x && curl http://x\n":        "t.sh:1 runs curl,",
		"y=$(wget -q -O- x)\n":             "t.sh:1 runs wget,",
		"echo a \\\n  | node x.js\n":       "t.sh:1 runs node,",
		"timeout 5 uvx pytest\n":           "t.sh:1 runs uvx,",
		"$PY -m x\n":                       "t.sh:1 runs the command in $PY",
		"true\nenv A=1 pytest\n":           "t.sh:2 runs pytest,",
		"python3 -m mine\npython3 -m np\n": "t.sh:2 runs python3 -m np,",
		"echo x > f; > g curl x\n":         "t.sh:1 runs curl,",
	}
	for s, want := range bad {
		if why := sc.script("t.sh", s); !strings.HasPrefix(why, want) {
			t.Errorf("%q: %q, want %q…", s, why, want)
		}
	}
}

// Any Dockerfile or script text is read without a panic.
func FuzzScanners(f *testing.F) {
	f.Add(plainTask["environment/Dockerfile"], plainTask["tests/test.sh"])
	f.Add(imageTask["environment/Dockerfile"], imageTask["tests/test.sh"])
	f.Add("FROM python\nWORKDIR app\nCOPY --chown=1 . .\n", "cat <<-'E'\n\tx\n\tE\n$(`a`)")
	f.Fuzz(func(t *testing.T, dockerText, script string) {
		dockerfile(t.TempDir(), dockerText)
		sc := &scanner{workdir: "/app", stdlib: set("os"), local: set("")}
		sc.script("t.sh", script)
		sc.python("t.py", script)
		rewrite(script, rewriter("/app"))
	})
}
