package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"jspark/backend/gguf"
)

// synthMoE writes a small model of arch with the architecture's default
// expert flags, plus extra flags.
func synthMoE(t *testing.T, dir, arch string, extra ...string) string {
	t.Helper()
	out := filepath.Join(dir, arch+".gguf")
	args := append([]string{"model", "synth", "--arch", arch, "--layers", "2", "--dim", "64", "--heads", "4", "--kv-heads", "2",
		"--ff", "128", "--vocab-bytes", "--out", out}, extra...)
	if _, stderr, code := jspark(t, args...); code != 0 {
		t.Fatalf("synth %s: %s", arch, stderr)
	}
	return out
}

// TestSynthMoEInfo: each mixture-of-experts family synthesizes with its
// defaults or with the expert flags given, and model info reports them.
func TestSynthMoEInfo(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		arch  string
		flags []string
		want  map[string]any
	}{
		{"qwen3moe", nil, map[string]any{"n_expert": 8.0, "n_expert_used": 2.0, "n_ff_exp": 64.0, "n_expert_shared": 0.0, "sliding_window": 0.0, "attn_sinks": false}},
		{"glm4moe", []string{"--experts", "16", "--experts-used", "4", "--expert-ff", "32", "--shared-experts", "2", "--dense-layers", "0"},
			map[string]any{"n_expert": 16.0, "n_expert_used": 4.0, "n_ff_exp": 32.0, "n_expert_shared": 2.0, "n_layer_dense_lead": 0.0}},
		{"gpt-oss", []string{"--sliding-window", "64"}, map[string]any{"n_expert": 8.0, "sliding_window": 64.0, "attn_sinks": true}},
	} {
		path := synthMoE(t, dir, c.arch, c.flags...)
		out, stderr, code := jspark(t, "model", "info", path, "--format", "json")
		if code != 0 {
			t.Fatalf("%s info: %s", c.arch, stderr)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatal(err)
		}
		for k, v := range c.want {
			if got[k] != v {
				t.Errorf("%s: %s = %v, want %v", c.arch, k, got[k], v)
			}
		}
		if text, _, _ := jspark(t, "model", "info", path); !strings.Contains(text, "experts ") {
			t.Errorf("%s: text info without its experts:\n%s", c.arch, text)
		}
	}
	if _, stderr, code := jspark(t, "model", "synth", "--arch", "llama", "--experts", "4", "--out", filepath.Join(dir, "x.gguf")); code != 1 || !strings.Contains(stderr, "no experts") {
		t.Errorf("experts on a dense arch: exit %d, %q", code, stderr)
	}
}

// TestServeMoE: serve answers a chat request over HTTP on each family's
// synthetic file.
func TestServeMoE(t *testing.T) {
	dir := t.TempDir()
	for _, arch := range []string{"qwen3moe", "glm4moe", "gpt-oss"} {
		t.Run(arch, func(t *testing.T) {
			url := startServe(t, "--model", synthMoE(t, dir, arch, "--type", "q8_0"), "--kv-memory", "16")
			body := `{"messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":12,"temperature":0}`
			resp, err := http.Post(url+"/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			var got struct {
				Choices []struct {
					Message struct{ Content string }
				}
				Usage struct {
					CompletionTokens int `json:"completion_tokens"`
				}
			}
			if err := json.Unmarshal(b, &got); err != nil || resp.StatusCode != 200 || len(got.Choices) != 1 || got.Usage.CompletionTokens == 0 {
				t.Fatalf("status %d: %s", resp.StatusCode, b)
			}
		})
	}
}

// TestMissingExpertTensor: a file without one expert tensor is a one-line
// error naming it, exit 1, for info and for serve.
func TestMissingExpertTensor(t *testing.T) {
	dir := t.TempDir()
	f, err := gguf.Open(synthMoE(t, dir, "qwen3moe"))
	if err != nil {
		t.Fatal(err)
	}
	var w gguf.Writer
	for _, kv := range f.KVs {
		w.AddKV(kv.Key, kv.Value)
	}
	for _, ti := range f.Tensors {
		if ti.Name != "blk.1.ffn_up_exps.weight" {
			w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data)
		}
	}
	broken := filepath.Join(dir, "broken.gguf")
	if err := w.WriteFile(broken); err != nil {
		t.Fatal(err)
	}
	f.Close()
	defer os.Remove(broken)
	for _, args := range [][]string{{"model", "info", broken}, {"serve", "--port", "0", "--model", broken}} {
		_, stderr, code := jspark(t, args...)
		if code != 1 || !strings.Contains(stderr, "missing tensor blk.1.ffn_up_exps.weight") || strings.Count(stderr, "\n") != 1 || strings.Contains(stderr, "panic") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}
