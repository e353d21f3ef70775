package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"jspark/backend/refs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var binary string

// TestMain builds the real binary once: the CLI contract is checked from
// outside, exit codes and all.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "jspark-cli")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "jspark")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		panic(err)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func jspark(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return o.String(), e.String(), code
}

func TestGenerateJSONMatchesLlamaCpp(t *testing.T) {
	cases, err := refs.Load("../../" + refs.Stories260K)
	if err != nil {
		t.Fatal(err)
	}
	want := cases[0]
	out, stderr, code := jspark(t, "generate", "--prompt", want.Prompt, "--max-tokens", "48", "--temperature", "0", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got GenerateResult
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&got); err != nil {
		t.Fatalf("%v in %s", err, out)
	}
	if d := cmp.Diff(want.PromptIDs, got.PromptIDs); d != "" {
		t.Fatalf("prompt_ids: %s", d)
	}
	if d := cmp.Diff(want.GenIDs, got.IDs); d != "" {
		t.Fatalf("ids: %s", d)
	}
	if got.Text != want.Text || got.PromptTokens != 5 || got.CompletionTokens != 48 || got.DecodeTokS <= 0 || got.PrefillTokS <= 0 {
		t.Fatalf("result %+v", got)
	}
	for _, key := range []string{`"prompt_ids":`, `"ids":`, `"text":`, `"prompt_tokens":`, `"completion_tokens":`, `"prefill_tok_s":`, `"decode_tok_s":`} {
		if !strings.Contains(out, key) {
			t.Errorf("output lacks %s", key)
		}
	}
	text, _, _ := jspark(t, "generate", "--prompt", want.Prompt, "--max-tokens", "48")
	if text != want.Text+"\n" {
		t.Fatalf("streamed text %q", text)
	}
}

func TestModelInfoJSON(t *testing.T) {
	out, stderr, code := jspark(t, "model", "info", "--format", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"arch": "llama", "n_layer": 5.0, "n_embd": 64.0, "n_head": 8.0, "n_head_kv": 4.0, "n_ff": 172.0,
		"vocab_size": 512.0, "context_length": 128.0, "bos": 1.0, "eos": 2.0}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	rope := got["rope"].(map[string]any)
	if rope["base"] != 10000.0 || rope["type"] != "normal" {
		t.Errorf("rope %v", rope)
	}
	if tt := got["tensor_types"].(map[string]any); tt["F32"] != 48.0 {
		t.Errorf("tensor_types %v", tt)
	}
}

func TestBadModelFiles(t *testing.T) {
	dir := t.TempDir()
	corrupt := filepath.Join(dir, "corrupt.gguf")
	os.WriteFile(corrupt, []byte("GGUF\x03\x00\x00\x00\x01"), 0o644)
	cases := map[string]string{
		filepath.Join(dir, "missing.gguf"): "missing.gguf: no such file or directory",
		corrupt:                            "corrupt.gguf: tensor_count at offset 8: need 8 bytes, 1 left (truncated file)",
	}
	for path, want := range cases {
		for _, args := range [][]string{{"model", "info", path}, {"generate", "--model", path, "--prompt", "x"}} {
			_, stderr, code := jspark(t, args...)
			if code != 1 || !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
				t.Errorf("%v: exit %d, stderr %q; want exit 1 and one line containing %q", args, code, stderr, want)
			}
		}
	}
}

func TestSynthSameFlagsSameBytes(t *testing.T) {
	dir := t.TempDir()
	var files [][]byte
	for i, seed := range []string{"5", "5", "6"} {
		out := filepath.Join(dir, "m"+string(rune('a'+i))+".gguf")
		_, stderr, code := jspark(t, "model", "synth", "--arch", "qwen3", "--layers", "2", "--dim", "128", "--heads", "4",
			"--kv-heads", "2", "--ff", "256", "--vocab-bytes", "--ctx", "1024", "--type", "q8_0", "--seed", seed, "--out", out)
		if code != 0 {
			t.Fatalf("synth: %s", stderr)
		}
		b, _ := os.ReadFile(out)
		files = append(files, b)
	}
	if !bytes.Equal(files[0], files[1]) || bytes.Equal(files[0], files[2]) {
		t.Fatal("same flags must give the same bytes, another seed other bytes")
	}
	out, stderr, code := jspark(t, "generate", "--model", filepath.Join(dir, "ma.gguf"), "--prompt", "hi", "--max-tokens", "5", "--format", "json")
	if code != 0 {
		t.Fatalf("generate on synth model: %s", stderr)
	}
	var got GenerateResult
	json.Unmarshal([]byte(out), &got)
	if got.CompletionTokens == 0 || len(got.IDs) != got.CompletionTokens {
		t.Fatalf("synth generate: %s", out)
	}
	info, _, _ := jspark(t, "model", "info", filepath.Join(dir, "ma.gguf"), "--format", "json")
	if !strings.Contains(info, `"arch": "qwen3"`) || !strings.Contains(info, `"type": "neox"`) {
		t.Fatalf("info %s", info)
	}
}

// startServe runs `jspark serve` as its own process and returns its base URL.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--port", "0"}, args...)...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	url := ""
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "jspark serve: ready at "); ok {
			url = strings.Fields(rest)[0]
			break
		}
	}
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/v1") {
		t.Fatalf("ready line URL %q", url)
	}
	go io.Copy(io.Discard, stderr)
	return url
}

func TestServeReadyLineAndHealth(t *testing.T) {
	url := startServe(t, "--kv-memory", "16", "--api-key", "k")
	resp, err := http.Get(strings.TrimSuffix(url, "/v1") + "/health")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("health: %v %v", resp, err)
	}
	req, _ := http.NewRequest("GET", url+"/models", nil)
	if resp, _ := http.DefaultClient.Do(req); resp.StatusCode != 401 {
		t.Fatalf("models without key: %d", resp.StatusCode)
	}
}

// TestChatTemplateFileBounded: a --chat-template-file past the bound, or
// one that never ends (/dev/zero), is an error naming the flag, read no
// further than the bound; a real template is read whole.
func TestChatTemplateFileBounded(t *testing.T) {
	big := filepath.Join(t.TempDir(), "big.jinja")
	if err := os.WriteFile(big, make([]byte, maxTemplateBytes+1), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{big, "/dev/zero"} {
		o := EngineFlags{ChatTemplateFile: path}
		if _, err := o.chatTemplate("gguf"); err == nil || !strings.Contains(err.Error(), "--chat-template-file "+path) {
			t.Errorf("%s: err = %v, want one naming the flag and the file", path, err)
		}
	}
	ok := filepath.Join(t.TempDir(), "ok.jinja")
	src := strings.Repeat("{{ messages }}", maxTemplateBytes/14)
	if err := os.WriteFile(ok, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	o := EngineFlags{ChatTemplateFile: ok}
	if got, err := o.chatTemplate("gguf"); err != nil || got != src {
		t.Errorf("a template at the bound: %d bytes, %v", len(got), err)
	}
	if got, _ := (&EngineFlags{}).chatTemplate("gguf"); got != "gguf" {
		t.Errorf("no file: %q, want the GGUF's", got)
	}
}
