package grammar

import (
	"encoding/json"
	"slices"
	"testing"

	"jspark/backend/gguf"
	"jspark/backend/model"
	"jspark/backend/sample"
	"jspark/backend/tokenizer"
	"jspark/kernels/cpu"
)

const bashSchema = `{"type":"object","properties":{"command":{"type":"string"},"timeout":{"type":"integer"},"mode":{"enum":["fast","slow"]},"flags":{"type":"array","items":{"type":"boolean"}}},"required":["command","timeout","mode","flags"]}`

func TestValid(t *testing.T) {
	g, err := FromSchema([]byte(bashSchema))
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]bool{
		`{"command":"ls -la","flags":[true,false],"mode":"fast","timeout":30}`: true,
		`{"command":"a\"b\\c\n","flags":[],"mode":"slow","timeout":-0}`:        true,
		`{"command":"ls","flags":[],"mode":"other","timeout":1}`:               false,
		`{"command":"ls","flags":[],"mode":"fast","timeout":1.5}`:              false,
		`{"command":"ls","mode":"fast","flags":[],"timeout":1}`:                false, // keys are sorted
		`{"command":"ls","flags":[],"mode":"fast","timeout":01}`:               false,
		`{"command":"ls","flags":[],"mode":"fast"`:                             false,
	} {
		if got := g.Valid(text); got != want {
			t.Errorf("Valid(%s) = %v, want %v", text, got, want)
		}
	}
	if !AnyJSON().Valid(`{"a":[1,2.5,{"b":null}],"c":"d"}`) || AnyJSON().Valid(`{"a":}`) {
		t.Error("AnyJSON")
	}
}

