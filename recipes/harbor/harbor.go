// Package harbor imports Harbor (Terminal-Bench 2) task folders into a
// recipe. A task folder holds task.toml (timeouts, the verifier's
// environment), instruction.md (the prompt), environment/Dockerfile (what
// the task runs in), tests/test.sh (run after the agent stops; it writes a
// reward, 0 to 1, to /logs/verifier/reward.txt or reward.json) and
// optionally solution/solve.sh (the oracle). docs/recipes.md says how
// each part maps.
//
// Docker cannot run here, so a task is imported as runnable only when its
// image is a plain base image (python, ubuntu, debian, alpine, busybox) with
// nothing installed, at most a WORKDIR and COPYs of the build context, and
// its scripts run only base tools (sh, python3, coreutils) and Python's
// standard library. Any other task is imported with not_runnable: the
// reason, and no round runs it.
package harbor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/BurntSushi/toml"

	"jspark/recipes"
)

const (
	// hidden is the workspace folder Harbor's /tests, /solution and /logs
	// become; the session never sees the first two (they are hidden tests
	// and the solution), and the check makes the third.
	hidden = ".harbor"
	// maxFile bounds one imported file (a recipe holds at most MaxBytes).
	maxFile = 256 << 10
	// defaultTimeout is the agent's and the verifier's time when task.toml
	// gives none.
	defaultTimeout = 600
)

// taskConfig is what the import reads of task.toml; other keys are ignored.
type taskConfig struct {
	Agent struct {
		TimeoutSec float64 `toml:"timeout_sec"`
	} `toml:"agent"`
	Verifier struct {
		TimeoutSec      float64           `toml:"timeout_sec"`
		Env             map[string]string `toml:"env"`
		EnvironmentMode string            `toml:"environment_mode"`
	} `toml:"verifier"`
	Environment struct {
		DockerImage string `toml:"docker_image"`
	} `toml:"environment"`
	Steps []map[string]any `toml:"steps"`
}

// Task is what the import found of one task folder.
type Task struct {
	Dir string `json:"dir"`
	ID  string `json:"id"`
	// NotRunnable is why the task cannot run here; empty when it can.
	NotRunnable string `json:"not_runnable,omitempty"`
}

// Imported is a recipe made from task folders, and what was found of each.
type Imported struct {
	YAML  []byte
	Tasks []Task
}

// ErrNoneRunnable is Import's error when no task can run here; Imported
// still lists each task and why.
var ErrNoneRunnable = errors.New("no task can run here")

// Import reads dir, one task folder (it holds task.toml) or a folder of
// them, into a recipe named after dir: each runnable task in one round. The
// YAML it returns is a valid recipe (recipes.Parse accepts it). An error
// names the file: a task.toml that does not parse, a folder without
// instruction.md or tests/test.sh.
func Import(dir string) (*Imported, error) {
	dirs, err := taskDirs(dir)
	if err != nil {
		return nil, err
	}
	stdlib, err := pythonStdlib()
	if err != nil {
		return nil, err
	}
	rec := recipe{
		Name:     strings.Trim(idOf(filepath.Base(filepath.Clean(dir))), "-"),
		System:   system,
		Tools:    []string{"bash", "read", "write", "edit", "list", "search"},
		Sampling: sampling{MaxTokens: 1024, ToolChoice: "auto"},
		Shell:    shell{Timeout: "60s", OutputLimit: 4000},
	}
	if rec.Name == "" {
		rec.Name = "harbor"
	}
	im := &Imported{}
	ids := map[string]bool{}
	window := 0.0
	for _, d := range dirs {
		t, agentSec, err := importTask(d, stdlib)
		if err != nil {
			return nil, err
		}
		t.ID = uniqueID(idOf(filepath.Base(d)), ids)
		rec.Tasks = append(rec.Tasks, t)
		im.Tasks = append(im.Tasks, Task{Dir: d, ID: t.ID, NotRunnable: t.NotRunnable})
		if t.NotRunnable == "" {
			window = max(window, agentSec)
		}
	}
	var run []string
	for _, t := range rec.Tasks {
		if t.NotRunnable == "" {
			run = append(run, t.ID)
		}
	}
	if len(run) == 0 {
		return im, fmt.Errorf("%s: %w (%d tasks: each says why)", dir, ErrNoneRunnable, len(rec.Tasks))
	}
	rec.Window = seconds(window)
	rec.Rounds = []round{{Name: "harbor", Concurrency: len(run), Tasks: run}}
	if im.YAML, err = rec.encode(dir, im.Tasks); err != nil {
		return im, err
	}
	if _, err := recipes.Parse(rec.Name+".yaml", im.YAML); err != nil {
		return im, fmt.Errorf("the recipe imported from %s is not valid: %w", dir, err)
	}
	return im, nil
}

