package server

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// The hostile inputs of the subprocess tests (serve_test.go): every field
// of every endpoint's body replaced by nested, huge or malformed JSON, and
// chat templates built from the constructs that once cost unbounded stack,
// memory or time.

// endpointBodies are a valid body of each endpoint that takes JSON, with a
// value in every field a client may send.
var endpointBodies = []struct{ path, body string }{
	{"/v1/chat/completions", `{"model":"","messages":[{"role":"system","content":"s"},` +
		`{"role":"user","content":[{"type":"text","text":"hi"}]},` +
		`{"role":"assistant","content":"","reasoning_content":"r","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"a\":[1,{\"b\":2}]}"}}]},` +
		`{"role":"tool","tool_call_id":"c1","content":"ok"}],` +
		`"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{"a":{"type":"array","items":{"type":"integer"}}},"required":["a"]}}}],` +
		`"tool_choice":"auto","parallel_tool_calls":true,"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","properties":{"x":{"enum":["a","b"]}}}}},` +
		`"max_tokens":4,"temperature":0.5,"top_p":0.9,"top_k":5,"min_p":0.1,"seed":1,"repetition_penalty":1.1,"frequency_penalty":0.1,"presence_penalty":0.1,` +
		`"logit_bias":{"1":1},"stop":["zz"],"logprobs":true,"top_logprobs":2,"n":1,"user":"u","cache_salt":"s",` +
		`"chat_template_kwargs":{"enable_thinking":false},"stream":false,"stream_options":{"include_usage":true}}`},
	{"/v1/completions", `{"model":"","prompt":"Once upon a time","max_tokens":4,"temperature":0.5,"stop":"zz","logprobs":2,"echo":false,` +
		`"logit_bias":{"2":-1},"seed":3,"stream":false,"stream_options":{"include_usage":true},"user":"u"}`},
	{"/v1/responses", `{"model":"","instructions":"be brief","input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]},` +
		`{"type":"reasoning","summary":[{"type":"summary_text","text":"think"}]},` +
		`{"type":"function_call","call_id":"c1","name":"f","arguments":"{\"a\":[1]}"},` +
		`{"type":"function_call_output","call_id":"c1","output":"ok"}],` +
		`"tools":[{"type":"function","name":"f","parameters":{"type":"object","properties":{"a":{"type":"array"}}}},` +
		`{"type":"namespace","name":"ns","tools":[{"type":"function","name":"g","parameters":{"type":"object"}}]},{"type":"web_search"}],` +
		`"tool_choice":"auto","max_output_tokens":4,"text":{"format":{"type":"text"}},"chat_template_kwargs":{"k":[1,{"v":2}]},"stream":false}`},
	{"/tokenize", `{"model":"","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}],` +
		`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"add_generation_prompt":true,"add_special_tokens":true,"chat_template_kwargs":{"x":1}}`},
	{"/detokenize", `{"tokens":[1,2,3]}`},
}

// hostileMarker stands for the hostile value while a body is re-encoded.
const hostileMarker = "\x01hostile\x01"

