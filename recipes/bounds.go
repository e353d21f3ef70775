package recipes

import (
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A recipe is bounded before it is decoded into a Recipe: the YAML
// decoder's duplicate-key check compares every pair of keys of a mapping and
// reports every duplicate pair, so 4,000 copies of one key (59 KB) took 21 s,
// 3.5 GiB and 8M error lines, and 120k seed files 42 s. The file is read
// only up to MaxBytes, parsed into nodes (linear), and those are counted and
// checked for duplicate keys with a map before the decoder sees them; a file
// that breaks a bound gets the first few errors and a count.
const (
	// MaxBytes is the most a recipe file may hold (a recipe is a few hundred
	// KB at most, seed files included).
	MaxBytes = 1 << 20
	// maxNodes bounds the YAML values of one recipe (every key, value and
	// list item).
	maxNodes = 100_000
	// maxEntries bounds one mapping's keys or one list's items: the
	// decoder's duplicate check is quadratic in it.
	maxEntries = 4096
	// maxSeedFiles bounds the seed, hidden test and solution files of all
	// tasks together.
	maxSeedFiles = 10_000
	// maxDepth bounds nesting (a recipe is five levels deep).
	maxDepth = 32
	// maxErrors is how many errors are reported one by one; the rest are
	// counted.
	maxErrors = 10
)

// readBounded reads a recipe file, refusing one over MaxBytes without
// reading past it.
func readBounded(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, MaxBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxBytes {
		return nil, Errors{{File: name, Line: 1, Msg: fmt.Sprintf("over %d bytes: a recipe is a few hundred KB at most", MaxBytes)}}
	}
	return b, nil
}

// bounds checks the parsed document against the bounds above and for
// duplicate keys; it returns at most maxErrors errors and a count of the rest.
func bounds(file string, root *yaml.Node) Errors {
	var es errorList
	nodes, seeds := 0, 0
	// line is where n's key stands (the line a message about it reads best at).
	var walk func(n *yaml.Node, at string, line, depth int) bool
	walk = func(n *yaml.Node, at string, line, depth int) bool {
		if nodes++; nodes > maxNodes {
			es.add(&Error{File: file, Line: line, Msg: fmt.Sprintf("more than %d values: a recipe is a few hundred KB at most", maxNodes)})
			return false
		}
		if depth > maxDepth {
			es.add(&Error{File: file, Line: line, Field: at, Msg: fmt.Sprintf("nested more than %d levels deep", maxDepth)})
			return false
		}
		entries, what := len(n.Content), "items"
		if n.Kind == yaml.MappingNode {
			entries, what = entries/2, "keys"
			if taskFiles(at) {
				if seeds += entries; seeds > maxSeedFiles {
					es.add(&Error{File: file, Line: line, Field: at, Msg: fmt.Sprintf("more than %d seed, test and solution files in the recipe", maxSeedFiles)})
					return false
				}
			}
		}
		if entries > maxEntries {
			es.add(&Error{File: file, Line: line, Field: at, Msg: fmt.Sprintf("%d %s, more than %d", entries, what, maxEntries)})
			return false
		}
		switch n.Kind {
		case yaml.AliasNode:
			// The decoder expands an alias where it stands: count it there.
			if n.Alias != nil {
				return walk(n.Alias, at, line, depth+1)
			}
		case yaml.MappingNode:
			// Keys are compared as the decoder does: by kind and text (so
			// every mapping or list used as a key is the same key to it).
			type key struct {
				kind  yaml.Kind
				value string
			}
			seen := make(map[key]int, entries)
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i]
				p := k.Value
				if at != "" {
					p = at + "." + p
				}
				if first, dup := seen[key{k.Kind, k.Value}]; dup {
					es.add(&Error{File: file, Line: k.Line, Field: p, Msg: fmt.Sprintf("is already defined at line %d", first)})
				} else {
					seen[key{k.Kind, k.Value}] = k.Line
				}
				if !walk(k, p, k.Line, depth+1) || !walk(n.Content[i+1], p, k.Line, depth+1) {
					return false
				}
			}
		default:
			for i, c := range n.Content {
				if !walk(c, fmt.Sprintf("%s[%d]", at, i), c.Line, depth+1) {
					return false
				}
			}
		}
		return true
	}
	for _, doc := range root.Content {
		walk(doc, "", doc.Line, 0)
	}
	return es.list()
}

// taskFiles reports whether at is one of a task's mappings of files.
func taskFiles(at string) bool {
	if !strings.HasPrefix(at, "tasks[") {
		return false
	}
	return strings.HasSuffix(at, "].files") || strings.HasSuffix(at, "].tests") || strings.HasSuffix(at, "].solution.files")
}

// errorList keeps the first maxErrors errors and counts the rest.
type errorList struct {
	es   Errors
	more int
}

func (l *errorList) add(e *Error) {
	if len(l.es) < maxErrors {
		l.es = append(l.es, e)
	} else {
		l.more++
	}
}

// list is the kept errors and, when some were left out, a last line that
// counts them.
func (l *errorList) list() Errors {
	if l.more == 0 || len(l.es) == 0 {
		return l.es
	}
	last := l.es[len(l.es)-1]
	return append(l.es, &Error{File: last.File, Line: last.Line, Msg: fmt.Sprintf("… and %d more errors", l.more)})
}

// capErrors keeps the first maxErrors of es and counts the rest.
func capErrors(es Errors) Errors {
	var l errorList
	for _, e := range es {
		l.add(e)
	}
	return l.list()
}
