package chat

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var tools = []Tool{{Type: "function", Function: Function{Name: "bash", Description: "Run a command",
	Parameters: json.RawMessage(`{"type":"object","required":["command"],"properties":{"command":{"type":"string"}}}`)}}}

func TestRenderIsByteStable(t *testing.T) {
	reordered := []Tool{{Type: "function", Function: Function{Name: "bash", Description: "Run a command",
		Parameters: json.RawMessage(`{ "properties": {"command": {"type": "string"}}, "type": "object", "required": ["command"] }`)}}}
	msgs := []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "hi"}}
	for _, name := range []string{"chatml", "llama3", "plain"} {
		tpl := Template{Name: name}
		a, err := tpl.Render(msgs, tools, true, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := tpl.Render(msgs, reordered, true, nil)
		if a != b {
			t.Fatalf("%s: key order changed the prompt", name)
		}
		// The first turn's prompt is a prefix of the second turn's.
		turn2 := append(append([]Message(nil), msgs...),
			Message{Role: "assistant", ToolCalls: []ToolCall{{ID: "c1", Type: "function", Function: FunctionCall{Name: "bash", Arguments: `{"command":"ls"}`}}}},
			Message{Role: "tool", ToolCallID: "c1", Content: "a.txt"})
		c, _ := tpl.Render(turn2, tools, true, nil)
		noGen, _ := tpl.Render(msgs, tools, false, nil)
		if !strings.HasPrefix(c, noGen) {
			t.Fatalf("%s: turn 2 does not extend turn 1:\n%q\n%q", name, noGen, c)
		}
	}
}

func TestChatMLGolden(t *testing.T) {
	got, _ := Template{Name: "chatml"}.Render([]Message{{Role: "user", Content: "hi"}}, nil, true, nil)
	if want := "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"; got != want {
		t.Fatalf("%q", got)
	}
}

