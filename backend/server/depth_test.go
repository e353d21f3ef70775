package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// nested is JSON arrays n deep, closed; open is n '[' never closed (five
// million of them overflowed the template engine's stack once).
func nested(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
func open(n int) string   { return strings.Repeat("[", n) }

// depthCases put deep JSON (the placeholder D) into every field of every
// endpoint that takes JSON, with the parameter a 400 must name.
var depthCases = []struct{ path, body, param string }{
	{"/v1/chat/completions", `{"messages":[{"role":"user","content":D}]}`, "messages[0].content"},
	{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":D}}]}`, "tools[0].function.parameters"},
	{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":D}}}}]}`, "tools[0].function.parameters.properties.a"},
	{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"tool_choice":D}`, "tool_choice"},
	{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"a","schema":{"const":D}}}}`, "response_format.json_schema.schema.const"},
	{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"k":D}}`, "chat_template_kwargs.k"},
	{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"stop":D}`, "stop"},
	{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"logit_bias":{"1":D}}`, "logit_bias.1"},
	{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":S}}]},{"role":"tool","tool_call_id":"c","content":"x"}]}`, "messages[1].tool_calls[0].function.arguments"},
	{"/v1/chat/completions", `D`, ""},
	{"/v1/responses", `{"input":D}`, "input"},
	{"/v1/responses", `{"input":[{"role":"user","content":D}]}`, "input[0].content"},
	{"/v1/responses", `{"input":"x","tools":[{"type":"function","name":"f","parameters":D}]}`, "tools[0].parameters"},
	{"/v1/responses", `{"input":"x","tools":[{"type":"namespace","name":"n","tools":[{"type":"function","name":"f","parameters":D}]}]}`, "tools[0].tools[0].parameters"},
	{"/v1/responses", `{"input":"x","text":{"format":{"type":"json_schema","name":"a","schema":D}}}`, "text.format.schema"},
	{"/v1/responses", `{"input":"x","chat_template_kwargs":{"k":D}}`, "chat_template_kwargs.k"},
	{"/v1/responses", `{"input":"x","tool_choice":D}`, "tool_choice"},
	{"/v1/responses", `{"input":[{"role":"user","content":"x"},{"type":"function_call","call_id":"c","name":"f","arguments":S},{"type":"function_call_output","call_id":"c","output":"x"}]}`, "input[1].arguments"},
	{"/v1/completions", `{"prompt":D}`, "prompt"},
	{"/v1/completions", `{"prompt":"x","stop":D}`, "stop"},
	{"/tokenize", `{"messages":[{"role":"user","content":D}]}`, "messages[0].content"},
	{"/tokenize", `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":D}}]}`, "tools[0].function.parameters"},
	{"/tokenize", `{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"k":D}}`, "chat_template_kwargs.k"},
	{"/tokenize", `{"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":S}}]}]}`, "messages[1].tool_calls[0].function.arguments"},
	{"/tokenize", `{"prompt":D}`, "prompt"},
	{"/detokenize", `{"tokens":D}`, "tokens"},
}

// TestDeepJSONInAnyFieldIs400NamingIt: JSON nested past MaxDepth in any
// field of any endpoint, in the body or in a string that holds JSON
// (tool-call arguments), closed or five million '[' that never close, is
// a 400 that names the field, before anything walks it; with a template
// that renders tool calls as well as with the built-in one.
func TestDeepJSONInAnyFieldIs400NamingIt(t *testing.T) {
	for _, tpl := range []struct{ name, source string }{{"built-in", ""}, {"jinja", jinjaTemplate}} {
		f := start(t, nil, func(o *Options) { o.ChatTemplate = tpl.source })
		for _, deep := range []struct{ name, json string }{{"closed", nested(MaxDepth + 1)}, {"5M open", open(5_000_000)}} {
			for _, c := range depthCases {
				str, _ := json.Marshal(deep.json)
				body := strings.NewReplacer("D", deep.json, "S", string(str)).Replace(c.body)
				name := fmt.Sprintf("%s/%s%s/%s", tpl.name, c.path, strings.NewReplacer("/", "_").Replace(c.param), deep.name)
				t.Run(name, func(t *testing.T) {
					resp, out := post(t, f.srv.URL+c.path, "", body)
					param := `"param":null`
					if c.param != "" {
						param = `"param":"` + c.param + `"`
					}
					if resp.StatusCode != 400 || !strings.Contains(out, param) || !strings.Contains(out, fmt.Sprintf("is nested more than %d deep", MaxDepth)) {
						t.Fatalf("%d %.400s", resp.StatusCode, out)
					}
				})
			}
		}
	}
}