// hostileValue is raw JSON (or not quite JSON) of one kind, about size
// bytes or deep.
func hostileValue(rng *rand.Rand, size int) string {
	deep := min(size, 5_000_000)
	switch rng.IntN(14) {
	case 0:
		return strings.Repeat("[", deep) + strings.Repeat("]", deep)
	case 1:
		return strings.Repeat(`{"a":`, deep/5+1) + "1" + strings.Repeat("}", deep/5+1)
	case 2:
		return strings.Repeat("[", deep) // never closed
	case 3: // a string that holds deep JSON (arguments, content)
		b, _ := json.Marshal(strings.Repeat(`{"a":[`, deep/6+1))
		return string(b)
	case 4:
		return `"` + strings.Repeat("x", size) + `"`
	case 5: // escapes, lone surrogates, control characters
		parts := []string{`\u0000`, `\ud800`, `\udfff`, `\"`, `\\`, `\n`, "\u2028", "é", `\u00e9`, `<|im_start|>`, `{{ x }}`, `{%`}
		var b strings.Builder
		b.WriteByte('"')
		for b.Len() < size {
			b.WriteString(parts[rng.IntN(len(parts))])
		}
		b.WriteByte('"')
		return b.String()
	case 6: // a long array
		return "[" + strings.Repeat("1,", size/2) + "1]"
	case 7: // an object of many keys
		var b strings.Builder
		b.WriteByte('{')
		for i := 0; b.Len() < size; i++ {
			fmt.Fprintf(&b, `"k%d":%d,`, i, i)
		}
		return strings.TrimSuffix(b.String(), ",") + "}"
	case 8:
		return []string{`1e999`, `-1e999`, `18446744073709551616`, `-0`, `1e-400`, `9223372036854775807`, `-9223372036854775809`, `0.5`, `NaN`}[rng.IntN(9)]
	case 9:
		return []string{`null`, `true`, `""`, `{}`, `[]`, `[null]`, `{"":null}`}[rng.IntN(7)]
	case 10: // an array of objects, as tools or messages would be
		item := []string{`{"type":"function","function":{"name":"f"}}`, `{"role":"user","content":"x"}`, `{"type":"function_call_output","call_id":"c","output":"o"}`}[rng.IntN(3)]
		return "[" + strings.Repeat(item+",", max(1, size/len(item))) + item + "]"
	case 11: // a schema that refers to itself
		return `{"$ref":"#","type":"object","properties":{"a":{"$ref":"#"}}}`
	case 12: // not JSON
		return []string{`[1,`, `{"a"`, `"unterminated`, `tru`, `]`, `{"a":1}}`, "\x00"}[rng.IntN(7)]
	default: // a huge enum
		return `{"enum":[` + strings.TrimSuffix(strings.Repeat(`"value-000001",`, max(1, size/15)), ",") + `]}`
	}
}

// paths lists the path of every value in v (an object's members, an
// array's items), v itself first.
func paths(v any, at []any, out *[][]any) {
	*out = append(*out, slices.Clone(at))
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			paths(x[k], append(at, k), out)
		}
	case []any:
		for i, y := range x {
			paths(y, append(at, i), out)
		}
	}
}

// replaced is v with the value at path set to to (v itself when path is
// empty); a path that ends in a missing key adds it.
func replaced(v any, path []any, to any) any {
	if len(path) == 0 {
		return to
	}
	switch x := v.(type) {
	case map[string]any:
		y := make(map[string]any, len(x))
		for k, e := range x {
			y[k] = e
		}
		k := path[0].(string)
		y[k] = replaced(x[k], path[1:], to)
		return y
	case []any:
		y := slices.Clone(x)
		i := path[0].(int)
		y[i] = replaced(x[i], path[1:], to)
		return y
	}
	return v
}

// hostileBody is input i of a run seeded with seed: an endpoint and its
// body with one field (or the whole body, or its framing) made hostile.
// Sizes are mostly small, sometimes megabytes, rarely past the 32 MiB cap.
func hostileBody(seed uint64, i int) (path, body string) {
	rng := rand.New(rand.NewPCG(seed, uint64(i)))
	ep := endpointBodies[rng.IntN(len(endpointBodies))]
	size := []int{1, 10, MaxDepth - 8, MaxDepth + 1, 1000, 20_000, 200_000}[rng.IntN(7)]
	switch rng.IntN(40) {
	case 0:
		size = 5_000_000
	case 1:
		size = MaxBody + 100
	}
	var v any
	if err := json.Unmarshal([]byte(ep.body), &v); err != nil {
		panic(err)
	}
	if rng.IntN(3) == 0 { // some stream
		if m, ok := v.(map[string]any); ok && ep.path != "/tokenize" && ep.path != "/detokenize" {
			m["stream"] = true
		}
	}
	switch rng.IntN(10) {
	case 0: // framing: trailing data, a truncated body, another value
		b, _ := json.Marshal(v)
		s := string(b)
		return ep.path, []string{s + s, s + " x", s[:rng.IntN(len(s))], "null", "[" + s + "]", hostileValue(rng, size)}[rng.IntN(6)]
	case 1: // a field no endpoint knows
		v = replaced(v, []any{fmt.Sprintf("x%d", rng.IntN(3))}, hostileMarker)
	default:
		var all [][]any
		paths(v, nil, &all)
		v = replaced(v, all[1+rng.IntN(len(all)-1)], hostileMarker)
	}
	b, _ := json.Marshal(v)
	marker, _ := json.Marshal(hostileMarker)
	return ep.path, strings.Replace(string(b), string(marker), hostileValue(rng, size), 1)
}

