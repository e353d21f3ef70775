package tools

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// BashArgs are the arguments of bash.
type BashArgs struct {
	Command string `json:"command" jsonschema:"description=The shell command to run in the workspace (bash; state such as the working directory persists between calls)."`
	Timeout int    `json:"timeout,omitempty" jsonschema:"description=Seconds before the command is killed (default: the recipe's timeout)."`
}

var bashTool = define("bash", "Run a shell command in the session's workspace and return its output and exit code.",
	func(ctx context.Context, env *Env, a BashArgs) Result {
		timeout := env.Timeout
		if a.Timeout > 0 && time.Duration(a.Timeout)*time.Second < timeout {
			timeout = time.Duration(a.Timeout) * time.Second
		}
		r, err := env.Box.Exec(ctx, a.Command, timeout, env.OutputLimit)
		if err != nil && ctx.Err() != nil {
			return Result{Output: r.Output, Err: err}
		}
		if err != nil {
			return failed("bash: %v", err)
		}
		code := r.ExitCode
		return Result{Output: fmt.Sprintf("%s\n[exit code %d]", strings.TrimRight(r.Output, "\n"), code), ExitCode: &code}
	})

// ReadArgs are the arguments of read.
type ReadArgs struct {
	Path   string `json:"path" jsonschema:"description=File path relative to the workspace."`
	Offset int    `json:"offset,omitempty" jsonschema:"description=First line to return (1-based; default 1)."`
	Limit  int    `json:"limit,omitempty" jsonschema:"description=Most lines to return (default: all that fit the output limit)."`
}

var readTool = define("read", "Read a text file from the workspace, with line numbers.",
	func(_ context.Context, env *Env, a ReadArgs) Result {
		b, fail := readFile(env, "read", a.Path)
		if fail != nil {
			return *fail
		}
		lines := strings.SplitAfter(string(b), "\n")
		if lines[len(lines)-1] == "" {
			lines = lines[:len(lines)-1]
		}
		first := max(a.Offset, 1)
		var out strings.Builder
		for i := first - 1; i < len(lines); i++ {
			if a.Limit > 0 && i-(first-1) >= a.Limit {
				break
			}
			line := fmt.Sprintf("%6d\t%s", i+1, strings.TrimSuffix(lines[i], "\n")) + "\n"
			if out.Len()+len(line) > env.OutputLimit {
				fmt.Fprintf(&out, "[... truncated at line %d of %d; read on with offset %d ...]\n", i+1, len(lines), i+1)
				break
			}
			out.WriteString(line)
		}
		if out.Len() == 0 {
			return Result{Output: fmt.Sprintf("[%s has %d lines; nothing at offset %d]", a.Path, len(lines), first)}
		}
		return Result{Output: strings.ToValidUTF8(out.String(), "\uFFFD")}
	})

// WriteArgs are the arguments of write.
type WriteArgs struct {
	Path    string `json:"path" jsonschema:"description=File path relative to the workspace; directories are created."`
	Content string `json:"content" jsonschema:"description=The whole new content of the file."`
}

var writeTool = define("write", "Create or overwrite a file in the workspace.",
	func(_ context.Context, env *Env, a WriteArgs) Result {
		if err := env.Box.WriteFile(a.Path, []byte(a.Content)); err != nil {
			return failed("write %s: %v", a.Path, relErr(err))
		}
		return Result{Output: fmt.Sprintf("wrote %d bytes to %s", len(a.Content), a.Path)}
	})

// EditArgs are the arguments of edit.
type EditArgs struct {
	Path      string `json:"path" jsonschema:"description=File path relative to the workspace."`
	OldString string `json:"old_string" jsonschema:"description=Exact text to replace; it must occur exactly once in the file."`
	NewString string `json:"new_string" jsonschema:"description=The replacement text."`
}

