package model

import (
	"testing"

	"jspark/kernels/cpu"
	"jspark/kernels/quant"
	"jspark/kernels/ref"
)

// prefill runs ids as one sequence in a pool of keys and values of type t.
func prefill(t *testing.T, m *Model, ids []int, kvType quant.Type) []float32 {
	t.Helper()
	pool := NewTypedPool(m.Config, (len(ids)+15)/16, 16, kvType)
	defer pool.Free()
	b := &Batch{Tokens: ids}
	table := pool.Contiguous()
	for i := range ids {
		b.Pos, b.Table, b.Logits = append(b.Pos, i), append(b.Table, table), append(b.Logits, i)
	}
	logits, err := m.Forward(b, pool)
	if err != nil {
		t.Fatal(err)
	}
	return append([]float32(nil), logits...)
}

// TestF16KV: keys and values stored as F16 move logits by about what
// rounding them to 11 bits implies, on both devices, and halve the bytes.
// NOTE: the CPU model has F16 weights, not Q8_0: quantized weights take the
// 8-bit-activation path on the CPU device, whose rounding flips would
// drown the effect measured here (1.7e-2 vs the 2e-3 bound).
func TestF16KV(t *testing.T) {
	ids := []int{1, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 3, 258, 40, 41, 200, 5}
	for _, m := range []*Model{synthModel(t, tiny("llama", quant.F32), ref.Kernels{}), synthModel(t, tiny("qwen3", quant.F16), cpu.New(2))} {
		want := prefill(t, m, ids, quant.F32)
		got := prefill(t, m, ids, quant.F16)
		want64 := make([]float64, len(want))
		for i, v := range want {
			want64[i] = float64(v)
		}
		if e := relL2(got, want64); e > 2e-3 || e == 0 {
			t.Errorf("%s: F16 KV moves logits by relative L2 %.2e (want >0 and ≤ 2e-3)", m.Arch, e)
		}
	}
	c := tiny("llama", quant.F32)
	m := synthModel(t, c, ref.Kernels{})
	if f16, f32 := m.KVBytesPerToken(quant.F16), m.KVBytesPerToken(quant.F32); 2*f16 != f32 || f32 != 2*2*2*64*4 {
		t.Errorf("KV bytes per token: F16 %d, F32 %d", f16, f32)
	}
}

func TestPoolErrors(t *testing.T) {
	m := synthModel(t, tiny("llama", quant.F32), ref.Kernels{})
	pool := NewPool(m.Config, 2, 16)
	b := &Batch{Tokens: []int{1}, Pos: []int{0}, Table: [][]int32{pool.Contiguous()}, Logits: []int{0}}
	if _, err := m.Forward(b, pool); err != nil {
		t.Fatal(err)
	}
	other := synthModel(t, tiny("llama", quant.F32), cpu.New(1))
	if _, err := other.Forward(b, pool); err == nil || err.Error() != "kv pool: allocated on another device" {
		t.Fatalf("pool used from another device: %v", err)
	}
	bad := NewTypedPool(m.Config, 2, 16, quant.Q8_0)
	if _, err := m.Forward(b, bad); err == nil || err.Error() != "kv pool: element type Q8_0 (want F32 or F16)" {
		t.Fatalf("Q8_0 pool: %v", err)
	}
}
