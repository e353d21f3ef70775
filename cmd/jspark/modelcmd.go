package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"jspark/backend/gguf"
	"jspark/backend/model"
	"jspark/backend/tokenizer"
	"jspark/kernels/ref"
)

func newModelCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{Use: "model", Short: "Inspect or synthesize GGUF models"}
	cmd.AddCommand(newModelInfoCmd(stdout), newModelSynthCmd(stdout))
	return cmd
}

// ModelInfo is what `jspark model info --format json` prints.
type ModelInfo struct {
	Path          string         `json:"path"`
	Arch          string         `json:"arch"`
	Name          string         `json:"name,omitempty"`
	NLayer        int            `json:"n_layer"`
	NEmbd         int            `json:"n_embd"`
	NHead         int            `json:"n_head"`
	NHeadKV       int            `json:"n_head_kv"`
	HeadDim       int            `json:"head_dim"`
	NFF           int            `json:"n_ff"`
	VocabSize     int            `json:"vocab_size"`
	ContextLength int            `json:"context_length"`
	RMSEps        float32        `json:"rms_eps"`
	Rope          RopeInfo       `json:"rope"`
	TensorTypes   map[string]int `json:"tensor_types"`
	Tokenizer     string         `json:"tokenizer"`
	BOS           int            `json:"bos"`
	EOS           int            `json:"eos"`
	AddBOS        bool           `json:"add_bos"`
	Params        uint64         `json:"params"`
	// Mixture of experts and attention variants: zero where the model
	// has none.
	Experts       int  `json:"n_expert"`
	ExpertsUsed   int  `json:"n_expert_used"`
	ExpertFF      int  `json:"n_ff_exp"`
	SharedExperts int  `json:"n_expert_shared"`
	DenseLayers   int  `json:"n_layer_dense_lead"`
	SlidingWindow int  `json:"sliding_window"`
	Sinks         bool `json:"attn_sinks"`
}

// RopeInfo describes the rotary embedding.
type RopeInfo struct {
	Base    float32 `json:"base"`
	Type    string  `json:"type"`
	Dim     int     `json:"dim"`
	Scaling string  `json:"scaling,omitempty"` // linear or yarn
	Factor  float32 `json:"factor,omitempty"`
	OrigCtx int     `json:"original_context,omitempty"`
}

func newModelInfoCmd(stdout io.Writer) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "info [MODEL.gguf]",
		Short: "Print a model's architecture facts (the embedded default without a path)",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			path := ""
			if len(args) == 1 {
				path = args[0]
			}
			return runModelInfo(path, format, stdout)
		},
	}
	cmd.Flags().StringVar(&format, "format", "text", "output: text or json")
	return cmd
}

func readModelInfo(path string) (ModelInfo, error) {
	f, err := model.OpenFile(path)
	if err != nil {
		return ModelInfo{}, err
	}
	defer f.Close()
	m, err := model.Load(f, ref.Kernels{})
	if err != nil {
		return ModelInfo{}, err
	}
	path = f.Path
	var params uint64
	for _, t := range f.Tensors {
		params += t.Elems()
	}
	c := m.Config
	return ModelInfo{
		Path: path, Arch: c.Arch, Name: c.Name, NLayer: c.Layers, NEmbd: c.Dim, NHead: c.Heads, NHeadKV: c.KVHeads,
		HeadDim: c.HeadDim, NFF: c.FF, VocabSize: c.Vocab, ContextLength: c.Context, RMSEps: c.RMSEps,
		Rope:        RopeInfo{Base: c.RopeBase, Type: c.RopeType(), Dim: c.RopeDim, Scaling: c.RopeScaling, Factor: c.RopeFactor, OrigCtx: c.RopeOrigCtx},
		TensorTypes: f.TensorTypes(), Tokenizer: m.Tok.Model, BOS: m.Tok.BOS, EOS: m.Tok.EOS, AddBOS: m.Tok.AddBOS,
		Params:  params,
		Experts: c.Experts, ExpertsUsed: c.ExpertsUsed, ExpertFF: c.ExpertFF, SharedExperts: c.SharedExperts,
		DenseLayers: c.DenseLayers, SlidingWindow: c.SlidingWindow, Sinks: c.Sinks,
	}, nil
}

func runModelInfo(path, format string, stdout io.Writer) error {
	if format != "text" && format != "json" {
		return fmt.Errorf("--format %q: want text or json", format)
	}
	info, err := readModelInfo(path)
	if err != nil {
		return err
	}
	if format == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(info)
	}
	fmt.Fprintf(stdout, "%s: %s %q, %d params\n", info.Path, info.Arch, info.Name, info.Params)
	fmt.Fprintf(stdout, "  layers %d, dim %d, heads %d (kv %d, head dim %d), ff %d\n", info.NLayer, info.NEmbd, info.NHead, info.NHeadKV, info.HeadDim, info.NFF)
	fmt.Fprintf(stdout, "  vocab %d (%s, bos %d, eos %d), context %d\n", info.VocabSize, info.Tokenizer, info.BOS, info.EOS, info.ContextLength)
	fmt.Fprintf(stdout, "  rope %s base %g dim %d", info.Rope.Type, info.Rope.Base, info.Rope.Dim)
	if info.Rope.Scaling != "" {
		fmt.Fprintf(stdout, " (%s ×%g of %d)", info.Rope.Scaling, info.Rope.Factor, info.Rope.OrigCtx)
	}
	fmt.Fprintf(stdout, ", rms eps %g, tensors %v\n", info.RMSEps, info.TensorTypes)
	if info.Experts > 0 {
		fmt.Fprintf(stdout, "  experts %d, %d used, ff %d, shared %d, leading dense layers %d\n", info.Experts, info.ExpertsUsed, info.ExpertFF, info.SharedExperts, info.DenseLayers)
	}
	if info.SlidingWindow > 0 || info.Sinks {
		fmt.Fprintf(stdout, "  sliding window %d, attention sinks %v\n", info.SlidingWindow, info.Sinks)
	}
	return nil
}