// templateBase renders a conversation as most templates do: roles,
// content, tool calls with their arguments as JSON, the tools.
const templateBase = `{%- if tools %}{{ tools | tojson }}{% endif %}
{%- for m in messages %}<|im_start|>{{ m.role }}
{{ m.content }}{% if m.tool_calls %}{% for c in m.tool_calls %}<tool_call>{{ c.function.name }} {{ c.function.arguments | tojson }}</tool_call>{% endfor %}{% endif %}<|im_end|>
{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant
{% endif %}`

// hostileTemplate is template i of a run seeded with seed: the base with
// constructs that allocate, recurse or loop spliced in, sized from small
// to far past any budget, or not Jinja at all.
func hostileTemplate(seed uint64, i int) string {
	rng := rand.New(rand.NewPCG(seed, uint64(i)^0x7e4b))
	n := []int{3, 1000, 1 << 20, 1<<62 + 1}[rng.IntN(4)]
	d := []int{5, 200, 100_000, 1_000_000}[rng.IntN(4)]
	pieces := []string{
		fmt.Sprintf("{{ %s1%s }}", strings.Repeat("(", d), strings.Repeat(")", d)),
		fmt.Sprintf("{{ 'ab' * %d }}", n),
		fmt.Sprintf("{{ 'x' | center(%d) }}", n),
		fmt.Sprintf("{{ messages | tojson(indent=%d) }}", n),
		fmt.Sprintf("{{ 'a\nb' | indent(%d) }}", n),
		fmt.Sprintf("{{ range(%d) | join('xyz') }}", n),
		fmt.Sprintf("{{ ('a' * 1000) | replace('a', 'b' * %d) }}", n),
		fmt.Sprintf("{%% for i in range(%d) %%}{%% for j in range(%d) %%}{{ i ~ j }}{%% endfor %%}{%% endfor %%}", n, n),
		"{% set x = 'a' * 1000000 %}" + strings.Repeat("{% set x = x ~ x %}", 12) + "{{ x | length }}",
		"{% set l = [1] * 1000 %}" + strings.Repeat("{% set l = l + l %}", 20) + "{{ l | length }}",
		"{% macro r(n) %}{{ r(n + 1) }}{% endmacro %}{{ r(0) }}",
		"{% for m in messages recursive %}{{ loop(messages) }}{% endfor %}",
		strings.Repeat("{% if true %}", d) + "x" + strings.Repeat("{% endif %}", d),
		"{{ messages[0].tool_calls[0].function.arguments | tojson }}",
		"{{ raise_exception('refused') }}",
		"{{ tools[0].function.parameters | tojson(indent=2) }}",
		"{% set ns = namespace(s='') %}{% for m in messages %}{% set ns.s = ns.s ~ m.content * 1000 %}{% endfor %}{{ ns.s | length }}",
		"{{ " + strings.Repeat("[", d) + strings.Repeat("]", d) + " }}",
		"{{ undefined_thing.attr.attr }}{{ none.x }}",
		"{% for",
		"{{ 1 / 0 }}",
		string([]byte{0xff, 0xfe, '{', '{'}),
		strings.Repeat("x", []int{10, 2 << 20}[rng.IntN(2)]),
	}
	var b strings.Builder
	if rng.IntN(4) > 0 {
		b.WriteString(templateBase)
	}
	for range 1 + rng.IntN(3) {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}
