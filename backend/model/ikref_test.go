package model

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"jspark/backend/gguf"
	"jspark/kernels/cpu"
	"jspark/kernels/quant"
)

// ikRef is one prompt's record of scripts/record-moe-refs.py or
// record-hybrid-refs.py: ik_llama.cpp's greedy continuation of prompt_ids
// on the model `jspark model synth <synth>` writes, and at each generated
// position its five likeliest tokens with their log-probabilities.
type ikRef struct {
	Model     string        `json:"model"`
	Synth     []string      `json:"synth"`
	SHA256    string        `json:"sha256"`
	Prompt    string        `json:"prompt"`
	PromptIDs []int         `json:"prompt_ids"`
	GenIDs    []int         `json:"gen_ids"`
	Banned    []int         `json:"banned"` // ids ik's request biased to -inf
	Top5      [][][]float64 `json:"top5"`   // (position, rank, [id, logprob])
}

// archFlags are the synth flags whose defaults depend on --arch
// (DefaultMoE): one not given takes its architecture's.
var archFlags = []string{"experts", "experts-used", "expert-ff", "shared-experts", "dense-layers", "sliding-window", "full-attention-interval"}

// synthFlags reads the synth command's flags as the CLI does (the ones
// the scripts use).
func synthFlags(args []string) (SynthOptions, error) {
	var o SynthOptions
	var typ string
	var bytesVocab bool
	fs := flag.NewFlagSet("synth", flag.ContinueOnError)
	fs.StringVar(&o.Arch, "arch", "llama", "")
	fs.IntVar(&o.Layers, "layers", 2, "")
	fs.IntVar(&o.Dim, "dim", 256, "")
	fs.IntVar(&o.Heads, "heads", 4, "")
	fs.IntVar(&o.KVHeads, "kv-heads", 0, "")
	fs.IntVar(&o.FF, "ff", 512, "")
	fs.IntVar(&o.Context, "ctx", 4096, "")
	fs.StringVar(&typ, "type", "f32", "")
	fs.Uint64Var(&o.Seed, "seed", 1, "")
	fs.BoolVar(&bytesVocab, "vocab-bytes", false, "")
	fs.BoolVar(&o.TextVocab, "vocab-text", false, "")
	given := map[string]*int{}
	for _, name := range archFlags {
		given[name] = fs.Int(name, 0, "")
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	t, err := quant.ParseType(typ)
	if err != nil {
		return o, err
	}
	o.Type = t
	DefaultMoE(&o)
	dst := map[string]*int{"experts": &o.Experts, "experts-used": &o.ExpertsUsed, "expert-ff": &o.ExpertFF,
		"shared-experts": &o.SharedExperts, "dense-layers": &o.DenseLayers, "sliding-window": &o.SlidingWindow,
		"full-attention-interval": &o.FullAttnInterval}
	fs.Visit(func(f *flag.Flag) {
		if d := dst[f.Name]; d != nil {
			*d = *given[f.Name]
		}
	})
	return o, nil
}

// ikRefFiles are the reference files testdata/refs/<prefix>-*.jsonl,
// keyed by the name after the prefix.
func ikRefFiles(t *testing.T, prefix, script string) map[string]string {
	files, _ := filepath.Glob("../../testdata/refs/" + prefix + "-*.jsonl")
	if len(files) == 0 {
		t.Fatalf("no testdata/refs/%s-*.jsonl (%s makes them)", prefix, script)
	}
	out := map[string]string{}
	for _, path := range files {
		out[strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), prefix+"-"), ".jsonl")] = path
	}
	return out
}

// loadIkRefs reads a reference file and loads, on the CPU device, the
// model its records were made on, failing where synth no longer writes
// the bytes ik ran (script records them again).
func loadIkRefs(t *testing.T, path, script string) ([]ikRef, SynthOptions, *Model) {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var refs []ikRef
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r ikRef
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		refs = append(refs, r)
	}
	if len(refs) == 0 {
		t.Fatalf("%s: no records", path)
	}
	o, err := synthFlags(refs[0].Synth)
	if err != nil {
		t.Fatal(err)
	}
	w, err := Synth(o)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := w.Bytes()
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != refs[0].SHA256 {
		t.Fatalf("jspark model synth %s no longer writes the file ik was run on: run %s", strings.Join(refs[0].Synth, " "), script)
	}
	g, err := gguf.Parse(strings.TrimSuffix(filepath.Base(path), ".jsonl")+".gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(g, cpu.New(2))
	if err != nil {
		t.Fatal(err)
	}
	return refs, o, m
}

// teacherForced runs prompt + gen through the model as one prefill (keys
// and values in F16, as ik keeps them) and returns the logits at each
// position that predicts gen[i].
func teacherForced(t *testing.T, m *Model, prompt, gen []int) [][]float32 {
	seq := append(append([]int(nil), prompt...), gen...)
	pool := NewTypedPool(m.Config, (len(seq)+15)/16, 16, quant.F16)
	defer pool.Free()
	b := &Batch{Tokens: seq}
	for i := range seq {
		b.Pos, b.Table = append(b.Pos, i), append(b.Table, pool.Contiguous())
	}
	for i := range gen {
		b.Logits = append(b.Logits, len(prompt)-1+i)
	}
	logits, err := m.Forward(b, pool)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for i := range gen {
		out = append(out, logits[i*m.Vocab:(i+1)*m.Vocab])
	}
	return out
}

