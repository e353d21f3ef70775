// Package recipes owns the recipe format (YAML: a system prompt, tools,
// sampling, per-session limits, tasks with seed files, checks, hidden tests
// and solutions, and rounds of concurrent sessions), its validation with
// file:line messages, and the built-in recipes.
package recipes

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.yaml.in/yaml/v3"
)

// Recipe is one workload: what every session is told and may use, the tasks,
// and the rounds that run them.
type Recipe struct {
	Name     string   `yaml:"name" json:"name"`
	Window   Duration `yaml:"window" json:"window"`
	System   string   `yaml:"system" json:"system"`
	Tools    []string `yaml:"tools" json:"tools"`
	Sampling Sampling `yaml:"sampling" json:"sampling"`
	Nudge    Nudge    `yaml:"nudge" json:"nudge"`
	Shell    Shell    `yaml:"shell" json:"shell"`
	Context  Context  `yaml:"context" json:"context"`
	Agent    Agent    `yaml:"agent" json:"agent"`
	Limits   Limits   `yaml:"limits" json:"limits"`
	Tasks    []Task   `yaml:"tasks" json:"tasks"`
	Rounds   []Round  `yaml:"rounds" json:"rounds"`

	File string `yaml:"-" json:"file"` // where it came from ("builtin:work" for embedded ones)
}

// Sampling is what every request of the recipe asks for.
type Sampling struct {
	Temperature *float64 `yaml:"temperature" json:"temperature,omitempty"`
	TopP        *float64 `yaml:"top_p" json:"top_p,omitempty"`
	MaxTokens   int      `yaml:"max_tokens" json:"max_tokens"`
	Seed        *int     `yaml:"seed" json:"seed,omitempty"`
	ToolChoice  string   `yaml:"tool_choice" json:"tool_choice,omitempty"` // auto, required, none or a tool's name
}

// Nudge is the message sent when a response has no tool call, at most Max
// times in a row before the session ends.
type Nudge struct {
	Message string `yaml:"message" json:"message"`
	Max     int    `yaml:"max" json:"max"`
}

// Shell bounds each shell command and every tool's output.
type Shell struct {
	Timeout     Duration `yaml:"timeout" json:"timeout"`
	OutputLimit int      `yaml:"output_limit" json:"output_limit"` // bytes
}

// Context says what a session does when its conversation outgrows the
// model's context: "trim" drops the oldest half of the exchanges after the
// task (the prefix up to the task stays), "stop" ends the session.
type Context struct {
	OnFull string `yaml:"on_full" json:"on_full"`
}

// Agent says who works a session: jspark's own tool loop (kind jspark, the
// default), or an external coding agent installed from npm at an exact
// version and run in the session's sandbox against the engine.
type Agent struct {
	Kind    string `yaml:"kind" json:"kind"`                 // jspark, pi, codex or opencode
	Version string `yaml:"version" json:"version,omitempty"` // the npm package's exact version, like 0.73.1
}

// AgentKinds are the agents a recipe may name; all but jspark are external.
var AgentKinds = []string{"jspark", "pi", "codex", "opencode"}

// External reports whether the agent is not jspark's own loop.
func (a Agent) External() bool { return a.Kind != "" && a.Kind != "jspark" }

// Task is one piece of work a session is given.
type Task struct {
	ID     string            `yaml:"id" json:"id"`
	Kind   string            `yaml:"kind" json:"kind"` // prose or code
	Prompt string            `yaml:"prompt" json:"prompt"`
	Files  map[string]string `yaml:"files" json:"files,omitempty"` // seed files: relative path → content
	Check  string            `yaml:"check" json:"check,omitempty"` // shell command a finished solution passes
	// Expect is text the session's final reply must contain (checked with
	// Check: an external agent's answer is not in its workspace).
	Expect string `yaml:"expect" json:"expect,omitempty"`
	// Tests are hidden test files (relative path → content): the session
	// never sees them; they are copied in after its cut, over whatever the
	// agent wrote at their paths, and Check runs on the result.
	Tests map[string]string `yaml:"tests" json:"tests,omitempty"`
	// Solution solves the task (the oracle); nil: the task has none.
	Solution *Solution `yaml:"solution" json:"solution,omitempty"`
	// CheckTimeout bounds one run of Check (default: shell.timeout).
	CheckTimeout Duration `yaml:"check_timeout" json:"check_timeout"`
	// NotRunnable says why the task cannot run here (an imported task that
	// needs its own Docker image); empty: it can. No round may name such a
	// task, and `recipes check` lists it with the reason.
	NotRunnable string `yaml:"not_runnable" json:"not_runnable,omitempty"`
}

// Round is a set of sessions started together: session i works on
// Tasks[i % len(Tasks)]. A repeat round replays RepeatOf's tasks,
// concurrency and agent on the same backend, with byte-identical initial
// requests. Agent, when set, replaces the recipe's for this round.
type Round struct {
	Name        string   `yaml:"name" json:"name"`
	Concurrency int      `yaml:"concurrency" json:"concurrency"`
	Tasks       []string `yaml:"tasks" json:"tasks"`
	RepeatOf    string   `yaml:"repeat_of" json:"repeat_of,omitempty"`
	Agent       *Agent   `yaml:"agent" json:"agent,omitempty"`
}

