package model

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"

	"jspark/backend/gguf"
	"jspark/kernels"
	"jspark/kernels/cpu"
	"jspark/kernels/quant"
)

// peerRecord is one line of testdata/refs/types-ik.jsonl
// (scripts/record-types.sh): ik_llama.cpp's greedy continuation of a
// prompt on a synthetic model in one type or mix, with its top-5
// log-probabilities at each generated position; peer says how ik ran it.
type peerRecord struct {
	Type      string        `json:"type"`
	Peer      string        `json:"peer"` // "quantized" as written, or "dequantized" to F32 by ik's llama-quantize
	PromptIDs []int         `json:"prompt_ids"`
	GenIDs    []int         `json:"gen_ids"`
	Top5      [][][]float64 `json:"top5"`   // [position][rank] = [id, logprob]
	Banned    [2]int        `json:"banned"` // ids [from, to) biased out before the probabilities
}

// peerModel is the model record-types.sh synthesizes for type t.
func peerModel(t *testing.T, typ string) SynthOptions {
	mix, err := ParseMix(typ)
	if err != nil {
		t.Fatal(err)
	}
	return SynthOptions{Arch: "llama", Layers: 4, Dim: 256, Heads: 8, KVHeads: 2, FF: 768, Seed: 11, Mix: mix}
}

// peerDiff is how far our log-probabilities lie from ik's, teacher-forced
// along ik's greedy ids.
type peerDiff struct {
	worst, sum     float64
	n              int
	positions      int
	clear, differs int // positions whose top two ik puts gapMin apart; of those, where our argmax is not ik's
}

func comparePeer(t *testing.T, m *Model, recs []peerRecord, gapMin float64) peerDiff {
	var d peerDiff
	for _, r := range recs {
		banned := map[int]bool{}
		for id := r.Banned[0]; id < r.Banned[1]; id++ {
			banned[id] = true
		}
		ids := append(append([]int(nil), r.PromptIDs...), r.GenIDs...)
		logits := allLogits(t, m, ids)
		for i, top := range r.Top5 {
			pos := len(r.PromptIDs) - 1 + i
			// ik's normalisation (ikref_test.go): ours in its terms
			lp, arg := ikLogProbs(logits[pos*m.Vocab:(pos+1)*m.Vocab], banned, 5)
			for _, p := range top {
				e := math.Abs(lp[int(p[0])] - p[1])
				d.worst, d.sum, d.n = math.Max(d.worst, e), d.sum+e, d.n+1
			}
			d.positions++
			if top[0][1]-top[1][1] >= gapMin {
				d.clear++
				if arg != int(top[0][0]) {
					d.differs++
				}
			}
		}
	}
	return d
}

// TestTypesAgainstPeer: every type and mix loads in ik_llama.cpp, and the
// weights decode alike: teacher-forced along ik's greedy ids on the model
// converted to F32 by ik's llama-quantize (or written in F32), our
// log-probabilities of ik's top-5 tokens lie within 0.02 nats of ik's (ik
// keeps K and V in F16) and our argmax is ik's wherever ik's top two are
// 1e-3 nats apart or more. Both sides see only the tokens the recording did
// not bias out.
//
// Run as written, each side multiplies the weights against activations
// quantized to 8 bits: ik in blocks of 32 (Q8_0, Q8_1) or 256 (Q8_K, for the
// K-quants and IQ4_XS), jspark in blocks of 32. That moves each side
// 0.05-0.1 nats from the float result on these small random models, and ik's
// IQ4_XS 0.47; the bounds below say how far apart the two may be.
func TestTypesAgainstPeer(t *testing.T) {
	f, err := os.Open("../../testdata/refs/types-ik.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs := map[string][]peerRecord{} // type/peer → records
	var order []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r peerRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		key := r.Type + "/" + r.Peer
		if recs[key] == nil {
			order = append(order, key)
		}
		recs[key] = append(recs[key], r)
	}
	if len(order) < 20 {
		t.Fatalf("%d type/peer pairs recorded", len(order))
	}
	k := cpu.New(2)
	for _, key := range order {
		t.Run(key, func(t *testing.T) {
			r := recs[key]
			o := peerModel(t, r[0].Type)
			var m *Model
			if r[0].Peer == "dequantized" {
				m = loadGGUF(t, dequantized(t, o), k) // as ik's F32 file: float products
			} else {
				m = synthModel(t, o, k)
			}
			// What the issue asks: F32 weights (written so, or as ik decodes
			// them) agree to ik's F16 KV cache, argmax up to near-ties; a
			// quantized mix run as ik runs it (8-bit activations on both
			// sides, in different blocks) to 0.1 nats, argmax where ik's
			// top two are 0.1 apart; a single type is reported, and held
			// to 0.6 (IQ4_XS's 0.48 is ik's arithmetic: its F32 run of the
			// same weights agrees with ours to 0.005).
			tol, gap := 0.02, 1e-3
			switch {
			case r[0].Peer != "quantized" || r[0].Type == "f32":
			case strings.HasSuffix(r[0].Type, "_m"):
				tol, gap = 0.1, 0.1
			default:
				tol, gap = 0.6, math.Inf(1)
			}
			d := comparePeer(t, m, r, gap)
			t.Logf("%d positions: log-probabilities of ik's top 5 differ by %.4f nats at most, %.4f on average; argmax differs at %d of %d positions with a top-2 gap ≥ %g",
				d.positions, d.worst, d.sum/float64(d.n), d.differs, d.clear, gap)
			if d.worst > tol || d.differs > 0 {
				t.Errorf("ik and we differ: %.4f nats at most (bound %g), %d argmax differences", d.worst, tol, d.differs)
			}
		})
	}
}

// dequantized is the GGUF image of o with every quantized tensor decoded to
// F32, as llama-quantize's F32 conversion writes it.
func dequantized(t *testing.T, o SynthOptions) []byte {
	w, err := Synth(o)
	if err != nil {
		t.Fatal(err)
	}
	data, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse("q.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	var out gguf.Writer
	for _, kv := range f.KVs {
		out.AddKV(kv.Key, kv.Value)
	}
	for _, ti := range f.Tensors {
		v := make([]float32, ti.Elems())
		quant.Dequantize(ti.Type, ti.Data, v)
		out.AddTensor(ti.Name, quant.F32, ti.Dims, quant.Quantize(quant.F32, v))
	}
	b, err := out.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func loadGGUF(t *testing.T, data []byte, k kernels.Kernels) *Model {
	f, err := gguf.Parse("f32.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Load(f, k)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
