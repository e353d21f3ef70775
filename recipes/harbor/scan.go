package harbor

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"github.com/google/shlex"
)

// baseTools are what a test or solution script may run and still run here:
// bash's builtins and keywords, GNU coreutils, the few tools every plain
// image has beside them, and python3. The list is deliberately short: a
// command missing from it makes a task not runnable, which is safe; one
// wrongly on it would score a task by a script that cannot work.
var baseTools = set(
	// bash builtins
	". : [ [[ alias bg break builtin caller cd command continue declare dirs disown echo enable eval exec exit export",
	"false fg getopts hash jobs kill let local mapfile popd printf pushd pwd read readarray readonly return set shift",
	"shopt source test times trap true type typeset ulimit umask unalias unset wait",
	// GNU coreutils
	"arch b2sum base32 base64 basename basenc cat chgrp chmod chown cksum comm cp csplit cut date dd df dir dirname du",
	"env expand expr factor fmt fold groups head id install join link ln logname ls md5sum mkdir mkfifo mktemp mv nice nl",
	"nohup nproc numfmt od paste pathchk pr printenv ptx readlink realpath rm rmdir seq sha1sum sha224sum sha256sum",
	"sha384sum sha512sum shred shuf sleep sort split stat stdbuf sum sync tac tail tee timeout touch tr truncate tsort",
	"tty uname unexpand uniq vdir wc whoami yes",
	// beside them in every plain image, and the interpreters
	"grep egrep fgrep sed awk find xargs diff cmp sh bash dash python3 python",
)

// keywords start or shape a command without being one.
var keywords = set("if then else elif fi do done while until time ! { } function")

// wrappers run the command that follows their options.
var wrappers = set("exec command builtin env nice nohup timeout xargs stdbuf time")

func set(lists ...string) map[string]bool {
	m := map[string]bool{}
	for _, l := range lists {
		for _, w := range strings.Fields(l) {
			m[w] = true
		}
	}
	return m
}

var (
	redirect   = regexp.MustCompile(`^[0-9]*(?:&>>?|>>?&?|<<?<?|<&|>\|)`)
	assignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\[[^]]*\])?\+?=`)
	heredoc    = regexp.MustCompile(`(?:^|[^<])<<-?\s*(['"]?)([A-Za-z_][A-Za-z0-9_]*)['"]?`)
	funcDef    = regexp.MustCompile(`^\s*(?:function\s+)?([A-Za-z_][A-Za-z0-9_-]*)\s*\(\s*\)`)
	pyImport   = regexp.MustCompile(`^\s*(?:import\s+([\w.]+(?:\s*,\s*[\w.]+)*)|from\s+([\w.]+)\s+import\b)`)
)

// scanner decides whether a task's scripts need only the base tools.
type scanner struct {
	workdir string
	stdlib  map[string]bool // Python's standard library's top-level modules
	local   map[string]bool // Python modules the task's files or the agent provide
}

// script returns why a shell script (its paths rewritten) cannot run here (naming its line), or
// "" when every command it runs is a base tool, a function it defines or a
// script by relative path.
func (s *scanner) script(name, text string) string {
	defined := map[string]bool{}
	for _, l := range strings.Split(text, "\n") {
		if m := funcDef.FindStringSubmatch(l); m != nil {
			defined[m[1]] = true
		}
	}
	for _, ln := range logicalLines(text) {
		for _, seg := range segments(ln.text) {
			if why := s.command(seg, defined); why != "" {
				return fmt.Sprintf("%s:%d %s", name, ln.n, why)
			}
		}
	}
	return ""
}

// command returns why one simple command cannot run here.
func (s *scanner) command(seg string, defined map[string]bool) string {
	words, err := shlex.Split(seg)
	if err != nil {
		words = strings.Fields(seg)
	}
	wrapped := false
	for i := 0; i < len(words); i++ {
		w := strings.TrimLeft(words[i], "({")
		switch {
		case w == "":
			continue
		case !wrapped && (w == "for" || w == "case" || w == "select" || w == "in" || w == "esac" || w == ";;"):
			return "" // a list of words or patterns, not commands
		case funcDef.MatchString(w) || strings.HasSuffix(w, "()"):
			return ""
		case keywords[w], assignment.MatchString(w):
			continue
		case redirect.MatchString(w):
			if m := redirect.FindString(w); m == w && !strings.HasSuffix(w, "&") {
				i++ // the operator alone: its target is the next word
			}
			continue
		case strings.HasSuffix(w, ")") && !strings.Contains(w, "("):
			continue // a case pattern
		case wrapped && (strings.HasPrefix(w, "-") || isNumberish(w)):
			continue // a wrapper's option or duration
		}
		name := w
		if strings.HasPrefix(w, "/usr/bin/") || strings.HasPrefix(w, "/bin/") || strings.HasPrefix(w, "/usr/local/bin/") {
			name = path.Base(w)
		}
		switch {
		case strings.HasPrefix(w, "$"):
			return fmt.Sprintf("runs the command in %s, which the import cannot tell", w)
		case defined[w]:
			return ""
		case !strings.HasPrefix(w, "/") && strings.Contains(w, "/"):
			return "" // a script of the task or the agent, by relative path
		case !baseTools[name]:
			return fmt.Sprintf("runs %s, which is not among the base tools (sh, python3, coreutils, grep, sed, awk, find)", w)
		case name == "cd":
			// The text is rewritten: the WORKDIR is "." by now, and the
			// hidden folders' paths are relative to the workspace.
			if i+1 < len(words) && words[i+1] != "." && words[i+1] != "./" {
				return fmt.Sprintf("changes directory to %s: the import runs scripts from the workspace (the WORKDIR %s), where its paths are relative", words[i+1], s.workdir)
			}
			return ""
		case name == "python3" || name == "python":
			for j := i + 1; j+1 < len(words); j++ {
				if words[j] == "-m" {
					if mod := topModule(words[j+1]); !s.stdlib[mod] && !s.local[mod] {
						return fmt.Sprintf("runs python3 -m %s, which is not in Python's standard library", words[j+1])
					}
				}
			}
			return ""
		case wrappers[name]:
			wrapped = true
			continue
		}
		return ""
	}
	return ""
}

// python returns why a Python file cannot run here: an import that is
// neither in the standard library nor a module the task provides.
func (s *scanner) python(name, text string) string {
	for i, l := range strings.Split(text, "\n") {
		m := pyImport.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		mods := strings.Split(m[1]+m[2], ",")
		for _, mod := range mods {
			mod = topModule(strings.TrimSpace(mod))
			if mod != "" && !s.stdlib[mod] && !s.local[mod] && mod != "__future__" {
				return fmt.Sprintf("%s:%d imports %s, which is neither in Python's standard library nor a module of the task", name, i+1, mod)
			}
		}
	}
	return ""
}

func topModule(m string) string {
	m, _, _ = strings.Cut(m, ".")
	return m
}

func isNumberish(w string) bool {
	return strings.TrimRight(strings.TrimLeft(w, "0123456789."), "smhd") == ""
}

// line is a logical line of a script and the line it starts on.
type line struct {
	n    int
	text string
}

// logicalLines joins continued lines and drops comments and here-document
// bodies (text, not commands).
func logicalLines(text string) []line {
	var out []line
	lines := strings.Split(text, "\n")
	var cur strings.Builder
	start := 0
	for i := 0; i < len(lines); i++ {
		l := stripComment(lines[i])
		if cur.Len() == 0 {
			start = i + 1
		}
		if strings.HasSuffix(l, "\\") {
			cur.WriteString(strings.TrimSuffix(l, "\\") + " ")
			continue
		}
		cur.WriteString(l)
		full := cur.String()
		cur.Reset()
		out = append(out, line{start, full})
		for _, m := range heredoc.FindAllStringSubmatch(full, -1) {
			strip := strings.Contains(full, "<<-")
			for i+1 < len(lines) {
				i++
				body := lines[i]
				if strip {
					body = strings.TrimLeft(body, "\t")
				}
				if body == m[2] {
					break
				}
			}
		}
	}
	return out
}

// stripComment drops a # comment that stands outside quotes.
func stripComment(l string) string {
	var q byte
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case q != 0:
			if c == q {
				q = 0
			} else if c == '\\' && q == '"' {
				i++
			}
		case c == '\'' || c == '"':
			q = c
		case c == '\\':
			i++
		case c == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t' || l[i-1] == ';'):
			return l[:i]
		}
	}
	return l
}

