package chat

import (
	"strings"
	"testing"
)

func TestReasoningSplitsAnywhere(t *testing.T) {
	cases := []struct {
		out               string
		open              bool
		reasoning, answer string
	}{
		{"<think>\nThe user wants ls.\n\nSo: ls.\n</think>\n\nRun ls.", false, "The user wants ls.\n\nSo: ls.", "Run ls."},
		{"\n<think>\n\n</think>\n\n<tool_call>{}</tool_call>", false, "", "<tool_call>{}</tool_call>"},
		{"Plain answer, no block.", false, "", "Plain answer, no block."},
		{"  <thin> is not a block", false, "", "  <thin> is not a block"},
		{"Okay, so 2+2.\n</think>\n\n4", true, "Okay, so 2+2.", "4"}, // DeepSeek-R1: the prompt opened the block
		{"<think>cut off inside </th", false, "cut off inside </th", ""},
		{"<think>a </b> <thinking> c</think>d</think>", false, "a </b> <thinking> c", "d</think>"},
		{"<think>", false, "", ""},
		{"", true, "", ""},
	}
	for _, c := range cases {
		for cut := 0; cut <= len(c.out); cut++ {
			for cut2 := cut; cut2 <= len(c.out); cut2 += 1 + cut2/3 {
				rs, as := splitReasoning(c.open, c.out[:cut], c.out[cut:cut2], c.out[cut2:])
				if rs != c.reasoning || as != c.answer {
					t.Fatalf("%q split at %d,%d: reasoning %q answer %q; want %q, %q", c.out, cut, cut2, rs, as, c.reasoning, c.answer)
				}
			}
		}
	}
}

func TestOpenThink(t *testing.T) {
	for prompt, want := range map[string]bool{
		"<|Assistant|><think>\n":                         true,
		"<|im_start|>assistant\n<think>\n\n</think>\n\n": false,
		"<|im_start|>assistant\n":                        false,
	} {
		if OpenThink(prompt) != want {
			t.Errorf("OpenThink(%q) = %v", prompt, !want)
		}
	}
}

func splitReasoning(open bool, parts ...string) (reasoning, answer string) {
	r := NewReasoning(open)
	for _, p := range parts {
		x, y := r.Feed(p)
		reasoning, answer = reasoning+x, answer+y
	}
	x, y := r.Finish()
	return reasoning + x, answer + y
}

// FuzzReasoning: any split of any output gives the same reasoning and
// answer, and nothing but the markers and edge whitespace is lost.
func FuzzReasoning(f *testing.F) {
	f.Add("<think>\na</think>\n\nb", 5, false)
	f.Add("x </th</think> y", 3, true)
	f.Fuzz(func(t *testing.T, s string, cut int, open bool) {
		if cut < 0 || cut > len(s) {
			return
		}
		r1, a1 := splitReasoning(open, s)
		r2, a2 := splitReasoning(open, s[:cut], s[cut:])
		if r1 != r2 || a1 != a2 {
			t.Fatalf("split at %d: %q %q vs whole %q %q", cut, r2, a2, r1, a1)
		}
		if !strings.Contains(s, r1) || !strings.Contains(s, a1) {
			t.Fatalf("%q gave reasoning %q answer %q, not parts of it", s, r1, a1)
		}
	})
}