func TestParserSplitsAnywhere(t *testing.T) {
	out := "Let me look.\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls -la\"}}\n</tool_call>" +
		"<tool_call>{\"name\":\"read\",\"arguments\":{\"path\":\"a<b\"}}</tool_call> done <tool"
	whole := run([]string{out})
	if whole.content != "Let me look.\n done <tool" || len(whole.calls) != 2 ||
		whole.calls[0].Name != "bash" || whole.calls[0].Arguments != `{"command": "ls -la"}` {
		t.Fatalf("whole: %+v", whole)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 500; i++ {
		var parts []string
		rest := out
		for rest != "" {
			n := 1 + r.IntN(min(len(rest), 12))
			parts, rest = append(parts, rest[:n]), rest[n:]
		}
		if got := run(parts); !cmp.Equal(got, whole, cmp.AllowUnexported(parsed{})) {
			t.Fatalf("split %q: %+v, want %+v", parts, got, whole)
		}
	}
}

type parsed struct {
	content string
	calls   []call
}

type call struct {
	Index               int
	ID, Name, Arguments string
}

// add accumulates a delta as a client would.
func (out *parsed) add(d Delta) {
	out.content += d.Content
	for _, c := range d.Calls {
		if c.Name != "" {
			out.calls = append(out.calls, call{Index: c.Index, ID: c.ID, Name: c.Name})
		} else {
			out.calls[c.Index].Arguments += c.Arguments
		}
	}
}

func letterIDs(i int) string { return "call_" + string(rune('a'+i)) }

func run(parts []string) parsed {
	p := &Parser{IDFunc: letterIDs}
	var out parsed
	for _, s := range parts {
		out.add(p.Feed(s))
	}
	d, _ := p.Finish()
	out.add(d)
	return out
}

// A call cut short never leaves markup in content: cut before its name is
// complete it is dropped, after it the call keeps what arrived of its
// arguments. In any split.
func TestTruncatedCallNeverLeaksMarkup(t *testing.T) {
	bash := func(args string) []call { return []call{{0, "call_a", "bash", args}} }
	for _, c := range []struct {
		out    string
		forced bool
		want   parsed
	}{
		{"ok <tool_call>{\"na", false, parsed{content: "ok "}},
		{"ok <tool_call>\n{\"name\":\"ba", false, parsed{content: "ok "}},
		{"ok <tool_call>{\"name\":\"bash\",\"argu", false, parsed{content: "ok ", calls: bash("")}},
		{"<tool_call>{\"name\":\"bash\",\"arguments\":{\"command\":\"ls", false, parsed{calls: bash(`{"command":"ls`)}},
		{"<tool_call>{\"arguments\":{\"b\":1},\"name\":\"bash\"}", false, parsed{calls: bash(`{"b":1}`)}}, // complete but for its closing marker
		{"done <tool_ca", false, parsed{content: "done <tool_ca"}},                                        // not yet known to be markup
		// Forced (the output is calls only): whatever is unfinished is markup.
		{"<tool_ca", true, parsed{}},
		{"<tool_call>\n{\"name\":\"ba", true, parsed{}},
		{"<tool_call>\n{\"name\":\"bash\"", true, parsed{calls: bash("")}},
		{`{"na`, true, parsed{}},         // a bare call (no markup) cut in its name
		{`{"name": "ba`, true, parsed{}}, // the same, decided
		{`{"name": "bash", "par`, true, parsed{calls: bash("")}},
		{`{"name": "bash", "parameters": {"a`, true, parsed{calls: bash(`{"a`)}},
		{"<tool_call>\n{\"name\":\"bash\",\"arguments\":{}}\n</tool_call>\n<tool_call>\n{\"n", true, parsed{calls: bash("{}")}},
	} {
		for cut := 0; cut <= len(c.out); cut++ {
			p := &Parser{IDFunc: letterIDs, Forced: c.forced}
			var got parsed
			got.add(p.Feed(c.out[:cut]))
			got.add(p.Feed(c.out[cut:]))
			d, _ := p.Finish()
			got.add(d)
			if !cmp.Equal(got, c.want, cmp.AllowUnexported(parsed{})) || p.Calls() != len(c.want.calls) {
				t.Fatalf("%q (forced %v) split at %d: %+v (%d calls), want %+v", c.out, c.forced, cut, got, p.Calls(), c.want)
			}
		}
	}
}

// The name goes out as soon as it is decoded, then every argument byte as it
// arrives: a client sees the first tool-call delta long before the call ends.
func TestCallStreamsAsItDecodes(t *testing.T) {
	p := &Parser{IDFunc: func(int) string { return "c0" }}
	steps := []struct {
		in   string
		want []CallDelta
	}{
		{"<tool_call>\n{\"name\": \"write\"", nil},
		{", \"arguments\": {\"pa", []CallDelta{{Index: 0, ID: "c0", Type: "function", Name: "write"}, {Index: 0, Arguments: `{"pa`}}},
		{"th\": \"a}\\\"b\"", []CallDelta{{Index: 0, Arguments: `th": "a}\"b"`}}},
		{"}}\n</tool_call>", []CallDelta{{Index: 0, Arguments: "}"}}},
	}
	for _, st := range steps {
		d := p.Feed(st.in)
		if diff := cmp.Diff(st.want, d.Calls); diff != "" || d.Content != "" {
			t.Fatalf("after %q: content %q, calls (-want +got):\n%s", st.in, d.Content, diff)
		}
	}
	if p.Calls() != 1 {
		t.Errorf("calls %d", p.Calls())
	}
}

// A body that is not name-first is parsed whole at its closing marker.
func TestOtherBodiesParseWhole(t *testing.T) {
	got := run([]string{`<tool_call>{"arguments": {"b": 1, "a": 2}, "name": "x"}</tool_call>`})
	if len(got.calls) != 1 || got.calls[0].Name != "x" || got.calls[0].Arguments != `{"a":2,"b":1}` {
		t.Fatalf("%+v", got)
	}
	got = run([]string{`<tool_call>{"name": "x", "arguments": "{\"a\": 1}"}</tool_call>`})
	if len(got.calls) != 1 || got.calls[0].Arguments != `{"a":1}` {
		t.Fatalf("string arguments: %+v", got)
	}
}

func FuzzParser(f *testing.F) {
	f.Add("a<tool_call>{\"name\":\"x\",\"arguments\":{}}</tool_call>b", 3)
	f.Add(" {\"name\": \"x\", \"parameters\": {\"a\": [1]}}", 9)
	f.Fuzz(func(t *testing.T, s string, cut int) {
		if cut < 0 || cut > len(s) {
			return
		}
		if a, b := run([]string{s}), run([]string{s[:cut], s[cut:]}); !cmp.Equal(a, b, cmp.AllowUnexported(parsed{})) {
			t.Fatalf("split at %d: %+v vs %+v", cut, b, a)
		}
	})
}

// Llama 3.1 answers a call as the whole reply: {"name": …, "parameters": …}.
func TestBareCallObject(t *testing.T) {
	cases := []struct {
		out, content, name, args string
		truncated                bool
	}{
		{"\n{\"name\": \"read\", \"parameters\": {\"path\": \"a.txt\"}}\n", "", "read", `{"path": "a.txt"}`, false},
		{`{"name": "read", "parameters": {"path": "a`, "", "read", `{"path": "a`, true},
		{`{"answer": 42}`, `{"answer": 42}`, "", "", false},
		{`{"parameters": {"b": 2}, "name": "x"}`, `{"parameters": {"b": 2}, "name": "x"}`, "", "", false}, // a bare call starts with its name
		{`{"name": "x"} and more`, `{"name": "x"} and more`, "", "", false},
		{`The file: {"name": "read", "parameters": {}}`, `The file: {"name": "read", "parameters": {}}`, "", "", false},
		{"  ", "  ", "", "", false},
		{`[1, 2]`, `[1, 2]`, "", "", false},
		{`[{"name": "x", "arguments": {}}, "oops"]`, `[{"name": "x", "arguments": {}}, "oops"]`, "", "", false},
	}
	for _, c := range cases {
		whole := run([]string{c.out})
		var name, args string
		if len(whole.calls) == 1 {
			name, args = whole.calls[0].Name, whole.calls[0].Arguments
		}
		if whole.content != c.content || name != c.name || args != c.args || len(whole.calls) > 1 {
			t.Errorf("%q: content %q calls %+v", c.out, whole.content, whole.calls)
		}
		p := &Parser{}
		p.Feed(c.out)
		if _, tr := p.Finish(); tr != c.truncated {
			t.Errorf("%q: truncated %v", c.out, tr)
		}
		for cut := 0; cut <= len(c.out); cut++ {
			if got := run([]string{c.out[:cut], c.out[cut:]}); !cmp.Equal(got, whole, cmp.AllowUnexported(parsed{})) {
				t.Fatalf("%q split at %d: %+v, want %+v", c.out, cut, got, whole)
			}
		}
	}
}

// Mistral answers with a list of calls ([TOOL_CALLS] is a control token).
func TestBareCallList(t *testing.T) {
	out := ` [{"name": "read", "arguments": {"path": "a"}}, {"name": "bash", "arguments": {"command": "ls"}}]`
	whole := run([]string{out})
	want := parsed{calls: []call{{0, "call_a", "read", `{"path":"a"}`}, {1, "call_b", "bash", `{"command":"ls"}`}}}
	if !cmp.Equal(whole, want, cmp.AllowUnexported(parsed{})) {
		t.Fatalf("%+v", whole)
	}
	for cut := 0; cut <= len(out); cut++ {
		if got := run([]string{out[:cut], out[cut:]}); !cmp.Equal(got, whole, cmp.AllowUnexported(parsed{})) {
			t.Fatalf("split at %d: %+v", cut, got)
		}
	}
}

// With MaxCalls 1 (parallel_tool_calls false) the output ends with the first
// call, in whatever pieces it arrives, and Done says so at once.
func TestMaxCallsEndsTheOutput(t *testing.T) {
	cases := []struct {
		out  string
		want parsed
	}{
		{"Looking.\n<tool_call>\n{\"name\": \"bash\", \"arguments\": {\"command\": \"ls\"}}\n</tool_call>\n<tool_call>{\"name\":\"read\",\"arguments\":{}}</tool_call> more",
			parsed{content: "Looking.\n", calls: []call{{0, "call_a", "bash", `{"command": "ls"}`}}}},
		{"<tool_call>{\"arguments\":{\"x\":1},\"name\":\"f\"}</tool_call><tool_call>{\"name\":\"g\",\"arguments\":{}}</tool_call>",
			parsed{calls: []call{{0, "call_a", "f", `{"x":1}`}}}},
		{`[{"name": "read", "arguments": {"path": "a"}}, {"name": "bash", "arguments": {"command": "ls"}}]`,
			parsed{calls: []call{{0, "call_a", "read", `{"path":"a"}`}}}},
	}
	for _, c := range cases {
		for cut := 0; cut <= len(c.out); cut++ {
			p := &Parser{MaxCalls: 1, IDFunc: letterIDs}
			var got parsed
			got.add(p.Feed(c.out[:cut]))
			if strings.HasPrefix(c.out, "<") && strings.Contains(c.out[:cut], "</tool_call>") && !p.Done() {
				t.Fatalf("%q cut at %d: the first call is complete but Done is false", c.out, cut)
			}
			got.add(p.Feed(c.out[cut:]))
			d, _ := p.Finish()
			got.add(d)
			if !cmp.Equal(got, c.want, cmp.AllowUnexported(parsed{})) || p.Calls() != 1 {
				t.Fatalf("%q cut at %d: %+v (%d calls), want %+v", c.out, cut, got, p.Calls(), c.want)
			}
		}
	}
}

// The whitespace between and after calls is layout, not content; text
// after a call keeps its whitespace. Any split gives the same.
func TestLayoutBetweenCalls(t *testing.T) {
	a := "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>"
	b := "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": 1}}\n</tool_call>"
	two := []call{{0, "call_a", "a", "{}"}, {1, "call_b", "b", `{"x": 1}`}}
	for _, c := range []struct {
		out  string
		want parsed
	}{
		{a + "\n" + b + "\n", parsed{calls: two}},
		{a + "\n \n" + b, parsed{calls: two}},
		{a + "\nDone.", parsed{content: "\nDone.", calls: two[:1]}},
		{"\n" + a, parsed{content: "\n", calls: two[:1]}}, // before any call, text is text
	} {
		for cut := 0; cut <= len(c.out); cut++ {
			if got := run([]string{c.out[:cut], c.out[cut:]}); !cmp.Equal(got, c.want, cmp.AllowUnexported(parsed{})) {
				t.Fatalf("%q split at %d: %+v, want %+v", c.out, cut, got, c.want)
			}
		}
	}
}