var editTool = define("edit", "Replace one exact, unique occurrence of a string in a workspace file.",
	func(_ context.Context, env *Env, a EditArgs) Result {
		b, fail := readFile(env, "edit", a.Path)
		if fail != nil {
			return *fail
		}
		if a.OldString == "" {
			return failed("edit %s: old_string is empty", a.Path)
		}
		switch n := strings.Count(string(b), a.OldString); n {
		case 0:
			return failed("edit %s: old_string not found", a.Path)
		case 1:
		default:
			return failed("edit %s: old_string occurs %d times; include more context to make it unique", a.Path, n)
		}
		s := strings.Replace(string(b), a.OldString, a.NewString, 1)
		if err := env.Box.WriteFile(a.Path, []byte(s)); err != nil {
			return failed("edit %s: %v", a.Path, relErr(err))
		}
		return Result{Output: fmt.Sprintf("edited %s: replaced %d bytes with %d", a.Path, len(a.OldString), len(a.NewString))}
	})

// ListArgs are the arguments of list.
type ListArgs struct {
	Path      string `json:"path,omitempty" jsonschema:"description=Directory relative to the workspace (default: the workspace)."`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"description=List subdirectories too."`
}

var listTool = define("list", "List the files of a workspace directory; directories end in /.",
	func(_ context.Context, env *Env, a ListArgs) Result {
		p, err := env.Box.Path(a.Path)
		if err != nil {
			return failed("%v", err)
		}
		var names []string
		err = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if q == p {
				return nil
			}
			rel, _ := filepath.Rel(p, q)
			if d.IsDir() {
				names = append(names, rel+"/")
				if !a.Recursive {
					return filepath.SkipDir
				}
				return nil
			}
			names = append(names, rel)
			return nil
		})
		if err != nil {
			return failed("list %s: %v", a.Path, relErr(err))
		}
		sort.Strings(names)
		return Result{Output: capLines(names, env.OutputLimit, "entries")}
	})

// SearchArgs are the arguments of search.
type SearchArgs struct {
	Pattern string `json:"pattern" jsonschema:"description=Regular expression (Go RE2 syntax) to find in file lines."`
	Path    string `json:"path,omitempty" jsonschema:"description=File or directory to search, relative to the workspace (default: the workspace)."`
}

var searchTool = define("search", "Search workspace files for lines matching a regular expression; prints file:line: text.",
	func(_ context.Context, env *Env, a SearchArgs) Result {
		re, err := regexp.Compile(a.Pattern)
		if err != nil {
			return failed("search: bad pattern: %v", err)
		}
		p, err := env.Box.Path(a.Path)
		if err != nil {
			return failed("%v", err)
		}
		var hits []string
		err = filepath.WalkDir(p, func(q string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !d.Type().IsRegular() {
				return err
			}
			b, err := os.ReadFile(q)
			if err != nil {
				return nil
			}
			rel, _ := filepath.Rel(env.Box.Root(), q)
			for i, line := range strings.Split(string(b), "\n") {
				if re.MatchString(line) {
					hits = append(hits, fmt.Sprintf("%s:%d: %s", rel, i+1, line))
				}
			}
			return nil
		})
		if err != nil {
			return failed("search %s: %v", a.Path, relErr(err))
		}
		if len(hits) == 0 {
			return Result{Output: "no matches"}
		}
		return Result{Output: strings.ToValidUTF8(capLines(hits, env.OutputLimit, "matches"), "\uFFFD")}
	})

// readFile reads a workspace file for a tool; a failure is the model's answer.
func readFile(env *Env, verb, path string) ([]byte, *Result) {
	p, err := env.Box.Path(path)
	if err != nil {
		r := failed("%v", err)
		return nil, &r
	}
	b, err := os.ReadFile(p)
	if err != nil {
		r := failed("%s %s: %v", verb, path, relErr(err))
		return nil, &r
	}
	return b, nil
}

// capLines joins lines up to limit bytes, saying how many did not fit.
func capLines(lines []string, limit int, what string) string {
	var b strings.Builder
	for i, l := range lines {
		if b.Len()+len(l)+1 > limit {
			fmt.Fprintf(&b, "[... %d more %s not shown ...]\n", len(lines)-i, what)
			break
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// relErr drops the host path from filesystem errors: the model knows only
// workspace-relative paths, and host paths differ between sessions.
func relErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
