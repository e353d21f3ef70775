package chat

import (
	"encoding/json"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// reply is a parsed output as a client accumulates it.
type reply struct {
	Content, Reasoning string
	Calls              []call
}

func (r *reply) add(d Delta) {
	r.Content += d.Content
	r.Reasoning += d.Reasoning
	for _, c := range d.Calls {
		if c.Name != "" {
			r.Calls = append(r.Calls, call{Index: c.Index, ID: c.ID, Name: c.Name})
		} else {
			r.Calls[c.Index].Arguments += c.Arguments
		}
	}
}

// formatTools are the tools the recorded replies call: their schemas type
// the XML formats' values.
var formatTools = []Tool{
	{Type: "function", Function: Function{Name: "read_file", Parameters: json.RawMessage(
		`{"type":"object","properties":{"path":{"type":"string"},"limit":{"type":"integer"},"opts":{"type":"object"},"tag":{"anyOf":[{"type":"string"},{"type":"null"}]}},"required":["path"]}`)}},
	{Type: "function", Function: Function{Name: "bash", Parameters: json.RawMessage(
		`{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"number"},"bg":{"type":"boolean"}}}`)}},
}

func parseWith(f Format, forced bool, parts ...string) reply {
	p := &Parser{Format: f, Tools: formatTools, IDFunc: letterIDs, Forced: forced}
	var r reply
	for _, s := range parts {
		r.add(p.Feed(s))
	}
	d, _ := p.Finish()
	r.add(d)
	return r
}

var bashLS = call{1, "call_b", "bash", `{"command":"ls -la"}`}

// formatCases are recorded replies of each format and what they hold.
var formatCases = []struct {
	name   string
	format Format
	out    string
	want   reply
}{
	{"qwen3coder", FormatQwen3Coder,
		"I'll look first.\n<tool_call>\n<function=read_file>\n<parameter=path>\nsrc/main.go\n</parameter>\n<parameter=limit>\n40\n</parameter>\n</function>\n</tool_call>\n" +
			"<tool_call>\n<function=bash>\n<parameter=command>\ngrep -n \"a\\\"b\" *.go\n\necho 'done: 100%'\n</parameter>\n<parameter=timeout>\n2.5\n</parameter>\n<parameter=bg>\nfalse\n</parameter>\n</function>\n</tool_call>",
		reply{Content: "I'll look first.\n", Calls: []call{{0, "call_a", "read_file", `{"path":"src/main.go","limit":40}`},
			{1, "call_b", "bash", `{"command":"grep -n \"a\\\"b\" *.go\n\necho 'done: 100%'","timeout":2.5,"bg":false}`}}}},
	{"qwen3coder-typed", FormatQwen3Coder,
		"<tool_call>\n<function=read_file>\n<parameter=path>\n\n a.txt \n\n</parameter>\n<parameter=opts>\n{\"a\": [1, 2]}\n</parameter>\n<parameter=limit>\nten\n</parameter>\n<parameter=tag>\nnull\n</parameter>\n<parameter=extra>\n7\n</parameter>\n</function>\n</tool_call>",
		reply{Calls: []call{{0, "call_a", "read_file", `{"path":"\n a.txt \n","opts":{"a":[1,2]},"limit":"ten","tag":"null","extra":"7"}`}}}},
	{"qwen3coder-bare-function", FormatQwen3Coder,
		"<function=bash>\n<parameter=command>\nls -la\n</parameter>\n</function>",
		reply{Calls: []call{{0, "call_a", "bash", `{"command":"ls -la"}`}}}},
	{"qwen3coder-not-a-call", FormatQwen3Coder,
		"Use <tool_call> tags like <tool_call>this.",
		reply{Content: "Use <tool_call> tags like <tool_call>this."}},
	{"harmony-visible", FormatHarmony,
		"<|channel|>analysis<|message|>User wants a listing. Use ls.<|end|><|start|>assistant<|channel|>commentary to=functions.bash <|constrain|>json<|message|>{\"command\":\"ls -la\"}<|call|>",
		reply{Reasoning: "User wants a listing. Use ls.", Calls: []call{{0, "call_a", "bash", `{"command":"ls -la"}`}}}},
	{"harmony-control-tokens-hidden", FormatHarmony,
		"<|channel|>analysis<|message|>Think <|chan of it.<|start|>assistant to=functions.read_file<|channel|>commentary json<|message|>{\"path\": \"a<|end|>.txt\"}",
		reply{Reasoning: "Think <|chan of it.", Calls: []call{{0, "call_a", "read_file", `{"path": "a<|end|>.txt"}`}}}},
	{"harmony-final", FormatHarmony,
		"<|channel|>analysis<|message|>Greet.<|end|><|start|>assistant<|channel|>final<|message|>Hello, <b>world</b>.<|return|>",
		reply{Reasoning: "Greet.", Content: "Hello, <b>world</b>."}},
	{"harmony-plain-text", FormatHarmony, "Just text, no header.", reply{Content: "Just text, no header."}},
	{"glm45", FormatGLM,
		"Checking.\n<tool_call>read_file\n<arg_key>path</arg_key>\n<arg_value>a b.txt</arg_value>\n<arg_key>limit</arg_key>\n<arg_value>40</arg_value>\n</tool_call>\n<tool_call>bash\n<arg_key>command</arg_key>\n<arg_value>ls -la</arg_value>\n</tool_call>",
		reply{Content: "Checking.\n", Calls: []call{{0, "call_a", "read_file", `{"path":"a b.txt","limit":40}`}, bashLS}}},
	{"glm47", FormatGLM,
		"<tool_call>read_file<arg_key>path</arg_key><arg_value>\"q\"\n</arg_value><arg_key>opts</arg_key><arg_value>{\"x\": true}</arg_value></tool_call><tool_call>bash<arg_key>command</arg_key><arg_value>ls -la</arg_value></tool_call>",
		reply{Calls: []call{{0, "call_a", "read_file", `{"path":"\"q\"\n","opts":{"x":true}}`}, bashLS}}},
	{"mistral", FormatMistral,
		"[TOOL_CALLS]read_file[ARGS]{\"path\": \"[ARGS].txt\"}[TOOL_CALLS]bash[CALL_ID]a1b2c3d4e[ARGS]{\"command\":\"ls -la\"}",
		reply{Calls: []call{{0, "call_a", "read_file", `{"path": "[ARGS].txt"}`}, bashLS}}},
	{"mistral-list", FormatMistral,
		`[TOOL_CALLS][{"name": "read_file", "arguments": {"path": "a"}}, {"name": "bash", "arguments": {"command": "ls -la"}}]`,
		reply{Calls: []call{{0, "call_a", "read_file", `{"path":"a"}`}, bashLS}}},
	{"mistral-list-hidden-marker", FormatMistral,
		` [{"name": "read_file", "arguments": {"path": "a"}}, {"name": "bash", "arguments": {"command": "ls -la"}}]`,
		reply{Calls: []call{{0, "call_a", "read_file", `{"path":"a"}`}, bashLS}}},
	{"mistral-text", FormatMistral, "No calls [here].", reply{Content: "No calls [here]."}},
	{"kimi", FormatKimi,
		"Let me check.<|tool_calls_section_begin|><|tool_call_begin|>functions.read_file:0<|tool_call_argument_begin|>{\"path\": \"a.txt\"}<|tool_call_end|><|tool_call_begin|>functions.bash:1<|tool_call_argument_begin|>{\"command\":\"ls -la\"}<|tool_call_end|><|tool_calls_section_end|>",
		reply{Content: "Let me check.", Calls: []call{{0, "call_a", "read_file", `{"path": "a.txt"}`}, bashLS}}},
	{"deepseek", FormatDeepSeek,
		"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>read_file<｜tool▁sep｜>{\"path\": \"a.txt\"}<｜tool▁call▁end｜><｜tool▁call▁begin｜>bash<｜tool▁sep｜>{\"command\":\"ls -la\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>",
		reply{Calls: []call{{0, "call_a", "read_file", `{"path": "a.txt"}`}, bashLS}}},
	{"llama3", FormatLlama, "{\"name\": \"bash\", \"parameters\": {\"command\": \"ls -la\"}}",
		reply{Calls: []call{{0, "call_a", "bash", `{"command": "ls -la"}`}}}},
	{"hermes", FormatHermes,
		"On it.\n<tool_call>\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>\n<tool_call>\n{\"arguments\": {\"command\": \"ls -la\"}, \"name\": \"bash\"}\n</tool_call>",
		reply{Content: "On it.\n", Calls: []call{{0, "call_a", "read_file", `{"path": "a.txt"}`}, bashLS}}},
}

// Every split of a recorded reply, into two pieces, into single bytes and
// into random pieces, yields the same content, reasoning and calls.
func TestFormatsSplitAnywhere(t *testing.T) {
	for _, c := range formatCases {
		t.Run(c.name, func(t *testing.T) {
			if got := parseWith(c.format, false, c.out); !cmp.Equal(got, c.want) {
				t.Fatalf("whole: %s", cmp.Diff(c.want, got))
			}
			for cut := 0; cut <= len(c.out); cut++ {
				if got := parseWith(c.format, false, c.out[:cut], c.out[cut:]); !cmp.Equal(got, c.want) {
					t.Fatalf("split at %d: %s", cut, cmp.Diff(c.want, got))
				}
			}
			if got := parseWith(c.format, false, strings.Split(c.out, "")...); !cmp.Equal(got, c.want) {
				t.Fatalf("runes: %s", cmp.Diff(c.want, got))
			}
			bytes := make([]string, len(c.out))
			for i := 0; i < len(c.out); i++ {
				bytes[i] = c.out[i : i+1]
			}
			if got := parseWith(c.format, false, bytes...); !cmp.Equal(got, c.want) {
				t.Fatalf("bytes: %s", cmp.Diff(c.want, got))
			}
			r := rand.New(rand.NewPCG(1, 2))
			for range 50 {
				var parts []string
				for rest := c.out; rest != ""; {
					n := 1 + r.IntN(min(len(rest), 9))
					parts, rest = append(parts, rest[:n]), rest[n:]
				}
				if got := parseWith(c.format, false, parts...); !cmp.Equal(got, c.want) {
					t.Fatalf("split %q: %s", parts, cmp.Diff(c.want, got))
				}
			}
		})
	}
}

// A reply cut anywhere (max_tokens) never shows markup: its content is
// the whole reply's content so far (less a trailing piece that may begin a
// marker), its reasoning a prefix, and each call the whole's call with a
// prefix of its arguments. Forced, a cut reply has no content at all.
func TestFormatsCutNeverLeaksMarkup(t *testing.T) {
	for _, c := range formatCases {
		t.Run(c.name, func(t *testing.T) {
			markers := c.format.markers()
			// What a cut may leave at the end: a piece that may begin a
			// marker, and whitespace.
			trim := func(s string) string {
				for {
					n := 0
					for _, m := range markers {
						n = max(n, heldPrefix(s, m))
					}
					t := strings.TrimRight(s[:len(s)-n], " \t\r\n")
					if t == s {
						return s
					}
					s = t
				}
			}
			for cut := 0; cut <= len(c.out); cut++ {
				got := parseWith(c.format, false, c.out[:cut])
				for _, m := range markers {
					if strings.Contains(got.Content, m) && !strings.Contains(c.want.Content, m) || strings.Contains(got.Reasoning, m) && !strings.Contains(c.want.Reasoning, m) {
						t.Fatalf("cut at %d: %+v shows %s", cut, got, m)
					}
				}
				if !strings.HasPrefix(c.want.Content, trim(got.Content)) || !strings.HasPrefix(c.want.Reasoning, trim(got.Reasoning)) {
					t.Fatalf("cut at %d: content %q reasoning %q, not a prefix of %q %q", cut, got.Content, got.Reasoning, c.want.Content, c.want.Reasoning)
				}
				if len(got.Calls) > len(c.want.Calls) {
					t.Fatalf("cut at %d: %d calls, the whole has %d", cut, len(got.Calls), len(c.want.Calls))
				}
				for i, call := range got.Calls {
					w := c.want.Calls[i]
					if call.Name != w.Name || call.ID != w.ID || call.Index != w.Index {
						t.Fatalf("cut at %d: call %d is %+v, want %+v", cut, i, call, w)
					}
					if a := trim(call.Arguments); !strings.HasPrefix(w.Arguments, a) && !strings.HasPrefix(canonical(w.Arguments), a) {
						t.Fatalf("cut at %d: call %d arguments %q, not a prefix of %q", cut, i, call.Arguments, w.Arguments)
					}
				}
				if forced := parseWith(c.format, true, c.out[:cut]); len(c.want.Content) == 0 && forced.Content != "" {
					t.Fatalf("forced, cut at %d: content %q", cut, forced.Content)
				}
			}
		})
	}
}

func canonical(s string) string {
	c, err := CanonicalJSON([]byte(s))
	if err != nil {
		return s
	}
	return c
}

// Each format's parse holds however its output is split: a fuzzed text
// split in two gives what the whole gives.
func fuzzFormat(f *testing.F, format Format) {
	for _, c := range formatCases {
		if c.format == format {
			f.Add(c.out, len(c.out)/2)
		}
	}
	f.Fuzz(func(t *testing.T, s string, cut int) {
		if cut < 0 || cut > len(s) {
			return
		}
		if a, b := parseWith(format, false, s), parseWith(format, false, s[:cut], s[cut:]); !cmp.Equal(a, b) {
			t.Fatalf("split at %d: %s", cut, cmp.Diff(a, b))
		}
	})
}

func FuzzQwen3Coder(f *testing.F) { fuzzFormat(f, FormatQwen3Coder) }
func FuzzHarmony(f *testing.F)    { fuzzFormat(f, FormatHarmony) }
func FuzzGLM(f *testing.F)        { fuzzFormat(f, FormatGLM) }
func FuzzMistral(f *testing.F)    { fuzzFormat(f, FormatMistral) }
func FuzzKimi(f *testing.F)       { fuzzFormat(f, FormatKimi) }
func FuzzDeepSeek(f *testing.F)   { fuzzFormat(f, FormatDeepSeek) }
func FuzzLlama(f *testing.F)      { fuzzFormat(f, FormatLlama) }

func TestDetectFormat(t *testing.T) {
	for src, want := range map[string]Format{
		"{{- '<|start|>assistant<|channel|>final<|message|>' }}":           FormatHarmony,
		"{{ '<tool_call>\\n<function=' + name + '>\\n<parameter=' }}":      FormatQwen3Coder,
		"<tool_call>{{ tc.name }}<arg_key>{{ k }}</arg_key><arg_value>":    FormatGLM,
		"{{ '[TOOL_CALLS]' + name + '[ARGS]' }}":                           FormatMistral,
		"<|tool_calls_section_begin|>":                                     FormatKimi,
		"<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>{{ n }}<｜tool▁sep｜>":       FormatDeepSeek,
		"<｜tool▁calls▁begin｜>{{ t.type }}<｜tool▁sep｜>{{ n }}\n```json\n":   FormatAuto, // R1's fenced form
		"<|im_start|>{{ '<tool_call>\\n' }}":                               FormatHermes,
		"{{ '<|start_header_id|>' }}{\"name\": \"x\", \"parameters\": {}}": FormatAuto,
	} {
		if got := DetectFormat(src); got != want {
			t.Errorf("%q: %v, want %v", src, got, want)
		}
	}
	for _, f := range Formats {
		if g, err := ParseFormat(f.String()); err != nil || g != f {
			t.Errorf("ParseFormat(%q) = %v, %v", f, g, err)
		}
	}
	if _, err := ParseFormat("xml"); err == nil {
		t.Error("ParseFormat(xml) took it")
	}
}

// With MaxCalls 1 (parallel_tool_calls false) every format ends the output
// with its first call, however it is split, and Done says so.
func TestFormatsMaxCalls(t *testing.T) {
	for _, c := range formatCases {
		if len(c.want.Calls) < 2 {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			want := reply{Content: c.want.Content, Reasoning: c.want.Reasoning, Calls: c.want.Calls[:1]}
			for cut := 0; cut <= len(c.out); cut++ {
				p := &Parser{Format: c.format, Tools: formatTools, IDFunc: letterIDs, MaxCalls: 1}
				var got reply
				got.add(p.Feed(c.out[:cut]))
				got.add(p.Feed(c.out[cut:]))
				done := p.Done()
				d, _ := p.Finish()
				got.add(d)
				if !cmp.Equal(got, want) || p.Calls() != 1 {
					t.Fatalf("cut at %d: %s", cut, cmp.Diff(want, got))
				}
				if !done && c.format != FormatMistral {
					t.Fatalf("cut at %d: the first call is complete and more followed, but Done is false", cut)
				}
			}
		})
	}
}

