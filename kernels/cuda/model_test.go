//go:build cuda || cudaemu

package cuda

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"jspark/backend/embedded"
	"jspark/backend/gguf"
	"jspark/backend/model"
	"jspark/backend/refs"
	"jspark/backend/sample"
	"jspark/kernels"
	"jspark/kernels/cpu"
	"jspark/kernels/quant"
	"jspark/kernels/ref"
)

// refCases are llama.cpp's greedy continuations of the embedded model.
func refCases(t *testing.T) []refs.Case {
	cases, err := refs.Load("../../" + refs.Stories260K)
	if err != nil {
		t.Fatal(err)
	}
	return cases
}

func stories(t *testing.T, k kernels.Kernels) *model.Model {
	t.Helper()
	f, err := embedded.Open()
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(f, k)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// synthAgrees holds a synthetic model to the other devices on the GPU:
// the logits of every token of ids within 1e-4 (relative L2) of the
// reference device's, and gen greedy ids the CPU's.
func synthAgrees(t *testing.T, d kernels.Kernels, o model.SynthOptions, ids []int, gen int) {
	t.Helper()
	w, err := model.Synth(o)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := w.Bytes()
	load := func(k kernels.Kernels) *model.Model {
		f, err := gguf.Parse(o.Arch+".gguf", data)
		if err != nil {
			t.Fatal(err)
		}
		m, err := model.Load(f, k)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	gm, rm, cm := load(d), load(ref.Kernels{}), load(cpu.New(2))
	logits := func(m *model.Model) []float32 {
		pool := model.NewPool(m.Config, (len(ids)+15)/16, 16)
		defer pool.Free()
		b := &model.Batch{Tokens: ids}
		for i := range ids {
			b.Pos, b.Table, b.Logits = append(b.Pos, i), append(b.Table, pool.Contiguous()), append(b.Logits, i)
		}
		out, err := m.Forward(b, pool)
		if err != nil {
			t.Fatal(err)
		}
		return slices.Clone(out)
	}
	if e := relL2(logits(gm), logits(rm)); e > 1e-4 {
		t.Fatalf("logits: relative L2 error %g from ref", e)
	}
	g, err := gm.Generate(ids, gen, sample.New(sample.Params{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := cm.Generate(ids, gen, sample.New(sample.Params{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(g.IDs, c.IDs) {
		t.Fatalf("greedy ids: %v on the GPU, %v on the CPU", g.IDs, c.IDs)
	}
}

// TestStoriesGreedyMatchesReferences: the embedded stories260K on the GPU
// generates llama.cpp's greedy ids (testdata/refs), and with an F16 KV
// cache the CPU backend's ids.
func TestStoriesGreedyMatchesReferences(t *testing.T) {
	d := device(t)
	gm, cm := stories(t, d), stories(t, cpu.New(0))
	for _, c := range refCases(t) {
		t.Run(c.Prompt, func(t *testing.T) {
			ids := gm.Tok.Encode(c.Prompt, c.AddBOS, true)
			gm.KVType = quant.F32
			g, err := gm.Generate(ids, len(c.GenIDs), sample.New(sample.Params{}), nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.GenIDs, g.IDs); diff != "" {
				t.Fatalf("greedy ids on the GPU (-llama.cpp +cuda):\n%s", diff)
			}
			gm.KVType, cm.KVType = quant.F16, quant.F16
			g16, err := gm.Generate(ids, len(c.GenIDs), sample.New(sample.Params{}), nil)
			if err != nil {
				t.Fatal(err)
			}
			c16, err := cm.Generate(ids, len(c.GenIDs), sample.New(sample.Params{}), nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c16.IDs, g16.IDs); diff != "" {
				t.Fatalf("greedy ids with an F16 cache (-cpu +cuda):\n%s", diff)
			}
		})
	}
}

// TestForwardBatchInvariant: the reference prompts forwarded together, in
// one batch, give each sequence's last logits the bits they have when the
// sequence runs alone, and a prompt prefilled in two chunks (as after a
// prefix-cache hit) the bits of one chunk.
func TestForwardBatchInvariant(t *testing.T) {
	d := device(t)
	m := stories(t, d)
	cases := refCases(t)
	const bs, blocks = 16, 4 // blocks a sequence
	pool := model.NewPool(m.Config, blocks*len(cases), bs)
	defer pool.Free()
	tables := make([][]int32, len(cases))
	prompts := make([][]int, len(cases))
	all := &model.Batch{}
	for s, c := range cases {
		for b := range blocks {
			tables[s] = append(tables[s], int32(s*blocks+b))
		}
		prompts[s] = m.Tok.Encode(c.Prompt, c.AddBOS, true)
		for p, id := range prompts[s] {
			all.Tokens, all.Pos, all.Table = append(all.Tokens, id), append(all.Pos, p), append(all.Table, tables[s])
		}
		all.Logits = append(all.Logits, len(all.Tokens)-1)
	}
	logits, err := m.Forward(all, pool)
	if err != nil {
		t.Fatal(err)
	}
	batch := append([]float32(nil), logits...)
	forward := func(s, from, to int) []float32 {
		b := &model.Batch{Logits: []int{to - from - 1}}
		for p := from; p < to; p++ {
			b.Tokens, b.Pos, b.Table = append(b.Tokens, prompts[s][p]), append(b.Pos, p), append(b.Table, tables[s])
		}
		out, err := m.Forward(b, pool)
		if err != nil {
			t.Fatal(err)
		}
		return append([]float32(nil), out...)
	}
	v := m.Vocab
	for s := range cases {
		n := len(prompts[s])
		alone := forward(s, 0, n)
		sameBits(t, fmt.Sprintf("sequence %d alone", s), alone, batch[s*v:(s+1)*v])
		if n >= 2 {
			forward(s, 0, n/2)
			sameBits(t, fmt.Sprintf("sequence %d in two chunks", s), forward(s, n/2, n), alone)
		}
	}
}

// TestThroughput measures the models named in JSPARK_GPU_MODELS (paths,
// space-separated; scripts/gpu-check.sh synthesizes them): prefill of a
// 512-token prompt, 128 greedy decode tokens at batch 1 (other counts from
// JSPARK_THROUGHPUT_PROMPT and _STEPS), and decode's weight bandwidth
// against a device-to-device copy. Each model prints one JSON line starting
// "throughput:".
func TestThroughput(t *testing.T) {
	paths := strings.Fields(os.Getenv("JSPARK_GPU_MODELS"))
	if len(paths) == 0 {
		t.Skip("JSPARK_GPU_MODELS names no model (scripts/gpu-check.sh sets it)")
	}
	d := device(t)
	size := 2 << 30
	if testing.Short() {
		size = 64 << 20 // a dry run on the emulator
	}
	copyGBs := copyBandwidth(t, d, size, 10)
	fmt.Printf("throughput: {\"memcpy_gb_s\": %.1f}\n", copyGBs)
	for _, path := range paths {
		t.Run(path, func(t *testing.T) {
			start := time.Now()
			m, closeModel, err := model.Open(path, d)
			if err != nil {
				t.Fatal(err)
			}
			defer closeModel()
			load := time.Since(start)
			weights := matrixBytes(m)
			clear(m.Tok.EOG) // random weights may well pick an end token; decode all the steps
			prompt := make([]int, envInt("JSPARK_THROUGHPUT_PROMPT", 512))
			for i := range prompt {
				prompt[i] = 100 + i%(m.Vocab-100)
			}
			m.Generate(prompt[:8], 4, sample.New(sample.Params{}), nil) // warm up: step buffers, JIT caches
			g, err := m.Generate(prompt, 1, sample.New(sample.Params{}), nil)
			if err != nil {
				t.Fatal(err)
			}
			prefill := float64(len(prompt)) / g.Prefill.Seconds()
			steps := envInt("JSPARK_THROUGHPUT_STEPS", 128)
			gd, err := m.Generate(prompt[:1], steps, sample.New(sample.Params{}), nil)
			if err != nil {
				t.Fatal(err)
			}
			decode := float64(len(gd.IDs)-1) / gd.Decode.Seconds()
			bw := float64(weights) * decode / 1e9
			fmt.Printf("throughput: {\"model\": %q, \"weights_gb\": %.2f, \"load_s\": %.1f, \"prefill_tok_s\": %.0f, \"decode_tok_s\": %.1f, \"decode_weight_gb_s\": %.0f, \"of_memcpy\": %.2f}\n",
				path, float64(weights)/1e9, load.Seconds(), prefill, decode, bw, bw/copyGBs)
		})
	}
}

func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// matrixBytes is what one decode step reads of the weights: every layer's
// matrices and the output matrix (the embedding gives one row).
func matrixBytes(m *model.Model) int {
	n := 0
	for _, w := range m.Matrices() {
		n += len(w.Data)
	}
	return n
}

// copyBandwidth is a device-to-device copy's rate in GB/s, counting the
// bytes read and written.
func copyBandwidth(t *testing.T, d *Device, size, reps int) float64 {
	src, err := d.rt.alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	defer d.rt.free(src)
	dst, err := d.rt.alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	defer d.rt.free(dst)
	if err := errors.Join(d.rt.copy(dst, src, size), d.rt.sync()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for range reps {
		if err := d.rt.copy(dst, src, size); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.rt.sync(); err != nil {
		t.Fatal(err)
	}
	return 2 * float64(size) * float64(reps) / time.Since(start).Seconds() / 1e9
}
