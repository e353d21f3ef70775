package model

import (
	"fmt"
	"strings"
	"testing"

	"jspark/backend/gguf"
	"jspark/backend/sample"
	"jspark/kernels"
	"jspark/kernels/cpu"
	"jspark/kernels/quant"
	"jspark/kernels/ref"
)

var hybridArchs = []string{"gemma3", "qwen35", "qwen35moe", "qwen3next"}

// tinyHybrid is a small model of a hybrid architecture: gemma3 with its
// global layer last and a window shorter than the prompt; the DeltaNet
// families with three recurrent layers then a full one, two key heads and
// four value heads of 32; the MoE ones with more experts than a short
// prompt routes evenly.
func tinyHybrid(arch string, typ quant.Type) SynthOptions {
	o := SynthOptions{Arch: arch, Layers: 4, Dim: 128, Heads: 4, KVHeads: 2, FF: 256, Type: typ, Seed: 9}
	DefaultMoE(&o)
	switch arch {
	case "gemma3":
		o.Layers, o.SlidingWindow = 6, 5
	case "qwen35moe", "qwen3next":
		o.Experts, o.ExpertsUsed, o.ExpertFF, o.SharedFF = 6, 2, 64, 96
	}
	return o
}

// hybridPrompt is 40 tokens: two whole blocks of 16 (the DeltaNet's
// chunked form), then single steps.
var hybridPrompt = []int{1, 72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33, 3, 258, 40, 41, 200, 5,
	70, 80, 90, 100, 110, 120, 130, 140, 150, 160, 170, 180, 190, 200, 210, 220, 230, 240, 250, 9}

// hybridLogits runs ids as one prefill of a batch of two sequences in their
// own state slots: ids, and a copy of its first half; it returns every
// token of the first's logits.
func hybridLogits(t testing.TB, m *Model, ids []int) []float32 {
	const bs = 16
	blocks := (len(ids) + bs - 1) / bs
	pool := NewStatePool(m.Config, 2*blocks, bs, quant.F32, 2)
	defer pool.Free()
	main, other := make([]int32, blocks), make([]int32, blocks)
	for i := range main {
		main[i], other[i] = int32(2*i+1), int32(2*i)
	}
	b := &Batch{}
	for i, id := range ids[:len(ids)/2] {
		b.Tokens, b.Pos, b.Table, b.Slot = append(b.Tokens, id), append(b.Pos, i), append(b.Table, other), append(b.Slot, 1)
	}
	for i, id := range ids {
		b.Tokens, b.Pos, b.Table, b.Slot = append(b.Tokens, id), append(b.Pos, i), append(b.Table, main), append(b.Slot, 0)
		b.Logits = append(b.Logits, len(ids)/2+i)
	}
	logits, err := m.Forward(b, pool)
	if err != nil {
		t.Fatal(err)
	}
	return append([]float32(nil), logits...)
}

// TestHybridMatchesFloat64Reference: each hybrid architecture's logits,
// every token of a 40-token prompt in a two-sequence batch, within 1e-4
// relative L2 of the float64 reference (naive_hybrid_test.go), on both
// devices; the CPU's quantized products carry 8-bit activation error and
// follow the experts it chose.
func TestHybridMatchesFloat64Reference(t *testing.T) {
	naive := func(m *Model, forced map[int][]int32) [][]float64 {
		if m.Arch == "gemma3" {
			return naiveGemma3(m, hybridPrompt)
		}
		return naiveDeltaNet(m, hybridPrompt, forced)
	}
	for _, arch := range hybridArchs {
		for _, typ := range []quant.Type{quant.F32, quant.F16, quant.Q8_0} {
			var want [][]float64 // the reference with its own routing, for both devices
			for _, kname := range []string{"ref", "cpu"} {
				t.Run(fmt.Sprintf("%s/%v/%s", arch, typ, kname), func(t *testing.T) {
					var k kernels.Kernels = ref.Kernels{}
					if kname == "cpu" {
						k = cpu.New(2)
					}
					m := synthModel(t, tinyHybrid(arch, typ), k)
					forced := map[int][]int32{}
					m.onRoute = func(layer int, ids []int32) {
						n := len(hybridPrompt) / 2 * m.ExpertsUsed // the other sequence's, first
						forced[layer] = append([]int32(nil), ids[n:]...)
					}
					got := hybridLogits(t, m, hybridPrompt)
					if want == nil {
						want = naive(m, nil)
					}
					w, bound := want, 1e-4
					switch {
					case kname != "cpu" || typ == quant.F32 || typ == quant.F16:
					case arch == "gemma3":
						bound = 4e-2 // as the dense test
					default:
						// NOTE: the DeltaNet layers amplify the 8-bit
						// activation error: each value head's output is
						// RMS-normed, and where it is small (a state
						// nearly orthogonal to the query: RMS 6e-4 against
						// a typical 6e-3 here) its error grows with it. One
						// layer measured 2-4 %, three 4-13 %, the MoE
						// model up to 32 % (its router weights move too).
						// ref's float activations hold 1e-4 on these
						// files; ik_llama.cpp is held to its own 8-bit
						// rounding (ikref_hybrid_test).
						bound = 0.35
						if m.Experts > 0 {
							w = naive(m, forced)
						}
					}
					worst := 0.0
					for i := range hybridPrompt {
						e := relL2(got[i*m.Vocab:(i+1)*m.Vocab], w[i])
						worst = max(worst, e)
						if e > bound {
							t.Fatalf("token %d: relative L2 error %.2e", i, e)
						}
					}
					t.Logf("largest relative L2 error %.2g", worst)
				})
			}
		}
	}
}

