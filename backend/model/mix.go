package model

import (
	"fmt"
	"strings"

	"jspark/kernels/quant"
)

// A Mix decides which type each weight matrix of a model is written in:
// one type for every matrix, or a mix that llama-quantize makes
// (`llama-quantize in.gguf out.gguf Q4_K_M`), so that synthetic models
// hold the types downloaded files hold, in the same tensors.
//
// The mixes follow llama_tensor_get_type in ik_llama.cpp's
// src/llama-quantize.cpp (TestMixMatchesLlamaQuantize holds the table it
// was checked against), with two changes where ik would pick a type of its
// own that no other engine reads: IQ5_K (iq4_xs's attn_v) becomes Q5_K,
// and Q6_0 (Q5_K's fallback) becomes Q5_1, as mainline llama.cpp picks.
type Mix struct {
	name string
	base quant.Type // the type of every matrix no rule moves
	kind mixKind
}

type mixKind int

const (
	mixSingle mixKind = iota // every matrix in base, Q8_0 or F16 where its rows do not fit
	mixKQuant                // llama-quantize's rules
	mixMXFP4                 // gpt-oss's files: experts MXFP4, the rest Q8_0
)

var mixes = map[string]Mix{
	"q3_k_m": {"q3_k_m", quant.Q3_K, mixKQuant},
	"q4_k_m": {"q4_k_m", quant.Q4_K, mixKQuant},
	"q5_k_m": {"q5_k_m", quant.Q5_K, mixKQuant},
	"iq4_xs": {"iq4_xs", quant.IQ4_XS, mixKQuant},
	"mxfp4":  {"mxfp4", quant.MXFP4, mixMXFP4},
}

// SingleType is the mix of one type.
func SingleType(t quant.Type) Mix { return Mix{strings.ToLower(t.String()), t, mixSingle} }

// ParseMix reads a mix name (q3_k_m, q4_k_m, q5_k_m, iq4_xs, mxfp4) or a
// type name (q8_0, …: every matrix in that type; mxfp4 names the mix,
// which is MXFP4 everywhere in a dense model).
func ParseMix(s string) (Mix, error) {
	if m, ok := mixes[strings.ToLower(s)]; ok {
		return m, nil
	}
	t, err := quant.ParseType(s)
	if err != nil {
		return Mix{}, fmt.Errorf("%w, or a mix: q3_k_m, q4_k_m, q5_k_m, iq4_xs", err)
	}
	return SingleType(t), nil
}

func (m Mix) String() string { return m.name }

// IsZero reports the zero Mix (no mix chosen).
func (m Mix) IsZero() bool { return m.name == "" }

// MixModel is what a mix looks at besides the tensor itself.
type MixModel struct {
	Layers  int
	Experts int  // routed experts; 0 for a dense model
	GQA     int  // query heads per KV head
	Tied    bool // no output.weight: token_embd serves as the output
}

// TypeOf is the type the mix writes the weight matrix name in, whose rows
// are cols long.
func (m Mix) TypeOf(name string, cols int, mm MixModel) quant.Type {
	if strings.Contains(name, "ffn_gate_inp.") {
		return quant.F32 // llama-quantize leaves routers as they came
	}
	switch m.kind {
	case mixMXFP4:
		if mm.Experts > 0 {
			if strings.Contains(name, "_exps.") {
				return fit(quant.MXFP4, cols)
			}
			return fit(quant.Q8_0, cols)
		}
		return fit(quant.MXFP4, cols)
	case mixKQuant:
		return fallback(m.kQuant(name, cols, mm), cols)
	}
	return fit(m.base, cols)
}

// fit is t, or the first of Q8_0 and F16 whose blocks fit rows of cols.
func fit(t quant.Type, cols int) quant.Type {
	for _, f := range []quant.Type{t, quant.Q8_0, quant.F16} {
		if f.FitsRow(cols) {
			return f
		}
	}
	return quant.F32
}

