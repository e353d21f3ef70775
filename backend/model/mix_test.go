package model

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"jspark/backend/gguf"
	"jspark/kernels/quant"
)

// -quantize records testdata/mixes.tsv: the type ik_llama.cpp's
// llama-quantize gives each tensor of the mixModels, for every mix
// (`go test ./backend/model -run TestMixMatchesLlamaQuantize -quantize
// /path/to/llama-quantize`). The test itself needs no peer.
var quantizeBin = flag.String("quantize", "", "record testdata/mixes.tsv with this llama-quantize")

const mixesFile = "testdata/mixes.tsv"

// mixModels are shaped to reach every rule: 16 layers for the layer
// rules, grouped-query attention (4, 2 and 1 query heads a KV head), rows
// not a whole number of super-blocks (ff 352, dim 384), and experts
// (routed, shared, leading dense layers).
var mixModels = map[string]SynthOptions{
	"llama16-gqa4-ff352":  {Arch: "llama", Layers: 16, Dim: 256, Heads: 8, KVHeads: 2, FF: 352, Type: quant.F32, Seed: 3},
	"qwen2-8-dim384-gqa2": {Arch: "qwen2", Layers: 8, Dim: 384, Heads: 6, KVHeads: 3, FF: 512, Type: quant.F32, Seed: 4},
	"qwen3-8-gqa1":        {Arch: "qwen3", Layers: 8, Dim: 256, Heads: 4, KVHeads: 4, FF: 768, Type: quant.F32, Seed: 5},
	// experts: the n_expert rules, expert tensors by layer, rows of 352
	"qwen3moe-8-e8": {Arch: "qwen3moe", Layers: 8, Dim: 256, Heads: 8, KVHeads: 2, FF: 512, Type: quant.F32, Seed: 6,
		Experts: 8, ExpertsUsed: 2, ExpertFF: 352},
	"glm4moe-8-e8-shared": {Arch: "glm4moe", Layers: 8, Dim: 256, Heads: 8, KVHeads: 2, FF: 512, Type: quant.F32, Seed: 7,
		Experts: 8, ExpertsUsed: 2, ExpertFF: 256, SharedExperts: 1, DenseLayers: 1},
}

// ikOnly are ik_llama.cpp's picks that jspark replaces by mainline
// llama.cpp's (mix.go says why): ik's type → ours.
var ikOnly = map[string]string{"IQ5_K": "Q5_K", "Q6_0": "Q5_1"}

var mixNames = []string{"q3_k_m", "q4_k_m", "q5_k_m", "iq4_xs"}

// quantLine is a tensor's line of llama-quantize's log: name, first two
// dimensions and type; convertLine the type it converts to.
var (
	quantLine   = regexp.MustCompile(`^\[\s*\d+/\s*\d+\]\s+(\S+) - \[\s*(\d+),\s*(\d+),.*type =\s*(\w+)`)
	convertLine = regexp.MustCompile(`converting to (\w+)`)
)

// TestMixMatchesLlamaQuantize: for every mix and tensor of the mixModels,
// Mix.TypeOf gives the type llama-quantize gave (up to ikOnly).
func TestMixMatchesLlamaQuantize(t *testing.T) {
	if *quantizeBin != "" {
		recordMixes(t, *quantizeBin)
	}
	f, err := os.Open(mixesFile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	shapes := map[string]map[string]int{} // model → tensor → row length
	for name, o := range mixModels {
		shapes[name] = tensorCols(t, o)
	}
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		var model, mixName, tensor, want string
		if _, err := fmt.Sscan(line, &model, &mixName, &tensor, &want); err != nil {
			t.Fatalf("%s: %q: %v", mixesFile, line, err)
		}
		o, ok := mixModels[model]
		if !ok {
			t.Fatalf("%s: unknown model %q", mixesFile, model)
		}
		if w, ok := ikOnly[want]; ok {
			want = w
		}
		o.Mix, _ = ParseMix(mixName)
		if got := o.weightType(tensor, shapes[model][tensor]).String(); got != want {
			t.Errorf("%s %s %s: %s, llama-quantize gave %s", model, mixName, tensor, got, want)
		}
		n++
	}
	if n < 100 {
		t.Fatalf("%s: only %d rows", mixesFile, n)
	}
}

