package report

import (
	"fmt"
	"html"
	"io"
	"strings"
	"unicode/utf8"
)

// Table is one screen's table as the seed lays it out: a title line, a
// Markdown pipe table, and a closing note under it.
type Table struct {
	Screen  string     `json:"screen"`
	Title   string     `json:"title"`
	Columns []string   `json:"columns"`
	Rows    [][]string `json:"rows"`
	Note    string     `json:"note,omitempty"`
}

// Add appends a row.
func (t *Table) Add(cells ...string) { t.Rows = append(t.Rows, cells) }

// Write prints the table, its columns padded so it reads on a terminal and
// still renders as Markdown.
func (t *Table) Write(w io.Writer) {
	width := make([]int, len(t.Columns))
	for i, c := range t.Columns {
		width[i] = utf8.RuneCountInString(c)
	}
	for _, r := range t.Rows {
		for i, c := range r {
			if i < len(width) {
				width[i] = max(width[i], utf8.RuneCountInString(c))
			}
		}
	}
	line := func(cells []string) {
		var b strings.Builder
		b.WriteString("|")
		for i := range width {
			c := ""
			if i < len(cells) {
				c = cells[i]
			}
			fmt.Fprintf(&b, " %s%s |", c, strings.Repeat(" ", width[i]-utf8.RuneCountInString(c)))
		}
		fmt.Fprintln(w, b.String())
	}
	fmt.Fprintln(w, t.Title)
	line(t.Columns)
	sep := make([]string, len(width))
	for i, n := range width {
		sep[i] = strings.Repeat("-", n)
	}
	line(sep)
	for _, r := range t.Rows {
		line(r)
	}
	if t.Note != "" {
		fmt.Fprintln(w, t.Note)
	}
}

// ParseTable reads a table printed by Write back into cells, the title line
// included: the first table whose title starts with title.
func ParseTable(out, title string) (*Table, bool) {
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if !strings.HasPrefix(l, title) || i+2 >= len(lines) || !strings.HasPrefix(lines[i+1], "|") {
			continue
		}
		t := &Table{Title: l}
		cells := func(s string) []string {
			parts := strings.Split(strings.Trim(strings.TrimSpace(s), "|"), "|")
			for j := range parts {
				parts[j] = strings.TrimSpace(parts[j])
			}
			return parts
		}
		t.Columns = cells(lines[i+1])
		j := i + 3
		for ; j < len(lines) && strings.HasPrefix(lines[j], "|"); j++ {
			t.Rows = append(t.Rows, cells(lines[j]))
		}
		if j < len(lines) {
			t.Note = lines[j]
		}
		return t, true
	}
	return nil, false
}

// Cell is the cell of a row (by its first cell) and a column (by name).
func (t *Table) Cell(row, col string) (string, bool) {
	ci := -1
	for i, c := range t.Columns {
		if c == col {
			ci = i
		}
	}
	for _, r := range t.Rows {
		if len(r) > ci && ci >= 0 && r[0] == row {
			return r[ci], true
		}
	}
	return "", false
}

// HTML writes the table as report.html shows it: title, cells, note.
func (t *Table) HTML(b *strings.Builder) {
	fmt.Fprintf(b, "<h2>%s</h2><table><tr>", html.EscapeString(t.Title))
	for _, c := range t.Columns {
		fmt.Fprintf(b, "<th>%s</th>", html.EscapeString(c))
	}
	b.WriteString("</tr>")
	for _, r := range t.Rows {
		b.WriteString("<tr>")
		for _, c := range r {
			fmt.Fprintf(b, "<td>%s</td>", html.EscapeString(c))
		}
		b.WriteString("</tr>")
	}
	fmt.Fprintf(b, "</table><p class=note>%s</p>", html.EscapeString(t.Note))
}
