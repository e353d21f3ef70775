package recipes

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// fileTag marks a text value written in a file of its own beside the
// recipe: `cache.py: !file work/ttl_lru_cache/files/cache.py`. The path is
// slash-separated and relative to the recipe's folder (the embedded builtin/
// folder for a built-in), and stays inside it. A long task's programs are
// then files an editor and a linter see whole, and the recipe stays short.
const fileTag = "!file"

// textFields are the fields a !file may stand for: those that hold a
// file's content or a long text.
var textFields = regexp.MustCompile(`^(?:system|nudge\.message|tasks\[\d+\]\.(?:prompt|check|solution\.script|(?:files|tests|solution\.files)\..+))$`)

const fileTagMisplaced = fileTag + " is for text fields (system, nudge.message, and a task's prompt, check, files, tests and solution)"

// include replaces every !file value of the document with its file's
// content, read from dir; budget is how many bytes the files may add
// together (the recipe's own bound). It reports whether any was replaced.
// Each error names the value's line and field.
func include(file string, root *yaml.Node, dir fs.FS, budget int) (bool, Errors) {
	var es errorList
	replaced := false
	var walk func(n *yaml.Node, at string, line int)
	walk = func(n *yaml.Node, at string, line int) {
		switch n.Kind {
		case yaml.ScalarNode:
			if n.Tag != fileTag {
				return
			}
			if !textFields.MatchString(at) {
				es.add(&Error{File: file, Line: n.Line, Field: at, Msg: fileTagMisplaced})
				return
			}
			text, err := readText(dir, n.Value, &budget)
			if err != nil {
				es.add(&Error{File: file, Line: n.Line, Field: at, Msg: fmt.Sprintf("%s %s: %v", fileTag, n.Value, err)})
				return
			}
			n.Value, n.Tag, n.Style = text, "!!str", yaml.LiteralStyle
			replaced = true
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				p := n.Content[i].Value
				if at != "" {
					p = at + "." + p
				}
				walk(n.Content[i+1], p, n.Content[i].Line)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", at, i), c.Line)
			}
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, at, line)
			}
		}
		// An alias is its anchor's node, replaced where the anchor stands.
	}
	walk(root, "", 1)
	return replaced, es.list()
}

// readText reads a !file's text from dir, charging its size to budget.
func readText(dir fs.FS, name string, budget *int) (string, error) {
	if dir == nil {
		return "", fmt.Errorf("this recipe has no folder to read it from")
	}
	if !cleanRel(name) || path.Clean(name) != name || !fs.ValidPath(name) {
		return "", fmt.Errorf("not a plain relative path inside the recipe's folder")
	}
	f, err := dir.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("no such file")
	} else if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		return "", pe.Err // its path is the one the message names already
	} else if err != nil {
		return "", err
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil {
		return "", err
	} else if !st.Mode().IsRegular() {
		return "", fmt.Errorf("not a regular file")
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(*budget)+1))
	if err != nil {
		return "", err
	}
	if len(b) > *budget {
		return "", fmt.Errorf("the recipe and its files are over %d bytes together", MaxBytes)
	}
	if !utf8.Valid(b) {
		return "", fmt.Errorf("not UTF-8 text")
	}
	*budget -= len(b)
	return string(b), nil
}