// tensorCols synthesizes o (F32) and returns each matrix's row length.
func tensorCols(t *testing.T, o SynthOptions) map[string]int {
	w, err := Synth(o)
	if err != nil {
		t.Fatal(err)
	}
	data, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse("mix.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	cols := map[string]int{}
	for _, ti := range f.Tensors {
		if len(ti.Dims) >= 2 {
			cols[ti.Name] = int(ti.Dims[0])
		}
	}
	return cols
}

// recordMixes quantizes each mix model with llama-quantize and writes the
// types it chose for the matrices.
func recordMixes(t *testing.T, bin string) {
	dir := t.TempDir()
	var lines []string
	for name, o := range mixModels {
		w, err := Synth(o)
		if err != nil {
			t.Fatal(err)
		}
		src := filepath.Join(dir, name+".f32.gguf")
		if err := w.WriteFile(src); err != nil {
			t.Fatal(err)
		}
		for _, mix := range mixNames {
			dst := filepath.Join(dir, name+"."+mix+".gguf")
			out, err := exec.Command(bin, src, dst, strings.ToUpper(mix)).CombinedOutput()
			if err != nil {
				t.Fatalf("%s %s: %v\n%s", bin, mix, err, out)
			}
			// Read the types from llama-quantize's log (the file may hold
			// ik-only types gguf refuses): "[ 5/ 21] blk.0.attn_q.weight -
			// [ 256, 256, 1, 1], type = f32, converting to q4_K .. size …",
			// the conversion perhaps lines later, after a fallback's warning;
			// "size =" with no conversion keeps the type.
			n, pending := 0, ""
			emit := func(tensor, typ string) {
				lines = append(lines, fmt.Sprintf("%s\t%s\t%s\t%s", name, mix, tensor, strings.ToUpper(typ)))
				n++
			}
			for _, line := range strings.Split(string(out), "\n") {
				conv := convertLine.FindStringSubmatch(line)
				if m := quantLine.FindStringSubmatch(line); m != nil {
					pending = ""
					switch {
					case m[3] == "1": // one-dimensional: never quantized
					case conv != nil:
						emit(m[1], conv[1])
					case strings.Contains(line, "size ="):
						emit(m[1], m[4])
					default:
						pending = m[1]
					}
				} else if pending != "" && conv != nil {
					emit(pending, conv[1])
					pending = ""
				}
			}
			if n == 0 {
				t.Fatalf("%s %s: no tensor lines in its log:\n%s", bin, mix, out)
			}
		}
	}
	sort.Strings(lines)
	head := "# model\tmix\ttensor\ttype llama-quantize chose (ik_llama.cpp; recorded by -quantize)\n"
	if err := os.MkdirAll(filepath.Dir(mixesFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mixesFile, []byte(head+strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestParseMix(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"q4_k_m", "q4_k_m"}, {"Q5_K_M", "q5_k_m"}, {"iq4_xs", "iq4_xs"}, {"q8_0", "q8_0"}, {"IQ4_NL", "iq4_nl"}, {"mxfp4", "mxfp4"},
	} {
		m, err := ParseMix(c.in)
		if err != nil || m.String() != c.want {
			t.Errorf("ParseMix(%q) = %v, %v", c.in, m, err)
		}
	}
	if _, err := ParseMix("q4_k_x"); err == nil || !strings.Contains(err.Error(), "q4_k_m") {
		t.Errorf("ParseMix(q4_k_x): %v", err)
	}
}

// TestMixMXFP4: on a MoE, experts MXFP4 and the rest Q8_0 (routers F32),
// as gpt-oss's released files; on a dense model MXFP4 throughout.
func TestMixMXFP4(t *testing.T) {
	m, _ := ParseMix("mxfp4")
	moe := MixModel{Layers: 4, Experts: 32, GQA: 8}
	for name, want := range map[string]quant.Type{
		"blk.0.ffn_gate_exps.weight": quant.MXFP4, "blk.3.ffn_down_exps.weight": quant.MXFP4,
		"blk.0.attn_q.weight": quant.Q8_0, "output.weight": quant.Q8_0, "token_embd.weight": quant.Q8_0,
		"blk.1.ffn_gate_inp.weight": quant.F32,
	} {
		if got := m.TypeOf(name, 2880, moe); got != want {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	if got := m.TypeOf("blk.0.attn_q.weight", 2880, MixModel{Layers: 4}); got != quant.MXFP4 {
		t.Errorf("dense attn_q: %v", got)
	}
}