// fallback is llama-quantize's change_type_if_necessary: a super-block
// type on rows that are not whole super-blocks falls back to a type of
// 32-element blocks of about its size.
func fallback(t quant.Type, cols int) quant.Type {
	if cols%quant.QK_K == 0 {
		return t
	}
	switch t {
	case quant.Q2_K, quant.Q3_K, quant.IQ4_XS:
		t = quant.IQ4_NL
	case quant.Q4_K:
		t = quant.Q5_0
	case quant.Q5_K:
		t = quant.Q5_1 // ik: Q6_0
	case quant.Q6_K:
		t = quant.Q8_0
	}
	return fit(t, cols)
}

// moreBits is llama-quantize's use_more_bits: the first and last eighth of
// the layers, and every third between.
func moreBits(i, n int) bool { return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2 }

// layerOf is the layer a tensor name blk.N.… belongs to, or -1.
func layerOf(name string) int {
	var l int
	if _, err := fmt.Sscanf(name, "blk.%d.", &l); err != nil {
		return -1
	}
	return l
}

// kQuant is llama_tensor_get_type for the K-quant mixes, branch for branch
// in its order (only the branches these mixes reach).
func (m Mix) kQuant(name string, cols int, mm MixModel) quant.Type {
	t, i, n := m.base, layerOf(name), mm.Layers
	switch {
	case name == "output.weight" || mm.Tied && name == "token_embd.weight":
		if cols%quant.QK_K != 0 {
			return quant.Q8_0
		}
		return quant.Q6_K // ik: IQ5_K for a tied iq4_xs
	case name == "token_embd.weight":
		return t
	case strings.Contains(name, "attn_v.weight"):
		switch {
		case mm.Experts >= 4:
			return quant.Q8_0
		case m.name == "q3_k_m":
			if i < 2 {
				return quant.Q5_K
			}
			return quant.Q4_K
		case m.name == "iq4_xs" && mm.GQA >= 2:
			return quant.Q5_K // ik: IQ5_K
		case (m.name == "q4_k_m" || m.name == "q5_k_m") && moreBits(i, n):
			return quant.Q6_K
		case mm.GQA >= 4:
			switch t {
			case quant.Q3_K:
				return quant.Q4_K
			case quant.Q4_K, quant.IQ4_XS:
				return quant.Q5_K
			case quant.Q5_K:
				return quant.Q6_K
			}
		}
		return t
	case strings.Contains(name, "attn_k"):
		if mm.Experts >= 4 {
			return quant.Q8_0
		}
		return t
	case strings.Contains(name, "attn_q"):
		return t
	case strings.Contains(name, "ffn_down"):
		switch m.name {
		case "q3_k_m":
			if i < n/16 {
				return quant.Q5_K
			}
			return quant.Q4_K
		case "q4_k_m", "q5_k_m":
			if moreBits(i, n) {
				return quant.Q6_K
			}
		case "iq4_xs":
			if i < n/8 {
				return quant.Q5_K
			}
		}
		return t
	case strings.Contains(name, "attn_output.weight"):
		if mm.Experts >= 4 {
			if m.name != "q5_k_m" {
				return quant.Q5_K
			}
		} else if m.name == "q3_k_m" {
			return quant.Q4_K
		}
		return t
	case strings.Contains(name, "attn_qkv.weight"):
		switch m.name {
		case "q3_k_m":
			return quant.Q4_K
		case "q4_k_m":
			return quant.Q5_K
		case "q5_k_m":
			return quant.Q6_K
		}
	}
	return t
}

// weightType is the type Synth writes the matrix name (rows of cols) in:
// by o.Mix, or o.Type alone when no mix is set.
func (o SynthOptions) weightType(name string, cols int) quant.Type {
	m := o.Mix
	if m.IsZero() {
		m = SingleType(o.Type)
	}
	gqa := 1
	if o.KVHeads > 0 {
		gqa = o.Heads / o.KVHeads
	}
	return m.TypeOf(name, cols, MixModel{Layers: o.Layers, Experts: o.Experts, GQA: gqa})
}