// stateOf reads a store's recurrent states, every layer's slot 0.
func stateOf(t testing.TB, m *Model, pool *Pool) [][]float32 {
	states, err := pool.States(m.K)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for l, b := range states {
		if b == nil {
			continue
		}
		v := make([]float32, m.States[l].StateFloats)
		m.K.Read(kernels.F32Bytes(v), b, 0)
		out = append(out, v)
	}
	return out
}

// TestDeltaChunkedMatchesSteps: a prefill of 40 tokens in one step (two
// chunks of 16 in the chunked form, then single steps) gives the logits
// and leaves the states of the same 40 tokens run one a step, within
// float rounding, on both devices.
func TestDeltaChunkedMatchesSteps(t *testing.T) {
	for _, arch := range []string{"qwen35", "qwen3next"} {
		for _, kname := range []string{"cpu", "ref"} {
			t.Run(arch+"/"+kname, func(t *testing.T) {
				var k kernels.Kernels = ref.Kernels{}
				if kname == "cpu" {
					k = cpu.New(2)
				}
				m := synthModel(t, tinyHybrid(arch, quant.F32), k)
				ids := hybridPrompt
				run := func(step int) ([]float32, [][]float32) {
					pool := NewPool(m.Config, 3, 16)
					defer pool.Free()
					table := pool.Contiguous()
					var out []float32
					for off := 0; off < len(ids); off += step {
						b := &Batch{}
						for i := off; i < min(off+step, len(ids)); i++ {
							b.Tokens, b.Pos, b.Table = append(b.Tokens, ids[i]), append(b.Pos, i), append(b.Table, table)
							b.Logits = append(b.Logits, i-off)
						}
						logits, err := m.Forward(b, pool)
						if err != nil {
							t.Fatal(err)
						}
						out = append(out, logits...)
					}
					return out, stateOf(t, m, pool)
				}
				chunked, sc := run(len(ids))
				steps, ss := run(1)
				worst := 0.0
				for i := range ids {
					worst = max(worst, relL2(chunked[i*m.Vocab:(i+1)*m.Vocab], f64s(steps[i*m.Vocab:(i+1)*m.Vocab])))
				}
				if worst > 1e-5 {
					t.Errorf("logits: relative L2 %.2g between chunked and single steps", worst)
				}
				var sworst float64
				for l := range sc {
					sworst = max(sworst, relL2(sc[l], f64s(ss[l])))
				}
				if sworst > 1e-5 {
					t.Errorf("states: relative L2 %.2g between chunked and single steps", sworst)
				}
				t.Logf("relative L2: logits %.2g, states %.2g", worst, sworst)
			})
		}
	}
}