// taskDirs is dir when it is a task folder, else its subfolders that are,
// in name order.
func taskDirs(dir string) ([]string, error) {
	if _, err := os.Stat(filepath.Join(dir, "task.toml")); err == nil {
		return []string{dir}, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(dir, e.Name(), "task.toml")); e.IsDir() && err == nil {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no task.toml in it or in its folders: not a Harbor task folder", dir)
	}
	return out, nil
}

// importTask reads one task folder into a recipe task and the agent's
// timeout in seconds.
func importTask(dir string, stdlib map[string]bool) (task, float64, error) {
	var t task
	t.Kind = "code"
	tomlText, why, err := taskFile(filepath.Join(dir, "task.toml"), "task.toml")
	if err == nil && why != "" {
		err = errors.New(why)
	}
	if err != nil {
		return t, 0, fmt.Errorf("%s: %w", dir, err)
	}
	var cfg taskConfig
	if _, err := toml.Decode(tomlText, &cfg); err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return t, 0, fmt.Errorf("%s:%d: %s", filepath.Join(dir, "task.toml"), pe.Position.Line, pe.Message)
		}
		return t, 0, fmt.Errorf("%s: %w", filepath.Join(dir, "task.toml"), err)
	}
	instruction, why, err := taskFile(filepath.Join(dir, "instruction.md"), "instruction.md")
	if err == nil && why != "" {
		err = errors.New(why)
	}
	if err != nil {
		return t, 0, fmt.Errorf("%s: %w", dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tests", "test.sh")); err != nil {
		return t, 0, fmt.Errorf("%s: no tests/test.sh: Harbor runs it to score the task", dir)
	}
	agentSec := or(cfg.Agent.TimeoutSec, defaultTimeout)
	t.Prompt = strings.TrimSpace(instruction) + "\n"
	notRunnable := func(why string) (task, float64, error) {
		t.NotRunnable = why
		return t, agentSec, nil
	}
	switch {
	case len(cfg.Steps) > 0:
		return notRunnable("a multi-step task ([[steps]] in task.toml): each step's tests run between agent turns, which jspark does not do")
	case cfg.Verifier.EnvironmentMode == "separate":
		return notRunnable("its verifier runs in an environment of its own (verifier.environment_mode = \"separate\")")
	}
	e, why, err := readEnv(dir, &cfg)
	if err != nil {
		return t, 0, fmt.Errorf("%s: %w", dir, err)
	}
	if why != "" {
		return notRunnable(why)
	}
	maps := rewriter(e.workdir)
	tests, why, err := readTree(dir, "tests", maps)
	if err != nil || why != "" {
		t2, s, _ := notRunnable(why)
		return t2, s, err
	}
	solution, why, err := readTree(dir, "solution", maps)
	if err != nil || why != "" {
		t2, s, _ := notRunnable(why)
		return t2, s, err
	}
	sc := &scanner{workdir: e.workdir, stdlib: stdlib, local: localModules(instruction, e.seed, tests, solution)}
	if why := scanTree(sc, tests, "tests/"); why != "" {
		return notRunnable(why)
	}
	if why := scanTree(sc, solution, "solution/"); why != "" {
		return notRunnable(why)
	}
	env, why := verifierEnv(cfg.Verifier.Env)
	if why != "" {
		return notRunnable(why)
	}
	t.Prompt = fmt.Sprintf("(This task was written for the folder %s; here that folder is your workspace, the current folder, and its paths are given relative to it.)\n\n%s",
		e.workdir, rewrite(t.Prompt, maps))
	t.Files = e.seed
	t.Tests = map[string]string{}
	for p, c := range tests {
		t.Tests[hidden+"/tests/"+p] = c
	}
	t.Check = env + harborCheck
	t.CheckTimeout = seconds(or(cfg.Verifier.TimeoutSec, defaultTimeout))
	if len(solution) > 0 {
		t.Solution = &solutionSpec{Files: map[string]string{}}
		for p, c := range solution {
			t.Solution.Files[hidden+"/solution/"+p] = c
		}
		if _, ok := solution["solve.sh"]; ok {
			t.Solution.Script = "chmod -R u+x " + hidden + "/solution && bash " + hidden + "/solution/solve.sh"
		}
	}
	return t, agentSec, nil
}

// harborCheck runs Harbor's test script as its verifier does (its files made
// executable, so that it may run its helpers by path) and passes on full
// marks: a reward of 1 in reward.txt, or reward.json's "reward".
const harborCheck = `rm -rf .harbor/logs && mkdir -p .harbor/logs/verifier .harbor/logs/agent .harbor/logs/artifacts
chmod -R u+x .harbor/tests
bash .harbor/tests/test.sh
python3 -c 'import json, pathlib, sys
d = pathlib.Path(".harbor/logs/verifier")
t, j = d / "reward.txt", d / "reward.json"
r = float(t.read_text()) if t.exists() else json.loads(j.read_text())["reward"] if j.exists() else None
print("reward:", r)
sys.exit(0 if r is not None and r >= 1 else 1)'
`