// Duration is a time.Duration written as "180s" in YAML and JSON.
type Duration time.Duration

func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %q is not a duration (like 180s or 2m)", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

func (d Duration) MarshalJSON() ([]byte, error) {
	return strconv.AppendQuote(nil, time.Duration(d).String()), nil
}

// D is the duration as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// Task finds a task by id (nil: none).
func (r *Recipe) Task(id string) *Task {
	for i := range r.Tasks {
		if r.Tasks[i].ID == id {
			return &r.Tasks[i]
		}
	}
	return nil
}

// Round finds a round by name (nil: none).
func (r *Recipe) Round(name string) *Round {
	for i := range r.Rounds {
		if r.Rounds[i].Name == name {
			return &r.Rounds[i]
		}
	}
	return nil
}

// AgentOf is who works rd's sessions: its own agent, its first round's for a
// repeat, else the recipe's.
func (r *Recipe) AgentOf(rd *Round) Agent {
	if rd.RepeatOf != "" {
		rd = r.Round(rd.RepeatOf)
	}
	if rd.Agent != nil {
		return *rd.Agent
	}
	return r.Agent
}

// Plan is a round with its repeat resolved: the tasks of each session.
func (r *Recipe) Plan(rd *Round) []*Task {
	src := rd
	if rd.RepeatOf != "" {
		src = r.Round(rd.RepeatOf)
	}
	n := src.Concurrency
	out := make([]*Task, n)
	for i := range out {
		out[i] = r.Task(src.Tasks[i%len(src.Tasks)])
	}
	return out
}

// builtin holds the embedded recipes (builtin/NAME.yaml) and the files
// their !file values name (builtin/NAME/…).
//
//go:embed builtin
var builtin embed.FS

// Builtin lists the embedded recipes' names.
func Builtin() []string {
	ents, _ := builtin.ReadDir("builtin")
	var out []string
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), ".yaml"); ok && !e.IsDir() {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// Load reads a recipe by built-in name or file path.
func Load(nameOrFile string) (*Recipe, error) {
	if b, err := builtin.ReadFile("builtin/" + nameOrFile + ".yaml"); err == nil && !strings.ContainsAny(nameOrFile, "/.") {
		dir, _ := fs.Sub(builtin, "builtin")
		return parse("builtin:"+nameOrFile, b, dir)
	}
	b, err := readBounded(nameOrFile)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) && !strings.ContainsAny(nameOrFile, "/.") {
			return nil, fmt.Errorf("no recipe %q: not a built-in (%s) nor a file", nameOrFile, strings.Join(Builtin(), ", "))
		}
		return nil, err
	}
	return Parse(nameOrFile, b)
}

// Error is one problem in a recipe file.
type Error struct {
	File  string
	Line  int
	Field string // path like tasks[2].kind; empty for syntax errors
	Msg   string
}

func (e *Error) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("%s:%d: %s: %s", e.File, e.Line, e.Field, e.Msg)
}

// Errors are all the problems found in one file, in line order.
type Errors []*Error

func (es Errors) Error() string {
	var b strings.Builder
	for i, e := range es {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(e.Error())
	}
	return b.String()
}

var yamlLine = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)

// Parse decodes and validates a recipe; every error names file:line. A
// recipe over the bounds (bounds.go) is refused before it is decoded, and
// at most the first maxErrors errors are listed, then a count of the rest.
// Its !file values are read from file's folder (include.go), never from
// outside it.
func Parse(file string, data []byte) (*Recipe, error) {
	return parse(file, data, rootDir(filepath.Dir(file)))
}

// rootDir is a folder whose files are opened through os.Root, so that no
// symlink or ".." leads out of it.
type rootDir string

// Open opens without blocking: a FIFO named by a !file opens at once (and
// is refused as no regular file) instead of waiting for a writer.
func (d rootDir) Open(name string) (fs.File, error) {
	r, err := os.OpenRoot(string(d))
	if err != nil {
		return nil, err
	}
	defer r.Close() // a file opened through r outlives it
	return r.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

// parse is Parse reading !file values from dir.
func parse(file string, data []byte, dir fs.FS) (*Recipe, error) {
	if len(data) > MaxBytes {
		return nil, Errors{{File: file, Line: 1, Msg: fmt.Sprintf("over %d bytes: a recipe is a few hundred KB at most", MaxBytes)}}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, Errors{yamlError(file, err.Error())}
	}
	if len(root.Content) == 0 {
		return nil, Errors{{File: file, Line: 1, Msg: "empty recipe"}}
	}
	if es := bounds(file, &root); len(es) > 0 {
		return nil, es
	}
	lines := map[string]int{}
	index(root.Content[0], "", lines)
	var r Recipe
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&r); err != nil {
		var te *yaml.TypeError
		msgs := []string{err.Error()}
		if errors.As(err, &te) {
			msgs = te.Errors
		}
		var es errorList
		for _, m := range msgs {
			if len(es.es) == maxErrors {
				es.more++ // naming the field costs a look at every line
				continue
			}
			es.add(fieldOf(yamlError(file, m), lines))
		}
		return nil, es.list()
	}
	if replaced, es := include(file, &root, dir, MaxBytes-len(data)); len(es) > 0 {
		return nil, es
	} else if replaced {
		// The decoder above saw the !file values as their paths and checked
		// every field; the document now holds their text.
		r = Recipe{}
		if err := root.Decode(&r); err != nil {
			return nil, Errors{yamlError(file, err.Error())}
		}
	}
	r.File = file
	if es := r.validate(file, lines); len(es) > 0 {
		return nil, capErrors(es)
	}
	r.defaults()
	return &r, nil
}

