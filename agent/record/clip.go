package record

import (
	"fmt"
	"unicode/utf8"
)

// Limit is how many bytes of one tool argument, tool output or reply text a
// trajectory or results.json keeps. The model got the whole text; the
// record keeps its head and tail around a marker that gives the full length,
// so a 270 MiB write argument costs the record 16 KiB, not 566 MB.
const Limit = 16 << 10

// Clip is s as records keep it.
func Clip(s string) string {
	if len(s) <= Limit {
		return s
	}
	h := Limit * 3 / 4
	for h > 0 && !utf8.RuneStart(s[h]) {
		h--
	}
	t := len(s) - Limit/4
	for t < len(s) && !utf8.RuneStart(s[t]) {
		t++
	}
	return fmt.Sprintf("%s\n[… jspark: %d of %d bytes left out of this record …]\n%s", s[:h], t-h, len(s), s[t:])
}
