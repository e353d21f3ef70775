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

	"jspark/sandbox"
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
	func(ctx context.Context, env *Env, a ReadArgs) Result {
		f, fail := open(ctx, env, "read", a.Path)
		if fail != nil {
			return *fail
		}
		defer f.Close()
		first := max(a.Offset, 1)
		var out strings.Builder
		// A line shows at most half the output limit, so a long one still
		// shows its start.
		lr := newLines(f, env.OutputLimit/2)
		n := 0
		for ; n < first-1; n++ {
			if n%4096 == 0 && ctx.Err() != nil {
				return Result{Err: ctx.Err()}
			}
			more, err := lr.skip()
			if err != nil {
				return failed("read %s: %v", a.Path, relErr(err))
			}
			if !more {
				break
			}
		}
		for {
			line, err := lr.next()
			if err != nil {
				return failed("read %s: %v", a.Path, relErr(err))
			}
			if line == nil {
				break
			}
			n++
			if a.Limit > 0 && n-first >= a.Limit {
				break
			}
			text := fmt.Sprintf("%6d\t%s", n, line.text) + "\n"
			if line.cut {
				text = fmt.Sprintf("%6d\t%s[... line truncated: %d bytes ...]\n", n, line.text, line.size)
			}
			if out.Len()+len(text) > env.OutputLimit {
				fmt.Fprintf(&out, "[... truncated at line %d (byte %d of %d); read on with offset %d ...]\n", n, lr.offset-line.size, lr.fileSize, n)
				break
			}
			out.WriteString(text)
		}
		if out.Len() == 0 {
			return Result{Output: fmt.Sprintf("[%s has %d lines; nothing at offset %d]", a.Path, n, first)}
		}
		return Result{Output: strings.ToValidUTF8(out.String(), "\uFFFD")}
	})

// WriteArgs are the arguments of write.
type WriteArgs struct {
	Path    string `json:"path" jsonschema:"description=File path relative to the workspace; directories are created."`
	Content string `json:"content" jsonschema:"description=The whole new content of the file."`
}

var writeTool = define("write", "Create or overwrite a file in the workspace.",
	func(ctx context.Context, env *Env, a WriteArgs) Result {
		if err := ctx.Err(); err != nil {
			return Result{Err: err}
		}
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
	func(ctx context.Context, env *Env, a EditArgs) Result {
		f, fail := open(ctx, env, "edit", a.Path)
		if fail != nil {
			return *fail
		}
		b, err := readAll(f, env.Box.FileSizeLimit())
		f.Close()
		if err != nil {
			return failed("edit %s: %v", a.Path, relErr(err))
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
	func(ctx context.Context, env *Env, a ListArgs) Result {
		p := a.Path
		if p == "" {
			p = "."
		}
		p = filepath.Clean(p)
		var names []string
		more := false
		err := env.Box.Walk(p, func(q string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if q == p {
				return nil
			}
			if len(names) == maxListEntries {
				more = true
				return filepath.SkipAll
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
		if ctx.Err() != nil {
			return Result{Err: ctx.Err()}
		}
		if errors.Is(err, sandbox.ErrOutside) {
			return failed("%v", err)
		}
		if err != nil {
			return failed("list %s: %v", a.Path, relErr(err))
		}
		sort.Strings(names)
		out := capLines(names, env.OutputLimit, "entries")
		if more {
			out += fmt.Sprintf("[... listing stopped at %d entries ...]\n", maxListEntries)
		}
		return Result{Output: out}
	})

// SearchArgs are the arguments of search.
type SearchArgs struct {
	Pattern string `json:"pattern" jsonschema:"description=Regular expression (Go RE2 syntax) to find in file lines."`
	Path    string `json:"path,omitempty" jsonschema:"description=File or directory to search, relative to the workspace (default: the workspace)."`
}

var searchTool = define("search", "Search workspace files for lines matching a regular expression; prints file:line: text.",
	func(ctx context.Context, env *Env, a SearchArgs) Result {
		re, err := regexp.Compile(a.Pattern)
		if err != nil {
			return failed("search: bad pattern: %v", err)
		}
		p := a.Path
		if p == "" {
			p = "."
		}
		sr := searcher{ctx: ctx, env: env, re: re, budget: maxSearchBytes}
		err = env.Box.Walk(filepath.Clean(p), func(q string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if d.IsDir() || !d.Type().IsRegular() {
				return nil
			}
			return sr.file(q)
		})
		if ctx.Err() != nil {
			return Result{Err: ctx.Err()}
		}
		if errors.Is(err, sandbox.ErrOutside) {
			return failed("%v", err)
		}
		if err != nil && err != errSearchDone {
			return failed("search %s: %v", a.Path, relErr(err))
		}
		return Result{Output: strings.ToValidUTF8(sr.result(), "\uFFFD")}
	})

// open opens a workspace file for a tool; a failure is the model's answer.
func open(ctx context.Context, env *Env, verb, path string) (*os.File, *Result) {
	if err := ctx.Err(); err != nil {
		return nil, &Result{Err: err}
	}
	f, err := env.Box.Open(path)
	if err != nil {
		if errors.Is(err, sandbox.ErrOutside) {
			r := failed("%v", err)
			return nil, &r
		}
		r := failed("%s %s: %v", verb, path, relErr(err))
		return nil, &r
	}
	return f, nil
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