// ikLogProbs are the log-probabilities of logits as ik's server reports
// them (scripts/record-moe-refs.py): the banned ids at -inf, normalised by
// the sum of every probability plus, a second time, those beyond the top
// n. It returns them with the argmax of the ids not banned.
func ikLogProbs(logits []float32, banned map[int]bool, n int) ([]float64, int) {
	mx, arg := math.Inf(-1), -1
	for id, v := range logits {
		if !banned[id] && float64(v) > mx {
			mx, arg = float64(v), id
		}
	}
	var ps []float64
	var sum float64
	for id, v := range logits {
		if !banned[id] {
			p := math.Exp(float64(v) - mx)
			ps = append(ps, p)
			sum += p
		}
	}
	sort.Sort(sort.Reverse(sort.Float64Slice(ps)))
	tail := 0.0
	for _, p := range ps[min(n, len(ps)):] {
		tail += p
	}
	out := make([]float64, len(logits))
	for id, v := range logits {
		out[id] = math.Inf(-1)
		if !banned[id] {
			out[id] = float64(v) - mx - math.Log(sum+tail)
		}
	}
	return out, arg
}

// TestMoEMatchesIkLlama holds each mixture-of-experts family to
// ik_llama.cpp (testdata/refs/moe-*.jsonl, four prompts × 32 tokens),
// teacher-forced along ik's greedy continuation (keys and values in F16,
// as ik keeps them):
//
//   - F32 files (2 experts of 8 routed): our argmax is ik's at every
//     position, except a near-tie (ik's top-2 gap under 1e-3 nats), named
//     in the log;
//   - quantized files (Q4_K and Q8_0, every expert used): our
//     log-probabilities of ik's top 5 within 0.1 nats of ik's, but for at
//     most 1% of them, which stay within 0.15 nats; and our argmax ik's
//     wherever ik's top-2 gap exceeds 0.1 nats. ik multiplies by
//     activations quantized to 8 bits per 256 (Q8_K), our CPU device per
//     32, so the two round differently: measured over the 640 values of
//     each file, mean 0.015-0.022 nats, largest 0.062-0.121 (3 of 2,560
//     over 0.1); the ref device, whose activations are exact, differs from
//     ik as much (largest 0.054-0.105, 1 over 0.1).
//
// NOTE: quantized files with a choice of experts cannot be held to 0.1
// nats: 8-bit activations move router logits by ~0.01 (our CPU against
// exact arithmetic: median 0.009-0.014), enough to cross a near-tie of the
// router, and a flipped expert moves these random models' log-
// probabilities by up to 1.6 nats. Measured with 2 of 8 experts routed,
// Q4_K: 20 (qwen3moe), 7 (glm4moe) and 63 (gpt-oss) of 128 positions
// exceed 0.1 nats, 21, 4 and 55 even on the ref device, whose activations
// are exact; with every expert used, none, mean 0.03-0.05 nats, as a
// dense qwen3 of the same shape (0.033).
func TestMoEMatchesIkLlama(t *testing.T) {
	for name, path := range ikRefFiles(t, "moe", "scripts/record-moe-refs.py") {
		t.Run(name, func(t *testing.T) {
			refs, o, m := loadIkRefs(t, path, "scripts/record-moe-refs.py")
			quantized := o.Type != quant.F32
			var worst float64
			var values, over int
			for _, r := range refs {
				banned := map[int]bool{}
				for _, id := range r.Banned {
					banned[id] = true
				}
				for i, logits := range teacherForced(t, m, r.PromptIDs, r.GenIDs) {
					top := r.Top5[i]
					gap := top[0][1] - top[1][1]
					lp, ours := ikLogProbs(logits, banned, len(top))
					where := fmt.Sprintf("%q position %d", r.Prompt, i)
					if ours != int(top[0][0]) {
						switch {
						case !quantized && gap < 1e-3:
							t.Logf("%s: near-tie (ik's top-2 gap %.2g nats): ours %d, ik %d", where, gap, ours, int(top[0][0]))
						case quantized && gap <= 0.1:
						default:
							t.Errorf("%s: argmax %d, ik's %d (its top-2 gap %.3g nats)", where, ours, int(top[0][0]), gap)
						}
					}
					for _, p := range top {
						d := math.Abs(lp[int(p[0])] - p[1])
						worst = max(worst, d)
						values++
						if d > 0.1 {
							over++
							t.Logf("%s: logprob of %d is %.4f, ik's %.4f", where, int(p[0]), lp[int(p[0])], p[1])
						}
						if quantized && d > 0.15 {
							t.Errorf("%s: logprob of %d is %.4f, ik's %.4f", where, int(p[0]), lp[int(p[0])], p[1])
						}
					}
				}
			}
			t.Logf("largest log-probability difference from ik over ik's top 5: %.2g nats, %d of %d over 0.1", worst, over, values)
			if quantized && over*100 > values {
				t.Errorf("%d of %d log-probabilities more than 0.1 nats from ik's", over, values)
			}
		})
	}
}
