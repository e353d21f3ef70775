package chat

import "strings"

// Reasoning markers, as Qwen3, QwQ and the DeepSeek-R1 family write them.
const (
	ThinkOpen  = "<think>"
	ThinkClose = "</think>"
)

// OpenThink reports whether prompt text ends inside a reasoning block (the
// DeepSeek-R1 templates open one in the generation prompt), so the output
// starts as reasoning.
func OpenThink(prompt string) bool {
	return strings.LastIndex(prompt, ThinkOpen) > strings.LastIndex(prompt, ThinkClose)
}

type thinkState int

const (
	thinkUndecided thinkState = iota // only whitespace or a prefix of <think> so far
	thinkInside
	thinkAfter
)

// Reasoning splits streamed output into reasoning (a leading <think> block)
// and the answer, as llama.cpp's and vLLM's reasoning parsers do: the block's
// text goes to reasoning_content without the markers and the whitespace at
// its edges, the answer starts at its first non-space byte. Output that does
// not open with a block is all answer. Like Parser, any split of the output
// gives the same texts.
type Reasoning struct {
	state thinkState
	held  strings.Builder // undecided text, or trailing space/marker prefix inside
	lead  bool            // inside, nothing sent yet: leading space is dropped
	trim  bool            // after the block: the answer's leading space is dropped
}

// NewReasoning starts a splitter; open says the prompt left a block open.
func NewReasoning(open bool) *Reasoning {
	r := &Reasoning{}
	if open {
		r.state, r.lead = thinkInside, true
	}
	return r
}

// Feed takes the next piece of output and returns what it adds to the
// reasoning and to the answer.
func (r *Reasoning) Feed(s string) (reasoning, answer string) {
	r.held.WriteString(s)
	return r.drain(false)
}

// Finish flushes what is held: an undecided start is answer; the space at
// the end of an unclosed block is dropped with any partial marker kept.
func (r *Reasoning) Finish() (reasoning, answer string) { return r.drain(true) }

func (r *Reasoning) drain(final bool) (reasoning, answer string) {
	s := r.held.String()
	r.held.Reset()
	if r.state == thinkUndecided {
		t := strings.TrimLeft(s, " \t\r\n")
		switch {
		case strings.HasPrefix(t, ThinkOpen):
			r.state, r.lead = thinkInside, true
			s = t[len(ThinkOpen):]
		case !final && strings.HasPrefix(ThinkOpen, t):
			r.held.WriteString(s)
			return "", ""
		default:
			r.state = thinkAfter
		}
	}
	if r.state == thinkInside {
		if r.lead {
			s = strings.TrimLeft(s, " \t\r\n")
			r.lead = s == ""
		}
		i := strings.Index(s, ThinkClose)
		if i < 0 {
			if final {
				return strings.TrimRight(s, " \t\r\n"), ""
			}
			// Hold what may be the marker's start and trailing space: both
			// are known only when more arrives.
			keep := heldPrefix(s, ThinkClose)
			body := s[:len(s)-keep]
			trimmed := strings.TrimRight(body, " \t\r\n")
			r.held.WriteString(s[len(trimmed):])
			return trimmed, ""
		}
		reasoning = strings.TrimRight(s[:i], " \t\r\n")
		s, r.state, r.trim = s[i+len(ThinkClose):], thinkAfter, true
	}
	if r.trim {
		s = strings.TrimLeft(s, " \t\r\n")
		r.trim = s == ""
	}
	return reasoning, s
}
