package model

import (
	"bytes"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"jspark/kernels/quant"
)

// heapPeak is an io.Writer that counts what it is given and samples the
// heap in use at each write, when the writer has just made a tensor.
type heapPeak struct {
	n, peak uint64
	h       interface {
		Write([]byte) (int, error)
		Sum([]byte) []byte
	}
}

func (p *heapPeak) Write(b []byte) (int, error) {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p.peak = max(p.peak, ms.HeapInuse)
	p.n += uint64(len(b))
	return p.h.Write(b)
}

// TestSynthStreamsInBoundedMemory: writing a model of ~190 MB holds about
// one tensor (4 MB of floats and its encoding) at a time, not the file: the
// heap in use never grows by a quarter of the file's size.
func TestSynthStreamsInBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 190 MB")
	}
	o := SynthOptions{Arch: "llama", Layers: 8, Dim: 1024, Heads: 8, KVHeads: 4, FF: 1024, Type: quant.F32, Seed: 1}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	w, err := Synth(o) // counted too: it must not draw the tensors yet
	if err != nil {
		t.Fatal(err)
	}
	p := &heapPeak{h: sha256.New()}
	if err := w.Encode(p); err != nil {
		t.Fatal(err)
	}
	grew := p.peak - min(base, p.peak)
	t.Logf("file %d MB, heap in use grew by %d MB at most", p.n>>20, grew>>20)
	if p.n < 150<<20 {
		t.Fatalf("file of %d bytes: the test wants a large one", p.n)
	}
	if grew > p.n/4 {
		t.Fatalf("heap in use grew by %d bytes writing %d", grew, p.n)
	}
	// Written again, to a file: the same bytes (the stream replays).
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := f.WriteTo(h); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(h.Sum(nil), p.h.Sum(nil)) {
		t.Fatal("a second write gave other bytes")
	}
}

// TestSynthProducersOutOfOrder: a tensor drawn before the one the stream
// stands at, or after skipping some, and drawn in chunks of any size, gets
// the values (and encoding) it gets drawn in order and whole.
func TestSynthProducersOutOfOrder(t *testing.T) {
	o := tinyHybrid("qwen35", quant.Q8_0)
	inOrder, err := newSynth(o)
	if err != nil {
		t.Fatal(err)
	}
	n := len(inOrder.s.draws)
	want := make([][]byte, n)
	for i := range want {
		want[i] = inOrder.s.encode(i, quant.F32)
	}
	for _, chunk := range []int{1, 100, 4096} {
		shuffled, _ := newSynth(o)
		shuffled.s.chunk = chunk
		for _, i := range rand.New(rand.NewPCG(1, uint64(chunk))).Perm(n) {
			if got := shuffled.s.encode(i, quant.F32); !bytes.Equal(got, want[i]) {
				t.Fatalf("chunks of %d: tensor %d of %d drawn out of order: other values", chunk, i, n)
			}
		}
	}
}

// BenchmarkSynth writes one layer of the ~8B llama shape (dim 4096, GQA
// 32/8, ff 14336; 218M weights) in each type, and gpt-oss-20b's experts
// in MXFP4 (one layer, 32 experts of 2880; 796M weights).
func BenchmarkSynth(b *testing.B) {
	for _, c := range []struct {
		name string
		o    SynthOptions
	}{
		{"8b-layer/q4_k_m", SynthOptions{Arch: "llama", Layers: 1, Dim: 4096, Heads: 32, KVHeads: 8, FF: 14336}},
		{"8b-layer/q8_0", SynthOptions{Arch: "llama", Layers: 1, Dim: 4096, Heads: 32, KVHeads: 8, FF: 14336}},
		{"gptoss-20b-layer/mxfp4", SynthOptions{Arch: "gpt-oss", Layers: 1, Dim: 2880, Heads: 64, KVHeads: 8, HeadDim: 64, FF: 2880}},
	} {
		b.Run(c.name, func(b *testing.B) {
			o := c.o
			DefaultMoE(&o)
			if o.Arch == "gpt-oss" {
				o.Experts, o.ExpertsUsed, o.ExpertFF = 32, 4, 2880
			}
			mix, err := ParseMix(c.name[strings.IndexByte(c.name, '/')+1:])
			if err != nil {
				b.Fatal(err)
			}
			o.Mix = mix
			for b.Loop() {
				w, err := Synth(o)
				if err != nil {
					b.Fatal(err)
				}
				if err := w.Encode(io.Discard); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
