package model

import (
	"fmt"
	"math"
	"testing"
	"unsafe"

	"jspark/kernels/cpu"
	"jspark/kernels/quant"
)

// decode runs ids one token a step and returns each step's logits.
func decode(t *testing.T, m *Model, ids []int) []float32 {
	t.Helper()
	pool := NewPool(m.Config, (len(ids)+15)/16, 16)
	defer pool.Free()
	table := pool.Contiguous()
	var out []float32
	for i, id := range ids {
		logits, err := m.Forward(&Batch{Tokens: []int{id}, Pos: []int{i}, Table: [][]int32{table}, Logits: []int{0}}, pool)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, logits...)
	}
	return out
}

// TestFusedMatchesSeparate: the stacked Q·K·V and Gate·Up products give the
// bits of the separate ones, for a batch and for one token a step, with
// biases (qwen2), norms (qwen3), grouped KV heads and every kind of kernel
// path; the stack shares the file's bytes when the parts lie back to back.
func TestFusedMatchesSeparate(t *testing.T) {
	ids := []int{1, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 3, 258, 40, 41, 200, 5}
	defer func() { fuse = true }()
	for _, arch := range []string{"llama", "qwen2", "qwen3"} {
		for _, typ := range []quant.Type{quant.F32, quant.F16, quant.Q8_0, quant.Q4_K} {
			var got [2][2][]float32
			for i, f := range []bool{false, true} {
				fuse = f
				m := synthModel(t, tiny(arch, typ), cpu.New(2))
				if a, ml := groupsOf(m.Blocks[0]); f != (a.qkv != nil && ml.gateUp != nil) {
					t.Fatalf("%s %v: fuse %v, stacked %v %v", arch, typ, f, a.qkv != nil, ml.gateUp != nil)
				} else if f && unsafe.SliceData(a.qkv.Data) != unsafe.SliceData(a.Q.Data) {
					t.Errorf("%s %v: Q, K, V lie back to back in the file but were copied", arch, typ)
				}
				got[i] = [2][]float32{prefill(t, m, ids, quant.F32), decode(t, m, ids)}
			}
			for j, name := range []string{"batch", "decode"} {
				a, b := got[0][j], got[1][j]
				for i := range a {
					if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
						t.Fatalf("%s %v %s: logit %d is %v stacked, %v separate", arch, typ, name, i, b[i], a[i])
					}
				}
			}
		}
	}
}

// TestStackCopies: parts that do not lie back to back are copied into one
// matrix, and then point into it.
func TestStackCopies(t *testing.T) {
	m := synthModel(t, tiny("llama", quant.Q8_0), cpu.New(1))
	l := m.Blocks[1].(*llamaLayer)
	q, v := append([]byte(nil), l.Attn.Q.Data...), append([]byte(nil), l.Attn.V.Data...)
	s := stack("s", l.Attn.V, l.Attn.Q)
	if s == nil || s.Rows != l.Attn.V.Rows+l.Attn.Q.Rows || string(s.Data) != string(v)+string(q) {
		t.Fatal("stack of V, Q: wrong rows or bytes")
	}
	if &l.Attn.V.Data[0] != &s.Data[0] || &l.Attn.Q.Data[0] != &s.Data[len(v)] {
		t.Error("the parts do not point into the copy")
	}
	if stack("s", l.Attn.Q, l.MLP.Down) != nil {
		t.Error("stacked matrices of different widths")
	}
}

// groupsOf is a dense layer's attention and MLP.
func groupsOf(b block) (*attention, *mlp) {
	switch l := b.(type) {
	case *llamaLayer:
		return &l.Attn, &l.MLP
	case *qwen2Layer:
		return &l.Attn, &l.MLP
	case *qwen3Layer:
		return &l.Attn, &l.MLP
	}
	panic(fmt.Sprintf("%T has no dense MLP", b))
}