// segments splits a logical line into simple commands: at ; & | and
// backticks outside quotes (not the & and | of a redirection), and at each
// $( outside single quotes.
func segments(l string) []string {
	var out []string
	var q byte
	last := 0
	cut := func(i, skip int) {
		out = append(out, l[last:i])
		last = i + skip
	}
	for i := 0; i < len(l); i++ {
		c := l[i]
		switch {
		case q == '\'':
			if c == '\'' {
				q = 0
			}
		case c == '\\':
			i++
		case c == '$' && i+1 < len(l) && l[i+1] == '(':
			cut(i, 2)
			i++
		case q == '"':
			if c == '"' {
				q = 0
			}
		case c == '\'' || c == '"':
			q = c
		case (c == '&' || c == '|') && i > 0 && (l[i-1] == '>' || l[i-1] == '<'), c == '&' && i+1 < len(l) && l[i+1] == '>':
			// a redirection: 2>&1, >|, &>
		case c == ';' || c == '&' || c == '|' || c == '`':
			cut(i, 1)
		}
	}
	out = append(out, l[last:])
	return out
}

// pathMap is a Harbor path and the workspace path it becomes.
type pathMap struct{ from, to string }

// rewriter maps Harbor's fixed paths, and the task's WORKDIR, into the
// workspace: the tests and solution Harbor mounts at /tests and /solution
// are copied to .harbor/, its logs go to .harbor/logs, and the WORKDIR is
// the workspace itself.
func rewriter(workdir string) []pathMap {
	return []pathMap{
		{"/logs/verifier", hidden + "/logs/verifier"},
		{"/logs/agent", hidden + "/logs/agent"},
		{"/logs/artifacts", hidden + "/logs/artifacts"},
		{"/tests", hidden + "/tests"},
		{"/solution", hidden + "/solution"},
		{workdir, "."},
	}
}

// rewrite applies the maps to text wherever a path starts at a word
// boundary and the mapped prefix ends at a path boundary.
func rewrite(text string, maps []pathMap) string {
	var b strings.Builder
	for i := 0; i < len(text); {
		if i > 0 && pathChar(text[i-1]) {
			b.WriteByte(text[i])
			i++
			continue
		}
		matched := false
		for _, m := range maps {
			if !strings.HasPrefix(text[i:], m.from) {
				continue
			}
			j := i + len(m.from)
			if j < len(text) && text[j] != '/' && nameChar(text[j]) || j+1 < len(text) && text[j] == '.' && nameChar(text[j+1]) {
				continue // /application, /app.py: another name
			}
			b.WriteString(m.to)
			i, matched = j, true
			break
		}
		if !matched {
			b.WriteByte(text[i])
			i++
		}
	}
	return b.String()
}

func nameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

func pathChar(c byte) bool { return nameChar(c) || c == '.' || c == '/' || c == '~' || c == '$' }