// TestHybridSplitInvariant: a sequence prefilled in pieces that end at
// multiples of the block size, beside other sequences, gives the bits of
// the same sequence prefilled alone in one piece (the contract of
// StateStore), and so do its decode steps after.
func TestHybridSplitInvariant(t *testing.T) {
	for _, arch := range hybridArchs {
		t.Run(arch, func(t *testing.T) {
			m := synthModel(t, tinyHybrid(arch, quant.Q8_0), cpu.New(2))
			ids := append(append([]int(nil), hybridPrompt...), 11, 12, 13)
			const bs = 16
			// alone: the prompt in one step, then three decode steps.
			alone := func() []float32 {
				pool := NewStatePool(m.Config, 4, bs, quant.F32, 1)
				defer pool.Free()
				table := pool.Contiguous()
				var out []float32
				for _, r := range [][2]int{{0, 40}, {40, 41}, {41, 42}, {42, 43}} {
					b := &Batch{}
					for i := r[0]; i < r[1]; i++ {
						b.Tokens, b.Pos, b.Table = append(b.Tokens, ids[i]), append(b.Pos, i), append(b.Table, table)
						b.Logits = append(b.Logits, i-r[0])
					}
					logits, err := m.Forward(b, pool)
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, logits...)
				}
				return out
			}()
			// batched: pieces of 16, 16, 8, then decodes, each step beside
			// another sequence in slot 0 (ours is slot 2).
			pool := NewStatePool(m.Config, 8, bs, quant.F32, 3)
			defer pool.Free()
			ours, theirs := []int32{4, 5, 6, 7}, []int32{0, 1, 2, 3}
			var got []float32
			for s, r := range [][2]int{{0, 16}, {16, 32}, {32, 40}, {40, 41}, {41, 42}, {42, 43}} {
				b := &Batch{}
				for i := 0; i < 5; i++ {
					p := 5*s + i
					b.Tokens, b.Pos, b.Table, b.Slot = append(b.Tokens, 3+(7*p)%250), append(b.Pos, p), append(b.Table, theirs), append(b.Slot, 0)
				}
				for i := r[0]; i < r[1]; i++ {
					b.Tokens, b.Pos, b.Table, b.Slot = append(b.Tokens, ids[i]), append(b.Pos, i), append(b.Table, ours), append(b.Slot, 2)
					b.Logits = append(b.Logits, 5+i-r[0])
				}
				logits, err := m.Forward(b, pool)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, logits...)
			}
			for i := range alone {
				if got[i] != alone[i] {
					t.Fatalf("logit %d (token %d): %v in pieces beside another, %v alone", i, i/m.Vocab, got[i], alone[i])
				}
			}
		})
	}
}

// TestCopyState: a state copied to another slot resumes there as it would
// have in its own.
func TestCopyState(t *testing.T) {
	m := synthModel(t, tinyHybrid("qwen35", quant.F32), cpu.New(2))
	pool := NewStatePool(m.Config, 4, 16, quant.F32, 2)
	defer pool.Free()
	table := pool.Contiguous()
	step := func(pos, slot int) []float32 {
		b := &Batch{Tokens: []int{hybridPrompt[pos]}, Pos: []int{pos}, Table: [][]int32{table}, Slot: []int{slot}, Logits: []int{0}}
		logits, err := m.Forward(b, pool)
		if err != nil {
			t.Fatal(err)
		}
		return append([]float32(nil), logits...)
	}
	for p := 0; p < 10; p++ {
		step(p, 0)
	}
	if err := pool.CopyState(1, 0); err != nil {
		t.Fatal(err)
	}
	a, b := step(10, 0), step(10, 1)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("logit %d: %v from the copy, %v from the original", i, b[i], a[i])
		}
	}
	if err := pool.CopyState(2, 0); err == nil {
		t.Error("a copy to slot 2 of 2 did not fail")
	}
}

