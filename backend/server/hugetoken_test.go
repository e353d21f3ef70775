// A 30 MB prompt and a 32 MiB token: the plain run covers them.

//go:build !race

package server

import (
	"runtime"
	"slices"
	"strings"
	"testing"

	"jspark/backend/engine"
	"jspark/backend/gguf"
	jmodel "jspark/backend/model"
	"jspark/kernels/cpu"
	"jspark/kernels/quant"
)

// One huge token: a vocabulary entry of 32 MiB must not void the prompt's
// length bound, so a 30 MB prompt that cannot fit is still refused from
// its length, before it is tokenized (it took 3.0 GiB).
func TestOneHugeTokenStillBoundsThePrompt(t *testing.T) {
	vocab, err := jmodel.OpenFile("")
	if err != nil {
		t.Fatal(err)
	}
	tokens, _ := vocab.Array("tokenizer.ggml.tokens")
	scores, _ := vocab.Array("tokenizer.ggml.scores")
	types, _ := vocab.Array("tokenizer.ggml.token_type")
	var w gguf.Writer
	for _, kv := range vocab.KVs {
		switch kv.Key {
		case "tokenizer.ggml.tokens":
			w.AddKV(kv.Key, append(slices.Clone(tokens.Values.([]string)), strings.Repeat("\u2581zz", 32<<20/4)))
		case "tokenizer.ggml.scores":
			w.AddKV(kv.Key, append(slices.Clone(scores.Values.([]float32)), -1e9))
		case "tokenizer.ggml.token_type":
			w.AddKV(kv.Key, append(slices.Clone(types.Values.([]int32)), int32(1)))
		default:
			w.AddKV(kv.Key, kv.Value)
		}
	}
	raw, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	withHuge, err := gguf.Parse("huge-token.gguf", raw)
	if err != nil {
		t.Fatal(err)
	}
	mw, err := jmodel.Synth(jmodel.SynthOptions{Arch: "llama", Layers: 1, Dim: 16, Heads: 2, FF: 32, Type: quant.F32, Seed: 1, Vocab: withHuge})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := mw.Bytes()
	mf, err := gguf.Parse("synth.gguf", b)
	if err != nil {
		t.Fatal(err)
	}
	m, err := jmodel.Load(mf, cpu.New(2))
	if err != nil {
		t.Fatal(err)
	}
	f := startModel(t, m, func(o *engine.Options) { o.MaxContext = 4096 }, nil)
	text := strings.Repeat("Once upon a time there was a cat. ", 900_000) // 30 MB
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	resp, body := post(t, f.srv.URL+"/tokenize", "", `{"prompt":"`+text+`"}`)
	runtime.ReadMemStats(&after)
	if resp.StatusCode != 400 || !strings.Contains(body, `maximum context length is 4096 tokens; the prompt has at least`) {
		t.Fatalf("%d %.300s", resp.StatusCode, body)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 400<<20 {
		t.Errorf("a 30 MB prompt allocated %d MiB", alloc>>20)
	}
}
