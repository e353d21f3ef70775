package chat

import "testing"

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
				r := NewReasoning(c.open)
				var rs, as string
				for _, part := range []string{c.out[:cut], c.out[cut:cut2], c.out[cut2:]} {
					x, y := r.Feed(part)
					rs, as = rs+x, as+y
				}
				x, y := r.Finish()
				rs, as = rs+x, as+y
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