// SynthFlags are the flags of `jspark model synth`.
type SynthFlags struct {
	model.SynthOptions
	VocabFrom  string
	VocabBytes bool
	Type       string
	Out        string
}

// moeFlags are the synth flags whose defaults depend on --arch
// (model.DefaultMoE): a flag not given takes its architecture's.
var moeFlags = []string{"experts", "experts-used", "expert-ff", "shared-experts", "dense-layers", "sliding-window", "full-attention-interval"}

func newModelSynthCmd(stdout io.Writer) *cobra.Command {
	o := &SynthFlags{}
	cmd := &cobra.Command{
		Use:   "synth",
		Short: "Write a deterministic random-weight model (same flags, same bytes)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			given := map[string]bool{}
			for _, name := range moeFlags {
				given[name] = cmd.Flags().Changed(name)
			}
			return runSynth(o, given, stdout)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Arch, "arch", "llama", strings.Join(model.Archs(), ", "))
	f.IntVar(&o.Layers, "layers", 2, "transformer blocks")
	f.IntVar(&o.Dim, "dim", 256, "embedding width")
	f.IntVar(&o.Heads, "heads", 4, "attention heads")
	f.IntVar(&o.KVHeads, "kv-heads", 0, "KV heads (0: same as heads)")
	f.IntVar(&o.HeadDim, "head-dim", 0, "head width (0: dim/heads)")
	f.IntVar(&o.FF, "ff", 512, "feed-forward width (glm4moe: of its leading dense layers)")
	f.IntVar(&o.Context, "ctx", 4096, "stated context length")
	f.StringVar(&o.Type, "type", "f32", "weight type (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k, q6_k, iq4_nl, iq4_xs, mxfp4) or llama-quantize's mix (q3_k_m, q4_k_m, q5_k_m, iq4_xs; mxfp4 on a MoE: experts MXFP4, the rest Q8_0)")
	f.Uint64Var(&o.Seed, "seed", 1, "weight RNG seed")
	f.StringVar(&o.VocabFrom, "vocab-from", "", "copy the tokenizer of this GGUF file, or of a Hugging Face tokenizer.json (with the tokenizer_config.json beside it)")
	f.BoolVar(&o.VocabBytes, "vocab-bytes", false, "use a 259-token byte vocabulary (the default)")
	f.BoolVar(&o.TextVocab, "vocab-text", false, "type that vocabulary's byte tokens as text (<0x41>), for peers that refuse invalid UTF-8")
	f.StringVar(&o.Out, "out", "", "output file (required)")
	f.IntVar(&o.Experts, "experts", 0, "routed experts (qwen3moe, glm4moe, gpt-oss; default 8)")
	f.IntVar(&o.ExpertsUsed, "experts-used", 0, "experts each token runs (default 2)")
	f.IntVar(&o.ExpertFF, "expert-ff", 0, "an expert's feed-forward width (default ff/2)")
	f.IntVar(&o.SharedExperts, "shared-experts", 0, "glm4moe: shared experts (default 1)")
	f.IntVar(&o.DenseLayers, "dense-layers", 0, "glm4moe: leading layers with a dense MLP (default 1)")
	f.IntVar(&o.SlidingWindow, "sliding-window", 0, "gpt-oss, gemma3: window of their sliding-window layers (default 128)")
	f.IntVar(&o.FullAttnInterval, "full-attention-interval", 0, "qwen35, qwen35moe: of every this many layers the last is full attention (default 4)")
	return cmd
}

// runSynth writes the model; given says which of moeFlags were set (the
// rest take the architecture's defaults).
func runSynth(o *SynthFlags, given map[string]bool, stdout io.Writer) error {
	if o.Out == "" {
		return fmt.Errorf("--out is required")
	}
	if o.VocabFrom != "" && o.VocabBytes {
		return fmt.Errorf("--vocab-from and --vocab-bytes exclude each other")
	}
	mix, err := model.ParseMix(o.Type)
	if err != nil {
		return err
	}
	opts := o.SynthOptions
	opts.Mix = mix
	model.DefaultMoE(&opts)
	for name, v := range map[string]struct {
		dst *int
		val int
	}{
		"experts": {&opts.Experts, o.Experts}, "experts-used": {&opts.ExpertsUsed, o.ExpertsUsed}, "expert-ff": {&opts.ExpertFF, o.ExpertFF},
		"shared-experts": {&opts.SharedExperts, o.SharedExperts}, "dense-layers": {&opts.DenseLayers, o.DenseLayers},
		"sliding-window": {&opts.SlidingWindow, o.SlidingWindow}, "full-attention-interval": {&opts.FullAttnInterval, o.FullAttnInterval},
	} {
		if given[name] {
			*v.dst = v.val
		}
	}
	if o.VocabFrom != "" {
		open := gguf.Open
		if strings.HasSuffix(o.VocabFrom, ".json") { // a Hugging Face tokenizer.json
			open = tokenizer.OpenHF
		}
		v, err := open(o.VocabFrom)
		if err != nil {
			return err
		}
		defer v.Close()
		opts.Vocab = v
	}
	w, err := model.Synth(opts)
	if err != nil {
		return err
	}
	if err := w.WriteFile(o.Out); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s\n", o.Out)
	return nil
}
