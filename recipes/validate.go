package recipes

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"jspark/tools"
)

var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)

// maxConcurrency bounds a round's sessions (each one a sandbox and a shell;
// the plan of a round is allocated up front).
const maxConcurrency = 1024

// validate checks everything the YAML decoder cannot: presence, ranges,
// references between tasks and rounds, known tools.
func (r *Recipe) validate(file string, lines map[string]int) Errors {
	var es Errors
	bad := func(field, format string, args ...any) {
		// A missing field has no line of its own: use its parent's.
		line, p := 0, field
		for {
			if l, ok := lines[p]; ok {
				line = l
				break
			}
			i := strings.LastIndexAny(p, ".[")
			if i < 0 {
				line = lines[""]
				break
			}
			p = p[:i]
		}
		es = append(es, &Error{File: file, Line: line, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if r.Name == "" {
		bad("name", "is required")
	}
	if r.Window < 0 {
		bad("window", "must be positive")
	}
	if len(r.Tools) == 0 {
		bad("tools", "list at least one tool (%s)", toolNames())
	}
	seen := map[string]bool{}
	for i, t := range r.Tools {
		if tools.Lookup(t) == nil {
			bad(fmt.Sprintf("tools[%d]", i), "unknown tool %q (known: %s)", t, toolNames())
		} else if seen[t] {
			bad(fmt.Sprintf("tools[%d]", i), "%q is listed twice", t)
		}
		seen[t] = true
	}
	s := r.Sampling
	if s.MaxTokens <= 0 {
		bad("sampling.max_tokens", "is required and must be positive")
	}
	if s.Temperature != nil && (*s.Temperature < 0 || *s.Temperature > 2) {
		bad("sampling.temperature", "%g is outside [0, 2]", *s.Temperature)
	}
	if s.TopP != nil && (*s.TopP <= 0 || *s.TopP > 1) {
		bad("sampling.top_p", "%g is outside (0, 1]", *s.TopP)
	}
	switch tc := s.ToolChoice; {
	case tc == "", tc == "auto", tc == "required", tc == "none":
	case !seen[tc]:
		bad("sampling.tool_choice", "%q is neither auto, required, none nor one of the recipe's tools", tc)
	}
	if r.Nudge.Max < 0 {
		bad("nudge.max", "must not be negative")
	}
	if r.Nudge.Max > 0 && strings.TrimSpace(r.Nudge.Message) == "" {
		bad("nudge.message", "is required when nudge.max is above 0")
	}
	if r.Shell.Timeout < 0 {
		bad("shell.timeout", "must be positive")
	}
	if r.Shell.OutputLimit < 0 {
		bad("shell.output_limit", "must be positive")
	}
	if o := r.Context.OnFull; o != "" && o != "trim" && o != "stop" {
		bad("context.on_full", "%q is neither trim nor stop", o)
	}
	checkAgent("agent", r.Agent, bad)

	if len(r.Tasks) == 0 {
		bad("tasks", "list at least one task")
	}
	r.validateLimits(lines, bad)
	ids, runnable := map[string]bool{}, map[string]bool{}
	for i, t := range r.Tasks {
		at := fmt.Sprintf("tasks[%d]", i)
		switch {
		case t.ID == "":
			bad(at+".id", "is required")
		case !idPattern.MatchString(t.ID):
			bad(at+".id", "%q: use lower-case letters, digits, _ and -", t.ID)
		case ids[t.ID]:
			bad(at+".id", "%q is used by an earlier task", t.ID)
		}
		ids[t.ID] = true
		if t.Kind != "prose" && t.Kind != "code" {
			bad(at+".kind", "%q is neither prose nor code", t.Kind)
		}
		if strings.TrimSpace(t.Prompt) == "" {
			bad(at+".prompt", "is required")
		}
		names := make([]string, 0, len(t.Files))
		for n := range t.Files {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if !cleanRel(n) {
				bad(at+".files."+n, "seed file paths must be relative and stay inside the workspace")
			}
		}
		r.validateTask(at, &t, bad)
		runnable[t.ID] = t.NotRunnable == ""
	}

	if len(r.Rounds) == 0 {
		bad("rounds", "list at least one round")
	}
	rounds := map[string]*Round{}
	for i := range r.Rounds {
		rd := &r.Rounds[i]
		at := fmt.Sprintf("rounds[%d]", i)
		switch {
		case rd.Name == "":
			bad(at+".name", "is required")
		case !idPattern.MatchString(rd.Name) || rd.Name == "all":
			bad(at+".name", "%q: use lower-case letters, digits, _ and - (and not \"all\")", rd.Name)
		case rounds[rd.Name] != nil:
			bad(at+".name", "%q is used by an earlier round", rd.Name)
		}
		rounds[rd.Name] = rd
	}
	for i := range r.Rounds {
		rd := &r.Rounds[i]
		at := fmt.Sprintf("rounds[%d]", i)
		if rd.RepeatOf != "" {
			src := rounds[rd.RepeatOf]
			switch {
			case src == nil:
				bad(at+".repeat_of", "no round is named %q", rd.RepeatOf)
			case src.RepeatOf != "":
				bad(at+".repeat_of", "%q is itself a repeat; name the first round", rd.RepeatOf)
			case src == rd:
				bad(at+".repeat_of", "a round cannot repeat itself")
			}
			if rd.Concurrency != 0 || len(rd.Tasks) != 0 || rd.Agent != nil {
				bad(at, "a repeat round takes its concurrency, tasks and agent from %q; leave them out", rd.RepeatOf)
			}
			continue
		}
		if rd.Agent != nil {
			checkAgent(at+".agent", *rd.Agent, bad)
		}
		if rd.Concurrency < 1 {
			bad(at+".concurrency", "must be at least 1")
		} else if rd.Concurrency > maxConcurrency {
			bad(at+".concurrency", "%d is more than %d sessions", rd.Concurrency, maxConcurrency)
		}
		if len(rd.Tasks) == 0 {
			bad(at+".tasks", "list at least one task id")
		}
		for j, id := range rd.Tasks {
			if !ids[id] {
				bad(fmt.Sprintf("%s.tasks[%d]", at, j), "no task has id %q", id)
			} else if !runnable[id] {
				bad(fmt.Sprintf("%s.tasks[%d]", at, j), "task %q is not runnable here (%s)", id, r.Task(id).NotRunnable)
			}
		}
	}
	sort.SliceStable(es, func(i, j int) bool { return es[i].Line < es[j].Line })
	return es
}

// validateTask checks a task's hidden tests, solution and check timeout.
func (r *Recipe) validateTask(at string, t *Task, bad func(field, format string, args ...any)) {
	if len(t.Tests) > 0 && t.Check == "" {
		bad(at+".tests", "hidden tests need a check to run them: give the task a check")
	}
	for _, f := range t.HiddenTests() {
		if !cleanRel(f.Path) {
			bad(at+".tests."+f.Path, "test file paths must be relative and stay inside the workspace")
		}
	}
	if s := t.Solution; s != nil {
		if len(s.Files) == 0 && strings.TrimSpace(s.Script) == "" {
			bad(at+".solution", "give the solution's files, a script or both")
		}
		if t.Check == "" {
			bad(at+".solution", "a solution is proved by the task's check: give the task a check")
		}
		for _, f := range t.SolutionFiles() {
			if !cleanRel(f.Path) {
				bad(at+".solution.files."+f.Path, "solution file paths must be relative and stay inside the workspace")
			}
		}
	}
	if t.CheckTimeout < 0 {
		bad(at+".check_timeout", "must be positive")
	}
}

// validateLimits checks the per-session limits: each one given is positive.
func (r *Recipe) validateLimits(lines map[string]int, bad func(field, format string, args ...any)) {
	for _, l := range []struct {
		field string
		v     int
	}{{"turns", r.Limits.Turns}, {"output_tokens", r.Limits.OutputTokens}, {"tool_seconds", r.Limits.ToolSeconds}} {
		_, given := lines["limits."+l.field]
		if l.v < 0 || given && l.v == 0 {
			bad("limits."+l.field, "%d: must be positive (leave it out for no limit)", l.v)
		}
	}
}

// exactVersion is an npm version without ranges or tags: the same recipe
// installs the same agent.
var exactVersion = regexp.MustCompile(`^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$`)

func checkAgent(at string, a Agent, bad func(field, format string, args ...any)) {
	if a.Kind != "" && !slices.Contains(AgentKinds, a.Kind) {
		bad(at+".kind", "%q is not an agent (known: %s)", a.Kind, strings.Join(AgentKinds, ", "))
		return
	}
	switch {
	case !a.External() && a.Version != "":
		bad(at+".version", "jspark's own loop has no version; leave it out")
	case a.External() && a.Version == "":
		bad(at+".version", "is required for %s: the npm package's exact version, like 1.2.3", a.Kind)
	case a.External() && !exactVersion.MatchString(a.Version):
		bad(at+".version", "%q is not an exact version (like 1.2.3; no ranges or tags)", a.Version)
	}
}

func toolNames() string {
	var n []string
	for _, t := range tools.All {
		n = append(n, t.Name)
	}
	return strings.Join(n, ", ")
}