// TestHybridBatchErrors: a batch that breaks the StateStore contract is an
// error naming it, before anything runs.
func TestHybridBatchErrors(t *testing.T) {
	m := synthModel(t, tinyHybrid("qwen35", quant.F32), ref.Kernels{})
	pool := NewStatePool(m.Config, 4, 16, quant.F32, 2)
	table := pool.Contiguous()
	for _, c := range []struct {
		name string
		b    Batch
		want string
	}{
		{"slot out of range", Batch{Tokens: []int{1}, Pos: []int{0}, Table: [][]int32{table}, Slot: []int{2}}, "batch: token 0 in state slot 2 of 2"},
		{"gap", Batch{Tokens: []int{1, 2}, Pos: []int{0, 2}, Table: [][]int32{table, table}, Slot: []int{0, 0}}, "batch: token 1 of state slot 0 at position 2 after 0"},
		{"two runs", Batch{Tokens: []int{1, 2, 3}, Pos: []int{0, 0, 1}, Table: [][]int32{table, table, table}, Slot: []int{0, 1, 0}}, "batch: state slot 0 holds two runs of tokens"},
		{"short", Batch{Tokens: []int{1, 2}, Pos: []int{0, 1}, Table: [][]int32{table, table}, Slot: []int{0}}, "batch: 2 tokens, 1 state slots"},
	} {
		if _, err := m.Forward(&c.b, pool); err == nil || err.Error() != c.want {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	type plain struct{ KVStore }
	if _, err := m.Forward(&Batch{Tokens: []int{1}, Pos: []int{0}, Table: [][]int32{table}}, plain{pool}); err == nil {
		t.Error("a store without states did not fail")
	}
}

// TestLayerStates: what each layer keeps, and the bytes a sequence's state
// and a token's keys and values take.
func TestLayerStates(t *testing.T) {
	g := synthModel(t, tinyHybrid("gemma3", quant.F32), ref.Kernels{})
	for i, s := range g.States {
		want := LayerState{Kind: SlidingWindow, Window: 5}
		if i == 5 {
			want = LayerState{Kind: FullAttention}
		}
		if s != want {
			t.Errorf("gemma3 layer %d: %+v, want %+v", i, s, want)
		}
	}
	q := synthModel(t, tinyHybrid("qwen35", quant.F32), ref.Kernels{})
	// conv: 3 inputs of (2·2+4)·32; state: 4 heads of 32×32.
	per := 3*8*32 + 4*32*32
	for i, s := range q.States {
		want := LayerState{Kind: Recurrent, StateFloats: per}
		if i == 3 {
			want = LayerState{Kind: FullAttention}
		}
		if s != want {
			t.Errorf("qwen35 layer %d: %+v, want %+v", i, s, want)
		}
	}
	if got := q.StateBytes(); got != 3*4*per {
		t.Errorf("state bytes %d, want %d", got, 3*4*per)
	}
	if got := q.KVBytesPerToken(quant.F32); got != 2*1*4*q.KVDim() {
		t.Errorf("KV bytes per token %d, want one layer's", got)
	}
}

// TestHybridDecodeAllocs: once its buffers have grown, a decode step of a
// hybrid model allocates nothing on the CPU device.
func TestHybridDecodeAllocs(t *testing.T) {
	for _, arch := range hybridArchs {
		m := synthModel(t, tinyHybrid(arch, quant.Q8_0), cpu.New(2))
		pool := NewStatePool(m.Config, 4, 16, quant.F32, 2)
		table := pool.Contiguous()
		for i := 0; i < 40; i++ {
			if _, err := m.Forward(&Batch{Tokens: []int{3 + i}, Pos: []int{i}, Table: [][]int32{table}, Slot: []int{1}, Logits: []int{0}}, pool); err != nil {
				t.Fatal(err)
			}
		}
		pos := 40
		b := &Batch{Tokens: []int{7}, Pos: []int{0}, Table: [][]int32{table}, Slot: []int{1}, Logits: []int{0}}
		if n := testing.AllocsPerRun(10, func() {
			b.Pos[0] = pos
			pos++
			m.Forward(b, pool)
		}); n != 0 {
			t.Errorf("%s: %v allocations per decode step", arch, n)
		}
	}
}

// TestHybridHostileMetadata: ssm.* keys that do not fit the file, or each
// other, are an error naming the key, before anything is allocated from
// them; a file without gemma3's window likewise.
func TestHybridHostileMetadata(t *testing.T) {
	w, _ := Synth(tinyHybrid("qwen35", quant.F32))
	data, _ := w.Bytes()
	for _, c := range []struct {
		key  string
		v    any
		want string
	}{
		{"qwen35.ssm.state_size", uint32(1 << 30), "hostile.gguf: qwen35.ssm.inner_size 128 is not time_step_rank 4 × state_size 1073741824"},
		{"qwen35.ssm.time_step_rank", uint32(1 << 30), "hostile.gguf: qwen35.ssm.inner_size 128 is not time_step_rank 1073741824 × state_size 32"},
		{"qwen35.ssm.group_count", uint32(0), "hostile.gguf: qwen35.ssm: 0 key heads, 4 value heads of 32"},
		{"qwen35.ssm.group_count", uint32(3), "hostile.gguf: qwen35.ssm: 3 key heads, 4 value heads of 32"},
		{"qwen35.ssm.conv_kernel", uint32(1 << 20), "hostile.gguf: qwen35.ssm.conv_kernel 1048576 (want 2 to 64)"},
		{"qwen35.full_attention_interval", uint32(0), "hostile.gguf: qwen35.full_attention_interval 0"},
	} {
		if _, err := load(rewrite(t, data, c.key, c.v, "", nil)); err == nil || err.Error() != c.want {
			t.Errorf("%s = %v: error %v, want %q", c.key, c.v, err, c.want)
		}
	}
	// state_size 128, inner 4·128: fits the checks of each key, not the
	// file's tensors.
	big := rewrite(t, rewrite(t, data, "qwen35.ssm.state_size", uint32(128), "", nil), "qwen35.ssm.inner_size", uint32(512), "", nil)
	if _, err := load(big); err == nil || !strings.Contains(err.Error(), "has dims") && !strings.Contains(err.Error(), "largest tensor") {
		t.Errorf("state_size 128: error %v", err)
	}
	wide := rewrite(t, rewrite(t, data, "qwen35.ssm.state_size", uint32(1<<20), "", nil), "qwen35.ssm.inner_size", uint32(4<<20), "", nil)
	if _, err := load(wide); err == nil || err.Error() != "hostile.gguf: qwen35.ssm.state_size 1048576 exceeds embedding_length 128" {
		t.Errorf("state_size 2^20: error %v", err)
	}
	g, _ := Synth(tinyHybrid("gemma3", quant.F32))
	gd, _ := g.Bytes()
	f, _ := gguf.Parse("x.gguf", gd)
	var ww gguf.Writer
	for _, kv := range f.KVs {
		if kv.Key != "gemma3.attention.sliding_window" {
			ww.AddKV(kv.Key, kv.Value)
		}
	}
	for _, ti := range f.Tensors {
		ww.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data)
	}
	nw, _ := ww.Bytes()
	if _, err := load(nw); err == nil || err.Error() != "hostile.gguf: missing metadata gemma3.attention.sliding_window" {
		t.Errorf("gemma3 without its window: error %v", err)
	}
}

// BenchmarkHybridForward: prefill 512 and decode of a mid-sized qwen35 and
// gemma3 (8 layers of dim 1024, heads of 128; `jspark model synth --arch
// A --layers 8 --dim 1024 --heads 8 --kv-heads 2 --ff 2816 --type q8_0
// --ctx 4096` writes the same file for a peer's llama-bench).
func BenchmarkHybridForward(b *testing.B) {
	for _, arch := range []string{"qwen35", "gemma3"} {
		o := SynthOptions{Arch: arch, Layers: 8, Dim: 1024, Heads: 8, KVHeads: 2, FF: 2816, Type: quant.Q8_0, Seed: 1, Context: 4096}
		DefaultMoE(&o)
		m := synthModel(b, o, cpu.New(0))
		b.Run(arch+"/prefill512", func(b *testing.B) {
			ids := make([]int, 512)
			for i := range ids {
				ids[i] = 3 + i%256
			}
			for b.Loop() {
				pool := NewPool(m.Config, 32, 16)
				batch := &Batch{Tokens: ids, Logits: []int{511}}
				for i := range ids {
					batch.Pos, batch.Table = append(batch.Pos, i), append(batch.Table, pool.Contiguous())
				}
				if _, err := m.Forward(batch, pool); err != nil {
					b.Fatal(err)
				}
				pool.Free()
			}
			b.ReportMetric(float64(512*b.N)/b.Elapsed().Seconds(), "tok/s")
		})
		b.Run(arch+"/decode", func(b *testing.B) {
			n := 0
			for b.Loop() {
				g, _ := m.Generate([]int{1, 2, 3}, 32, sample.New(sample.Params{}), nil)
				n += len(g.IDs)
			}
			b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}