// TestNestingUpToMaxDepthIsServed: the bound refuses only what is past it:
// a body and tool-call arguments nested exactly MaxDepth deep are served.
func TestNestingUpToMaxDepthIsServed(t *testing.T) {
	f := start(t, nil, func(o *Options) { o.ChatTemplate = jinjaTemplate })
	args, _ := json.Marshal(nested(MaxDepth))
	prefix := `{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"k":` // 2 deep
	for _, c := range []struct{ name, body string }{
		{"body", prefix + nested(MaxDepth-2) + `}}`},
		{"arguments", `{"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":` + string(args) + `}}]}]}`},
	} {
		resp, out := post(t, f.srv.URL+"/tokenize", "", c.body)
		if resp.StatusCode != 200 {
			t.Errorf("%s: %d %.300s", c.name, resp.StatusCode, out)
		}
	}
}

func TestTooDeep(t *testing.T) {
	for _, c := range []struct {
		in   string
		max  int
		at   int
		path string
	}{
		{`[[]]`, 2, -1, ""},
		{`[[[]]]`, 2, 2, ""},
		{`{"a":"[[[[","b":[{"c\"d":[[1]]}]}`, 3, 25, "b[0].c\"d"},
		{`{"a":1,"b":{"c":2,"d":[3,[4,[5]]]}}`, 4, 28, "b.d"},
		{`{"x":[1,2,{"y":{"z":{"w":[[[`, 5, 25, "x[2].y.z.w"},
		{`"\"[[[["`, 1, -1, ""},
	} {
		at, path := tooDeep([]byte(c.in), c.max)
		if at != c.at || path != c.path {
			t.Errorf("tooDeep(%s, %d) = %d %q, want %d %q", c.in, c.max, at, path, c.at, c.path)
		}
	}
}

// TestBodyThatIsNotOneObjectIs400: every endpoint takes one JSON object:
// null, another value, or anything after the object (a second object,
// garbage) is a 400, not a request built from part of the body.
func TestBodyThatIsNotOneObjectIs400(t *testing.T) {
	f := start(t, nil, nil)
	valid := map[string]string{
		"/v1/chat/completions": `{"messages":[{"role":"user","content":"x"}],"max_tokens":1}`,
		"/v1/completions":      `{"prompt":"x","max_tokens":1}`,
		"/v1/responses":        `{"input":"x","max_output_tokens":1}`,
		"/tokenize":            `{"prompt":"x"}`,
		"/detokenize":          `{"tokens":[1]}`,
	}
	for path, body := range valid {
		if resp, out := post(t, f.srv.URL+path, "", body); resp.StatusCode != 200 {
			t.Fatalf("%s %s: %d %s", path, body, resp.StatusCode, out)
		}
		for _, c := range []struct{ body, want string }{
			{`null`, "the body must be a JSON object, not JSON null"},
			{` [1]`, "the body must be a JSON object, not a JSON array"},
			{`"x"`, "the body must be a JSON object, not a JSON string"},
			{`7`, "the body must be a JSON object, not a JSON number"},
			{``, "the body must be a JSON object, not an empty body"},
			{body + ` xyz`, fmt.Sprintf("unexpected data after the JSON body, at byte %d", len(body)+1)},
			{body + body, fmt.Sprintf("unexpected data after the JSON body, at byte %d", len(body))},
			{body + "\n\t ", ""},
		} {
			resp, out := post(t, f.srv.URL+path, "", c.body)
			switch {
			case c.want == "" && resp.StatusCode != 200:
				t.Errorf("%s %q: %d %s", path, c.body, resp.StatusCode, out)
			case c.want != "" && (resp.StatusCode != 400 || !strings.Contains(out, c.want)):
				t.Errorf("%s %q: %d %s; want 400 %s", path, c.body, resp.StatusCode, out, c.want)
			}
		}
	}
}

// TestRenderErrorsNameTheirField: what the renderer refuses is a 400 that
// names the field it is about, not always messages.
func TestRenderErrorsNameTheirField(t *testing.T) {
	f := start(t, nil, func(o *Options) { o.ChatTemplate = jinjaTemplate })
	for _, c := range []struct{ body, param string }{
		{`{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"messages":[]}}`, "chat_template_kwargs"},
		{`{"messages":[{"role":"user","content":"x"},{"role":"wizard","content":"x"}]}`, "messages[1].role"},
		{`{"messages":[{"role":"developer","content":"x"}]}`, "messages"},
	} {
		resp, out := post(t, f.srv.URL+"/v1/chat/completions", "", c.body)
		if resp.StatusCode != 400 || !strings.Contains(out, `"param":"`+c.param+`"`) {
			t.Errorf("%s: %d %s; want param %s", c.body, resp.StatusCode, out, c.param)
		}
	}
}