// verifierEnv is task.toml's verifier env as exports before the check; a
// value that reads the host's variables (an API key for an LLM judge)
// cannot be given here.
func verifierEnv(env map[string]string) (string, string) {
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		if strings.Contains(env[k], "${") || !assignment.MatchString(k+"=") {
			return "", fmt.Sprintf("its verifier needs %s from the host (verifier.env)", k)
		}
		fmt.Fprintf(&b, "export %s='%s'\n", k, strings.ReplaceAll(env[k], "'", `'\''`))
	}
	return b.String(), ""
}

// readTree reads the text files under dir/sub by slash path, each with
// Harbor's paths rewritten; none when sub does not exist.
func readTree(dir, sub string, maps []pathMap) (files map[string]string, reason string, err error) {
	root := filepath.Join(dir, sub)
	files = map[string]string{}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) && p == root {
			return fs.SkipAll
		}
		if err != nil || d.IsDir() || reason != "" {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		text, why, err := taskFile(p, path.Join(sub, filepath.ToSlash(rel)))
		if err != nil || why != "" {
			reason = why
			return err
		}
		files[filepath.ToSlash(rel)] = rewrite(text, maps)
		return nil
	})
	return files, reason, err
}

// scanTree returns why one of the scripts or Python files cannot run here.
func scanTree(sc *scanner, files map[string]string, prefix string) string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		text := files[n]
		first, _, _ := strings.Cut(text, "\n")
		switch {
		case strings.HasSuffix(n, ".py"):
			if why := sc.python(prefix+n, text); why != "" {
				return why
			}
		case strings.HasSuffix(n, ".sh") || strings.HasPrefix(first, "#!") && strings.Contains(first, "sh"):
			if why := sc.script(prefix+n, text); why != "" {
				return why
			}
		}
	}
	return ""
}

var pyFileName = regexp.MustCompile(`\b([A-Za-z_][A-Za-z0-9_]*)\.py\b`)

// localModules are the Python modules a task provides: its .py files and
// packages, and those its instruction asks the agent to write (name.py).
func localModules(instruction string, trees ...map[string]string) map[string]bool {
	m := map[string]bool{}
	for _, tree := range trees {
		for p := range tree {
			top, _, _ := strings.Cut(p, "/")
			m[strings.TrimSuffix(top, ".py")] = true
			m[strings.TrimSuffix(path.Base(p), ".py")] = true
		}
	}
	for _, f := range pyFileName.FindAllStringSubmatch(instruction, -1) {
		m[f[1]] = true
	}
	return m
}

// taskFile reads one file of a task folder as text; reason is why it
// cannot go into a recipe (a symlink, binary, over maxFile).
func taskFile(p, name string) (text, reason string, err error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return "", "", err
	}
	if !fi.Mode().IsRegular() {
		return "", name + " is not a regular file (a symlink or device): the import reads files only", nil
	}
	b, err := readText(p, maxFile)
	if errors.Is(err, errTooBig) {
		return "", fmt.Sprintf("%s is over %d KiB: a recipe holds small text files", name, maxFile>>10), nil
	}
	if err != nil {
		return "", "", err
	}
	if !utf8.ValidString(b) || strings.IndexByte(b, 0) >= 0 {
		return "", name + " is binary: a recipe holds text files", nil
	}
	return b, "", nil
}

var errTooBig = errors.New("file too big")

// readText reads at most limit bytes of a file.
func readText(p string, limit int64) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return "", err
	}
	if int64(len(b)) > limit {
		return "", errTooBig
	}
	return string(b), nil
}

// pythonStdlib is the standard library's top-level modules of the python3
// the sandboxes run (asked once a process).
var pythonStdlib = sync.OnceValues(func() (map[string]bool, error) {
	out, err := exec.Command("python3", "-c", "import sys; print(' '.join(sorted(sys.stdlib_module_names)))").Output()
	if err != nil {
		return nil, fmt.Errorf("python3 (3.10 or later) lists its standard library for the import: %w", err)
	}
	return set(string(bytes.TrimSpace(out))), nil
})

var notID = regexp.MustCompile(`[^a-z0-9_-]+`)

// idOf is a folder name as a task id.
func idOf(name string) string {
	id := strings.Trim(notID.ReplaceAllString(strings.ToLower(name), "-"), "-_")
	if id == "" {
		return "task"
	}
	return id
}

func uniqueID(id string, seen map[string]bool) string {
	out := id
	for n := 2; seen[out]; n++ {
		out = fmt.Sprintf("%s-%d", id, n)
	}
	seen[out] = true
	return out
}

func cleanRel(p string) bool {
	return p != "" && !path.IsAbs(p) && p != "." && p != ".." && !strings.HasPrefix(p, "../")
}

func or(v, def float64) float64 {
	if v > 0 {
		return v
	}
	return def
}

func seconds(s float64) string { return fmt.Sprintf("%gs", s) }
