package report

import (
	"encoding/json"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"strings"
)

const style = `<style>
body{font:14px system-ui,sans-serif;margin:2em;color:#222}table{border-collapse:collapse;margin-bottom:.5em}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}
th{background:#f4f4f4}td:first-child{text-align:left}svg{background:#fafafa;border:1px solid #ddd;margin:0.5em 1em 1em 0}p.note{max-width:60em;color:#555}.legend span{margin-right:1em}
</style>`

// Page starts report.html: the head, its style and the body's opening;
// the caller writes the body and ends it with End.
func Page(b *strings.Builder, title string) {
	fmt.Fprintf(b, `<!doctype html><html><head><meta charset="utf-8"><title>%s</title>%s</head><body>`, html.EscapeString(title), style)
}

// End closes what Page opened.
func End(b *strings.Builder) { b.WriteString("</body></html>\n") }

// Save writes a run's two files into dir: results.json (v indented) and
// report.html (page).
func Save(dir string, v any, page string) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "results.json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "report.html"), []byte(page), 0o644)
}
