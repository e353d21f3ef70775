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
svg.bar{margin:0;border:0;vertical-align:middle}td.links{text-align:left;max-width:30em}td.links a{white-space:nowrap;text-decoration:none}a.failed{color:#b00}a.passed{color:#2a7a0a}a.unscored{color:#777}
details.session{border:1px solid #ddd;margin:.3em 0;padding:.2em .6em}details.session>summary{cursor:pointer}details.failed>summary b{color:#b00}details.passed>summary b{color:#2a7a0a}
details.session:target{outline:2px solid #1f77b4}ol.steps{margin:.3em 0}ol.steps summary{cursor:pointer}pre{background:#f7f7f7;padding:.4em;white-space:pre-wrap;word-break:break-all;max-height:24em;overflow:auto;margin:.2em 0}
div.msg,div.call{margin:.3em 0 .3em 1em}p.infra{color:#b00}td.rate{white-space:nowrap}table.tasks td:nth-child(2){text-align:left}
</style>`

// openTarget opens the <details> a link points into (a session's
// trajectory), on load and on every hash change: the page's only script,
// inline.
const openTarget = `<script>
function jsparkOpen(){var e=document.getElementById(decodeURIComponent(location.hash.slice(1)));for(;e;e=e.parentElement){if(e.tagName==="DETAILS")e.open=true}}
addEventListener("hashchange",jsparkOpen);jsparkOpen();
</script>`

// Page starts report.html: the head, its style and the body's opening;
// the caller writes the body and ends it with End.
func Page(b *strings.Builder, title string) {
	fmt.Fprintf(b, `<!doctype html><html><head><meta charset="utf-8"><title>%s</title>%s</head><body>`, html.EscapeString(title), style)
}

// End closes what Page opened.
func End(b *strings.Builder) { b.WriteString(openTarget + "</body></html>\n") }

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