// Optional members may be left out, in any combination, but never the
// required ones; members keep sorted order.
func TestOptionalMembers(t *testing.T) {
	g, err := FromSchema([]byte(`{"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"},"c":{"type":"boolean"},"d":{"type":"null"}},"required":["c"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]bool{
		`{"c":true}`:                         true,
		`{"a":"x","c":false}`:                true,
		`{"b":1,"c":true,"d":null}`:          true,
		`{"a":"x","b":22,"c":true,"d":null}`: true,
		`{"c":true,"d":null}`:                true,
		`{}`:                                 false, // c is required
		`{"a":"x"}`:                          false,
		`{"c":true,"b":1}`:                   false, // out of order
		`{,"c":true}`:                        false,
		`{"c":true,}`:                        false,
		`{"a":"x",,"c":true}`:                false,
	} {
		if got := g.Valid(text); got != want {
			t.Errorf("Valid(%s) = %v, want %v", text, got, want)
		}
	}
	none, err := FromSchema([]byte(`{"type":"object","properties":{"x":{"type":"integer"},"y":{"type":"integer"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]bool{`{}`: true, `{"y":2}`: true, `{"x":1,"y":2}`: true, `{"x":1,}`: false} {
		if got := none.Valid(text); got != want {
			t.Errorf("no required: Valid(%s) = %v, want %v", text, got, want)
		}
	}
}

// References resolve within the document, as Pydantic and zod write them;
// a recursive schema makes a recursive grammar.
func TestRefs(t *testing.T) {
	g, err := FromSchema([]byte(`{"$defs":{"Item":{"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"$ref":"#/definitions/Tag"}}},"required":["name","tags"]}},
		"definitions":{"Tag":{"enum":["a","b"]}},
		"type":"object","properties":{"items":{"type":"array","items":{"$ref":"#/$defs/Item"}}},"required":["items"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for text, want := range map[string]bool{
		`{"items":[{"name":"x","tags":["a","b"]},{"name":"y","tags":[]}]}`: true,
		`{"items":[{"name":"x","tags":["c"]}]}`:                            false,
		`{"items":[{"name":"x"}]}`:                                         false,
	} {
		if got := g.Valid(text); got != want {
			t.Errorf("Valid(%s) = %v, want %v", text, got, want)
		}
	}
	tree, err := FromSchema([]byte(`{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#"}}},"required":["kids","v"]}`))
	if err != nil {
		t.Fatal(err)
	}
	if !tree.Valid(`{"kids":[{"kids":[],"v":2},{"kids":[{"kids":[],"v":4}],"v":3}],"v":1}`) || tree.Valid(`{"kids":[{"v":2}],"v":1}`) {
		t.Error("recursive schema")
	}
	// A left-recursive reference only repeats its own options.
	lr, err := FromSchema([]byte(`{"anyOf":[{"$ref":"#"},{"type":"integer"}]}`))
	if err != nil || !lr.Valid("12") || lr.Valid("x") || lr.Valid("") {
		t.Errorf("left-recursive schema: %v", err)
	}
	for schema, msg := range map[string]string{
		`{"$ref":"#/$defs/Missing"}`:                     `schema #/$ref: "#/$defs/Missing": nothing at "$defs"`,
		`{"$ref":"https://example.com/s.json"}`:          `schema #/$ref: "https://example.com/s.json" is not local; only #/… references are supported`,
		`{"properties":{"a":{"$ref":"#/properties/b"}}}`: `schema #/properties/a/$ref: "#/properties/b": nothing at "b"`,
	} {
		if _, err := FromSchema([]byte(schema)); err == nil || err.Error() != msg {
			t.Errorf("%s: %v, want %s", schema, err, msg)
		}
	}
}

// TestConstrainedStoriesModel: the embedded model, which knows nothing of
// JSON, produces a call whose arguments validate, for 20 seeds.
func TestConstrainedStoriesModel(t *testing.T) {
	m, _, err := model.Open("", cpu.New(2))
	if err != nil {
		t.Fatal(err)
	}
	g, err := ToolCall("<tool_call>\n", "\n</tool_call>", "\n", []Tool{{"bash", []byte(bashSchema)}, {"read", []byte(`{"type":"object","properties":{"path":{"type":"string","maxLength":40}},"required":["path"]}`)}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	prompt := m.Tok.Encode("Once upon a time", true, false)
	for seed := uint64(0); seed < 20; seed++ {
		c := g.NewConstraint(m.Tok)
		s := sample.New(sample.Params{Temperature: 0.8, Seed: seed})
		pool := model.NewPool(m.Config, 200, 16)
		table := pool.Contiguous()
		ctx := append([]int(nil), prompt...)
		b := &model.Batch{Tokens: prompt, Logits: []int{len(prompt) - 1}}
		for i := range prompt {
			b.Pos, b.Table = append(b.Pos, i), append(b.Table, table)
		}
		done := false
		for step := 0; step < 2000 && !done; step++ {
			logits, err := m.Forward(b, pool)
			if err != nil {
				t.Fatal(err)
			}
			c.Mask(logits)
			id := s.Sample(logits, ctx, ctx[len(prompt):])
			done = c.Accept(id)
			ctx = append(ctx, id)
			b = &model.Batch{Tokens: []int{id}, Pos: []int{len(ctx) - 1}, Table: [][]int32{table}, Logits: []int{0}}
		}
		text := c.Text()
		if !done || !g.Valid(text) {
			t.Fatalf("seed %d: incomplete or invalid call %q", seed, text)
		}
		body := text[len("<tool_call>\n") : len(text)-len("\n</tool_call>")]
		var call struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		}
		if err := json.Unmarshal([]byte(body), &call); err != nil {
			t.Fatalf("seed %d: %v in %q", seed, err, body)
		}
		if call.Name == "bash" {
			if _, ok := call.Arguments["timeout"].(float64); !ok {
				t.Fatalf("seed %d: timeout %v", seed, call.Arguments["timeout"])
			}
		} else if p, ok := call.Arguments["path"].(string); !ok || len(p) > 40 {
			t.Fatalf("seed %d: path %v", seed, call.Arguments["path"])
		}
	}
}

func FuzzValidNeverPanics(f *testing.F) {
	f.Add(bashSchema, `{"command":"x"}`)
	f.Fuzz(func(t *testing.T, schema, text string) {
		g, err := FromSchema([]byte(schema))
		if err != nil {
			return
		}
		g.Valid(text)
	})
}

func gpt2(t testing.TB) *tokenizer.Tokenizer {
	f, err := gguf.Open("../../testdata/vocab/ggml-vocab-gpt-2.gguf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// Up to maxCalls calls, a separator apart; the output is done only when no
// further call fits, and may end (end-of-generation allowed) after each.
func TestToolCalls(t *testing.T) {
	tok := gpt2(t)
	g, err := ToolCall("<c>", "</c>", "\n", []Tool{{"f", []byte(`{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}`)}}, 3)
	if err != nil {
		t.Fatal(err)
	}
	one := `<c>{"name":"f","arguments":{"x":1}}</c>`
	for text, want := range map[string]bool{
		one:                           true,
		one + "\n" + one:              true,
		one + "\n" + one + "\n" + one: true,
		one + "\n" + one + "\n" + one + "\n" + one: false,
		one + "\n": false,
		one + one:  false,
	} {
		if got := g.Valid(text); got != want {
			t.Errorf("Valid(%q) = %v, want %v", text, got, want)
		}
	}
	c := g.NewConstraint(tok)
	for i := 1; i <= 3; i++ {
		text := one
		if i > 1 {
			text = "\n" + one
		}
		var done bool
		for _, id := range tok.Encode(text, false, true) {
			if done {
				t.Fatalf("call %d: done before its end", i)
			}
			done = c.Accept(id)
		}
		if done != (i == 3) || !c.Allowed()[tok.EOS] && i < 3 {
			t.Fatalf("after call %d: done %v, end allowed %v", i, done, c.Allowed()[tok.EOS])
		}
	}
}

// A top-level number has no closing byte: end-of-generation becomes allowed
// once it may end, and not before.
func TestTopLevelNumberEnds(t *testing.T) {
	tok := gpt2(t)
	g, err := FromSchema([]byte(`{"type":"number"}`))
	if err != nil {
		t.Fatal(err)
	}
	c := g.NewConstraint(tok)
	ids := map[string]int{}
	for _, s := range []string{"-", "12", "."} {
		e := tok.Encode(s, false, false)
		if len(e) != 1 {
			t.Fatalf("%q is %d tokens", s, len(e))
		}
		ids[s] = e[0]
	}
	for _, st := range []struct {
		piece string
		end   bool
	}{{"", false}, {"-", false}, {"12", true}, {".", false}} {
		if st.piece != "" && c.Accept(ids[st.piece]) {
			t.Fatalf("after %q: done", st.piece)
		}
		if got := c.Allowed()[tok.EOS]; got != st.end {
			t.Fatalf("after %q (%q): end allowed %v, want %v", st.piece, c.Text(), got, st.end)
		}
	}
}

// The in-string shortcut must allow exactly what the full walk allows, at
// every step of a valid output on a 50K BPE vocabulary.
func TestMaskShortcutMatchesWalk(t *testing.T) {
	tok := gpt2(t)
	g, err := FromSchema([]byte(bashSchema))
	if err != nil {
		t.Fatal(err)
	}
	text := `{"command":"grep -rn \"TODO\" src | head -n 20 && echo done\n","flags":[true,false],"mode":"fast","timeout":30}`
	c := g.NewConstraint(tok)
	shortcuts := 0
	for i, id := range tok.Encode(text, false, false) {
		if c.inString() {
			shortcuts++
		}
		got, want := c.Allowed(), c.walkAll()
		if !slices.Equal(got, want) {
			t.Fatalf("step %d (%q so far): masks differ", i, c.Text())
		}
		if !got[id] {
			t.Fatalf("step %d: the text's own token %q is not allowed", i, tok.Decode([]int{id}, false))
		}
		c.Accept(id)
	}
	if !c.Done() || shortcuts == 0 {
		t.Errorf("done %v, %d steps took the shortcut", c.Done(), shortcuts)
	}
}

// BenchmarkMask prices one step inside a string on a 50K vocabulary, with
// the shortcut and with the full walk.
func BenchmarkMask(b *testing.B) {
	tok := gpt2(b)
	g, _ := FromSchema([]byte(bashSchema))
	c := g.NewConstraint(tok)
	for _, id := range tok.Encode(`{"command":"ls -la`, false, false) {
		c.Accept(id)
	}
	b.Run("shortcut", func(b *testing.B) {
		for b.Loop() {
			c.Allowed()
		}
	})
	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			c.walkAll()
		}
	})
}

// The XML formats write a string parameter raw: any text within its
// bounds that never holds the closing tag; other values as JSON.
func TestRawValues(t *testing.T) {
	tools := []Tool{{"f", []byte(`{"type":"object","properties":{"s":{"type":"string","maxLength":6},"n":{"type":"integer"},"e":{"enum":["a b","c"]}},"required":["s"]}`)}}
	g, err := ToolCalls("qwen3coder", tools, 1)
	if err != nil {
		t.Fatal(err)
	}
	call := func(params string) string {
		return "<tool_call>\n<function=f>\n" + params + "</function>\n</tool_call>"
	}
	p := func(k, v string) string { return "<parameter=" + k + ">\n" + v + "\n</parameter>\n" }
	for text, want := range map[string]bool{
		call(p("s", "a\"\\\n<b")):                       true,
		call(p("e", "a b") + p("n", "-3") + p("s", "")): true,
		call(p("s", "x</parameter>")):                   false,
		call(p("s", "</par")):                           true,
		call(p("s", "1234567")):                         false,
		call(p("s", "x") + p("n", "1.5")):               false,
		call(p("n", "1")):                               false, // s is required
		call(p("e", "d") + p("s", "x")):                 false,
		call(p("s", "\"quoted\"")):                      false, // 8 characters
	} {
		if got := g.Valid(text); got != want {
			t.Errorf("Valid(%q) = %v, want %v", text, got, want)
		}
	}
}

// Inside raw text (the XML formats' string values) the mask's shortcut
// gives what the whole walk gives, up to and through the closing tag.
func TestRawMaskShortcutMatchesWalk(t *testing.T) {
	tok := gpt2(t)
	g, err := ToolCalls("qwen3coder", []Tool{{"write", []byte(`{"type":"object","properties":{"path":{"type":"string"},"content":{"type":"string","maxLength":400},"n":{"type":"integer"}},"required":["content","path"]}`)}}, 1)
	if err != nil {
		t.Fatal(err)
	}
	text := "<tool_call>\n<function=write>\n<parameter=content>\nif a < b {\n\tf(\"héllo, 世界\") // </par\n}\n\n</parameter>\n" +
		"<parameter=path>\nmain.go\n</parameter>\n</function>\n</tool_call>"
	c := g.NewConstraint(tok)
	shortcuts := 0
	for i, id := range tok.Encode(text, false, false) {
		if c.inRaw() {
			shortcuts++
		}
		got, want := c.Allowed(), c.walkAll()
		if !slices.Equal(got, want) {
			t.Fatalf("step %d (%q so far): masks differ", i, c.Text())
		}
		if !got[id] {
			t.Fatalf("step %d: the text's own token %q is not allowed", i, tok.Decode([]int{id}, false))
		}
		c.Accept(id)
	}
	if !c.Done() || shortcuts < 10 {
		t.Errorf("done %v, %d steps took the shortcut", c.Done(), shortcuts)
	}
}

// BenchmarkRawMask prices one step inside raw text (an XML format's string
// value) on a 50K vocabulary, with the shortcut and with the full walk.
func BenchmarkRawMask(b *testing.B) {
	tok := gpt2(b)
	g, _ := ToolCalls("qwen3coder", []Tool{{"bash", []byte(bashSchema)}}, 1)
	c := g.NewConstraint(tok)
	for _, id := range tok.Encode("<tool_call>\n<function=bash>\n<parameter=command>\nls -la", false, false) {
		c.Accept(id)
	}
	b.Run("shortcut", func(b *testing.B) {
		for b.Loop() {
			c.Allowed()
		}
	})
	b.Run("walk", func(b *testing.B) {
		for b.Loop() {
			c.walkAll()
		}
	})
}