// Harmony's template reads an assistant turn's reasoning from "thinking"
// and tests its content for channel markup: a turn that only calls tools
// has no content (as llama.cpp passes it), not none.
func TestHarmonyHistory(t *testing.T) {
	src := `{%- for m in messages %}{{ m.role }}:{% if "content" in m %}{{ "<|channel|>" in m.content }}{% endif %}` +
		`{% if "thinking" in m %}[{{ m.thinking }}]{% endif %}{% if m.tool_calls %}{{ m.tool_calls[0].function.name }}{% endif %}<|channel|><|message|>;{% endfor %}`
	tpl, err := Load(src, Special{})
	if err != nil || tpl.Format() != FormatHarmony {
		t.Fatalf("%v %v", tpl.Format(), err)
	}
	got, err := tpl.Render([]Message{{Role: "user", Content: "hi"},
		{Role: "assistant", ReasoningContent: "plan", ToolCalls: []ToolCall{{ID: "c", Function: FunctionCall{Name: "ls", Arguments: "{}"}}}},
		{Role: "tool", ToolCallID: "c", Content: "a"}, {Role: "assistant", Content: "done"}}, nil, false, nil)
	if want := "user:False<|channel|><|message|>;assistant:[plan]ls<|channel|><|message|>;tool:False<|channel|><|message|>;assistant:False<|channel|><|message|>;"; err != nil || got != want {
		t.Fatalf("%q %v\nwant %q", got, err, want)
	}
}

// A body held whole until its closing tag (not name first) costs memory
// linear in its length however small the pieces it arrives in: the held
// text is not copied, nor searched again from its start, at every piece.
func TestLongHeldBodyIsLinear(t *testing.T) {
	body := `{"arguments": {"data": "` + strings.Repeat("x", 2<<20) + `"}, "name": "write"}`
	out := "<tool_call>" + body + "</tool_call>"
	p := &Parser{Format: FormatHermes}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	var got reply
	for i := 0; i < len(out); i += 3 {
		got.add(p.Feed(out[i:min(len(out), i+3)]))
	}
	d, _ := p.Finish()
	got.add(d)
	runtime.ReadMemStats(&after)
	if len(got.Calls) != 1 || got.Calls[0].Name != "write" || len(got.Calls[0].Arguments) != 2<<20+len(`{"data":""}`) {
		t.Fatalf("%d calls", len(got.Calls))
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("a 2 MiB body fed 3 bytes at a time allocated %d MiB", alloc>>20)
	}
}