func yamlError(file, msg string) *Error {
	msg = strings.TrimSpace(msg)
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[1])
		return &Error{File: file, Line: n, Msg: m[2]}
	}
	return &Error{File: file, Line: 1, Msg: msg}
}

var (
	yamlUnknown = regexp.MustCompile("^field (\\S+) not found in type \\S+$")
	yamlType    = regexp.MustCompile("^cannot unmarshal (!!?\\w+)(?: `(.*)`)? into (\\S+)$")
)

// fieldOf names the field of a decoding error by its line (the decoder
// knows only lines and Go types) and says what is wrong in the recipe's
// terms: `sampling.temperature: "hot" is not a number`.
func fieldOf(e *Error, lines map[string]int) *Error {
	// The deepest key on the line (tasks[0].id, not tasks[0]; max_tokens,
	// not max_tokens[0] of a flow list).
	for path, line := range lines {
		// Ties (a flow mapping on one line) go to the first in order, so
		// the same file always gives the same message.
		if line == e.Line && path != "" && !strings.HasSuffix(path, "]") &&
			(e.Field == "" || len(path) > len(e.Field) || len(path) == len(e.Field) && path < e.Field) {
			e.Field = path
		}
	}
	if m := yamlUnknown.FindStringSubmatch(e.Msg); m != nil {
		parent := "the recipe"
		if i := strings.LastIndexByte(e.Field, '.'); i > 0 {
			parent = e.Field[:i]
		}
		e.Msg = fmt.Sprintf("not a field of %s", parent)
	} else if m := yamlType.FindStringSubmatch(e.Msg); m != nil && m[1] == fileTag {
		e.Msg = fileTagMisplaced
	} else if m != nil {
		what := m[2]
		if what == "" {
			what = map[string]string{"!!seq": "a list", "!!map": "a mapping"}[m[1]]
			if what == "" {
				what = "this value"
			}
		} else {
			what = strconv.Quote(what)
		}
		e.Msg = fmt.Sprintf("%s is not %s", what, yamlKind(m[3]))
	} else if strings.HasPrefix(e.Msg, "line ") {
		// Duration's own message already carries its line.
		if _, rest, ok := strings.Cut(e.Msg, ": "); ok {
			e.Msg = rest
		}
	}
	return e
}

// yamlKind says what a Go type is written as in YAML.
func yamlKind(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "recipes."):
		return "a mapping"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "a whole number"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case goType == "bool":
		return "true or false"
	case goType == "string":
		return "text"
	}
	return "a " + goType
}

// index records the line of every field path (name, tasks[0].id, …).
func index(n *yaml.Node, at string, lines map[string]int) {
	lines[at] = n.Line
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i].Value
			p := k
			if at != "" {
				p = at + "." + k
			}
			index(n.Content[i+1], p, lines)
			lines[p] = n.Content[i].Line // the key's line reads best
		}
	case yaml.SequenceNode:
		for i, c := range n.Content {
			index(c, fmt.Sprintf("%s[%d]", at, i), lines)
		}
	}
}

// defaults fills what a recipe may leave out.
func (r *Recipe) defaults() {
	if r.Window == 0 {
		r.Window = Duration(180 * time.Second)
	}
	if r.Shell.Timeout == 0 {
		r.Shell.Timeout = Duration(30 * time.Second)
	}
	if r.Shell.OutputLimit == 0 {
		r.Shell.OutputLimit = 4000
	}
	if r.Context.OnFull == "" {
		r.Context.OnFull = "trim"
	}
	if r.Agent.Kind == "" {
		r.Agent.Kind = "jspark"
	}
	for i := range r.Tasks {
		if t := &r.Tasks[i]; t.CheckTimeout == 0 {
			t.CheckTimeout = r.Shell.Timeout
		}
	}
	for i := range r.Rounds {
		if rd := &r.Rounds[i]; rd.RepeatOf != "" {
			src := r.Round(rd.RepeatOf)
			rd.Concurrency, rd.Tasks = src.Concurrency, src.Tasks
		}
	}
}

// cleanRel reports whether p is a plain relative path inside its root.
func cleanRel(p string) bool {
	c := path.Clean(p)
	return p != "" && !path.IsAbs(c) && c != "." && c != ".." && !strings.HasPrefix(c, "../")
}
