package model

import (
	"errors"
	"strings"
	"testing"

	"jspark/backend/gguf"
	"jspark/kernels/quant"
	"jspark/kernels/ref"
)

// tinyFile is a small valid model file (llama, 2 blocks, byte vocabulary).
func tinyFile(t testing.TB) []byte {
	t.Helper()
	w, err := Synth(SynthOptions{Arch: "llama", Layers: 2, Dim: 32, Heads: 4, KVHeads: 2, FF: 64, Type: quant.F32, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// rewrite re-encodes data with metadata key set to v (added when absent)
// and tensor name's dims replaced by dims (when name is not "").
func rewrite(t testing.TB, data []byte, key string, v any, name string, dims []uint64) []byte {
	t.Helper()
	f, err := gguf.Parse("x.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	var w gguf.Writer
	found := false
	for _, kv := range f.KVs {
		if kv.Key == key {
			kv.Value, found = v, true
		}
		w.AddKV(kv.Key, kv.Value)
	}
	if !found && key != "" {
		w.AddKV(key, v)
	}
	for _, ti := range f.Tensors {
		if ti.Name == name {
			ti.Dims = dims
		}
		w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data)
	}
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func load(data []byte) (*Model, error) {
	f, err := gguf.Parse("hostile.gguf", data)
	if err != nil {
		return nil, err
	}
	return Load(f, ref.Kernels{})
}

// A small file claiming a billion blocks once allocated a billion layers
// and died with "runtime: out of memory".
func TestBlockCountBeyondFile(t *testing.T) {
	for _, n := range []any{uint32(1e9), uint64(1<<31 - 1), uint32(3)} {
		_, err := load(rewrite(t, tinyFile(t), "llama.block_count", n, "", nil))
		if err == nil || !strings.Contains(err.Error(), "hostile.gguf: ") || !strings.Contains(err.Error(), "block") {
			t.Fatalf("block_count %v: %v, want an error naming the block count", n, err)
		}
	}
	if _, err := load(tinyFile(t)); err != nil {
		t.Fatal(err)
	}
}

// Shape counts larger than any tensor are refused before anything is
// sized from them.
func TestShapeCountsBeyondFile(t *testing.T) {
	for key, v := range map[string]any{
		"llama.embedding_length":        uint32(1 << 30),
		"llama.feed_forward_length":     uint32(1<<31 - 1),
		"llama.attention.key_length":    uint32(1<<31 - 1),
		"llama.attention.head_count":    uint32(1 << 30),
		"llama.rope.dimension_count":    uint32(1 << 20),
		"llama.attention.head_count_kv": uint32(3),
	} {
		_, err := load(rewrite(t, tinyFile(t), key, v, "", nil))
		if err == nil || !strings.HasPrefix(err.Error(), "hostile.gguf: ") {
			t.Errorf("%s = %v: %v, want an error", key, v, err)
		}
	}
}

// FuzzLoadFields is the structure-aware load fuzz: a valid model whose
// metadata counts or one tensor's dimensions take fuzzed values. Loading
// must give an error or a model whose shapes all check, never a panic or
// an allocation the file cannot back.
func FuzzLoadFields(f *testing.F) {
	keys := []string{"block_count", "embedding_length", "feed_forward_length", "attention.head_count",
		"attention.head_count_kv", "attention.key_length", "rope.dimension_count", "context_length"}
	tensors := []string{"token_embd.weight", "output_norm.weight", "blk.0.attn_q.weight", "blk.1.ffn_down.weight", "blk.0.attn_norm.weight"}
	f.Add(uint8(0), uint64(1e9), uint64(0), uint64(0))
	f.Add(uint8(5), uint64(1<<31-1), uint64(0), uint64(0))
	f.Add(uint8(8), uint64(64), uint64(1<<40), uint64(2))
	f.Add(uint8(10), uint64(16), uint64(8), uint64(0))
	base := tinyFile(f)
	f.Fuzz(func(t *testing.T, which uint8, v, d0, d1 uint64) {
		var data []byte
		if int(which) < 2*len(keys) {
			key := "llama." + keys[int(which)%len(keys)]
			var val any = uint32(v)
			if int(which) >= len(keys) {
				val = v
			}
			data = rewrite(t, base, key, val, "", nil)
		} else {
			dims := []uint64{v}
			if d0 != 0 {
				dims = append(dims, d0)
			}
			if d1 != 0 {
				dims = append(dims, d1)
			}
			data = rewrite(t, base, "", nil, tensors[int(which)%len(tensors)], dims)
		}
		m, err := load(data)
		if err != nil {
			var ge *gguf.Error
			if errors.As(err, &ge) || strings.HasPrefix(err.Error(), "hostile.gguf: ") {
				return
			}
			t.Fatalf("error without the file's name: %v", err)
		}
		if len(m.Blocks) != m.Config.Layers {
			t.Fatalf("loaded %d blocks of %d", len(m.Blocks), m.Config.Layers)
		}
		// Every shape checked at bind: a step runs.
		pool := NewPool(m.Config, 1, 16)
		if _, err := m.Forward(&Batch{Tokens: []int{1}, Pos: []int{0}, Table: [][]int32{pool.Contiguous()}, Logits: []int{0}}, pool); err != nil {
			t.Fatalf("a loaded model's step: %v", err)
		}
	})
}
