package recipes

import (
	"sort"
	"time"
)

// Solution is a task's reference solution, the oracle: its files are
// written over the seed files, then its script runs in the workspace (either
// may be left out, not both). `jspark recipes check` requires that the
// oracle's workspace passes the task's check with the hidden tests copied in.
type Solution struct {
	Files  map[string]string `yaml:"files" json:"files,omitempty"`   // relative path → content
	Script string            `yaml:"script" json:"script,omitempty"` // shell run in the sandbox after the files, from the workspace
}

// Limits are per-session budgets beyond the window: the runner ends a
// session that reaches one, as it ends one at the cut. A field left out (0)
// sets no such limit; a given one is positive.
type Limits struct {
	Turns        int `yaml:"turns" json:"turns,omitempty"`                 // model responses per session
	OutputTokens int `yaml:"output_tokens" json:"output_tokens,omitempty"` // completion tokens over the session
	ToolSeconds  int `yaml:"tool_seconds" json:"tool_seconds,omitempty"`   // wall seconds of the session's tool calls together
}

// ToolTime is ToolSeconds as a duration (0: no limit).
func (l Limits) ToolTime() time.Duration { return time.Duration(l.ToolSeconds) * time.Second }

// None reports whether no limit is set.
func (l Limits) None() bool { return l == Limits{} }

// File is one file of a task: a workspace-relative path and its content.
type File struct {
	Path    string
	Content string
}

// HiddenTests are the files copied into the workspace after the session's
// cut, over whatever the agent left at their paths, in path order; the check
// then runs on the result.
func (t *Task) HiddenTests() []File { return sortedFiles(t.Tests) }

// SeedFiles are the files the session starts with, in path order.
func (t *Task) SeedFiles() []File { return sortedFiles(t.Files) }

// SolutionFiles are the oracle's files, in path order (none without a
// solution).
func (t *Task) SolutionFiles() []File {
	if t.Solution == nil {
		return nil
	}
	return sortedFiles(t.Solution.Files)
}

// Runnable reports whether the task can run on this machine, and why not
// (an imported task that needs its Docker image cannot).
func (t *Task) Runnable() (bool, string) { return t.NotRunnable == "", t.NotRunnable }

func sortedFiles(m map[string]string) []File {
	out := make([]File, 0, len(m))
	for p, c := range m {
		out = append(out, File{p, c})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}
