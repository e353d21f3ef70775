package model

import (
	"fmt"

	"jspark/backend/gguf"
	"jspark/kernels"
	"jspark/kernels/quant"
)

// Hybrid holds the metadata of the sliding-window and hybrid recurrent
// families (gemma3; qwen35, qwen35moe and qwen3next).
type Hybrid struct {
	// Gated DeltaNet layers (ssm.*): zero SSMVHeads for none.
	ConvKernel       int `json:"ssm_conv_kernel,omitempty"`         // taps of the short convolution
	SSMDim           int `json:"ssm_state_size,omitempty"`          // width of each head's query, key and value
	SSMKHeads        int `json:"ssm_group_count,omitempty"`         // query and key heads
	SSMVHeads        int `json:"ssm_time_step_rank,omitempty"`      // value heads, a multiple of SSMKHeads
	FullAttnInterval int `json:"full_attention_interval,omitempty"` // of every this many layers the last is full attention
	SharedFF         int `json:"n_ff_shexp,omitempty"`              // width of the gated shared expert

	RopeLocalBase float32 `json:"rope_local_base,omitempty"` // RoPE base of gemma3's sliding-window layers
	EmbedScale    float32 `json:"-"`                         // the embedding is multiplied by it (0: not)
	QueryScale    float32 `json:"-"`                         // attention's softmax scale, when not 1/√head_dim

	States []LayerState `json:"-"` // what each layer keeps of a sequence (state.go)
}

// recurrentLayer says whether layer i is a Gated DeltaNet layer: all but
// the last of every FullAttnInterval layers.
func (c *Config) recurrentLayer(i int) bool {
	return c.SSMVHeads > 0 && (i+1)%c.FullAttnInterval != 0
}

// convDim is the width of the convolved q, k and v of a DeltaNet layer.
func (c *Config) convDim() int { return (2*c.SSMKHeads + c.SSMVHeads) * c.SSMDim }

// deltaState is a DeltaNet layer's state of one sequence: the short
// convolution's last ConvKernel-1 inputs, then each value head's matrix.
func (c *Config) deltaState() LayerState {
	return LayerState{Kind: Recurrent, StateFloats: (c.ConvKernel-1)*c.convDim() + c.SSMVHeads*c.SSMDim*c.SSMDim}
}

// hybridDims adds the named sizes of the hybrid families' shape tags.
func (c *Config) hybridDims(d map[string]int) {
	v := c.SSMVHeads * c.SSMDim
	d["conv"], d["conv_k"], d["v_heads"], d["ssm_d"], d["value"] = c.convDim(), c.ConvKernel, c.SSMVHeads, c.SSMDim, v
	d["qkvz"], d["ba"], d["q2"] = 2*c.SSMKHeads*c.SSMDim+2*v, 2*c.SSMVHeads, 2*c.Heads*c.HeadDim
	if c.SharedFF > 0 {
		d["shared_ff"] = c.SharedFF
	}
}

// readDeltaConfig reads a Gated DeltaNet family's ssm.* keys and its
// full-attention interval (default 4), and checks them against the file
// before anything is allocated from them.
func readDeltaConfig(c *Config, f *gguf.File) error {
	var missing []string
	num := func(key string, dst *int) {
		if v, ok := f.Uint(c.Arch + "." + key); ok && v < 1<<31 {
			*dst = int(v)
		} else {
			missing = append(missing, c.Arch+"."+key)
		}
	}
	var inner int
	num("ssm.conv_kernel", &c.ConvKernel)
	num("ssm.state_size", &c.SSMDim)
	num("ssm.group_count", &c.SSMKHeads)
	num("ssm.time_step_rank", &c.SSMVHeads)
	num("ssm.inner_size", &inner)
	if len(missing) > 0 {
		return fmt.Errorf("missing metadata %v", missing)
	}
	c.FullAttnInterval = 4
	// NOTE: qwen3next's is fixed at 4, as ik_llama.cpp reads no key for it.
	if v, ok := f.Uint(c.Arch + ".full_attention_interval"); ok && v < 1<<31 && c.Arch != "qwen3next" {
		c.FullAttnInterval = int(v)
	}
	if v, ok := f.Uint(c.Arch + ".expert_shared_feed_forward_length"); ok && v < 1<<31 {
		c.SharedFF = int(v)
	}
	switch {
	case c.ConvKernel < 2 || c.ConvKernel > 64:
		return fmt.Errorf("%s.ssm.conv_kernel %d (want 2 to 64)", c.Arch, c.ConvKernel)
	case c.SSMDim == 0 || c.SSMKHeads == 0 || c.SSMVHeads%c.SSMKHeads != 0 || c.SSMVHeads == 0:
		return fmt.Errorf("%s.ssm: %d key heads, %d value heads of %d", c.Arch, c.SSMKHeads, c.SSMVHeads, c.SSMDim)
	case inner != c.SSMVHeads*c.SSMDim:
		// NOTE: as ik_llama.cpp's delta-net kernel, keys and values of one
		// width: inner_size / time_step_rank = state_size.
		return fmt.Errorf("%s.ssm.inner_size %d is not time_step_rank %d × state_size %d", c.Arch, inner, c.SSMVHeads, c.SSMDim)
	case c.SSMDim > c.Dim:
		return fmt.Errorf("%s.ssm.state_size %d exceeds embedding_length %d", c.Arch, c.SSMDim, c.Dim)
	case c.FullAttnInterval < 1:
		return fmt.Errorf("%s.full_attention_interval 0", c.Arch)
	}
	var most uint64
	for i := range f.Tensors {
		most = max(most, f.Tensors[i].Elems())
	}
	// The state of a head is ssm_d² ≤ ssm_d·dim: a value head's share of
	// ssm_out, which the file holds.
	if n := uint64(c.convDim()) * uint64(c.ConvKernel); n > most || uint64(inner)*uint64(c.Dim) > most {
		return fmt.Errorf("%s.ssm sizes exceed the file's largest tensor of %d elements", c.Arch, most)
	}
	return nil
}

// hybridBufs are the step buffers of the recurrent and gated layers, each
// allocated only when some layer of the model needs it (its setup says).
type hybridBufs struct {
	delta, fused, gatedAttn, sharedGate bool

	qkv, conv   *kernels.Buffer // F32 (t, conv): the projected q, k, v; their convolution
	z, o        *kernels.Buffer // F32 (t, value): the output gate; the delta rule's output
	alpha, beta *kernels.Buffer // F32 (t, v_heads)
	// qwen3next's fused products, F32 (t, qkvz) and (t, 2·v_heads), and
	// where the parts lie in them (Gather rows, see fusedRows).
	mixed, ba                    *kernels.Buffer
	qkvRows, zRows, bRows, aRows *kernels.Buffer
	qg, gate                     *kernels.Buffer // F32 (t, 2·q), (t, q): gated attention's query-and-gate product; its gate
	qRows, gRows                 *kernels.Buffer // I32 (t·heads): its queries' and gates' rows in qg
	shGate                       *kernels.Buffer // F32 (t): the shared expert's gate logit

	start, slot   *kernels.Buffer // I32 (t+1), (t): the step's runs
	hStart, hSlot []int32
	seen          []bool // checkSlots' scratch, by slot
	runs          kernels.Runs
	cv            kernels.Conv     // the calls in flight, kept here so a step allocates nothing
	dn            kernels.DeltaNet //
}

func (hb *hybridBufs) reserve(k kernels.Kernels, alloc func(**kernels.Buffer, quant.Type, int), c Config, t int) {
	if hb.delta {
		v := c.SSMVHeads * c.SSMDim
		alloc(&hb.qkv, quant.F32, t*c.convDim())
		alloc(&hb.conv, quant.F32, t*c.convDim())
		alloc(&hb.z, quant.F32, t*v)
		alloc(&hb.o, quant.F32, t*v)
		alloc(&hb.alpha, quant.F32, t*c.SSMVHeads)
		alloc(&hb.beta, quant.F32, t*c.SSMVHeads)
		alloc(&hb.start, quant.I32, t+1)
		alloc(&hb.slot, quant.I32, t)
	}
	if hb.fused {
		hb.fusedRows(k, alloc, c, t)
	}
	if hb.gatedAttn {
		q := c.Heads * c.HeadDim
		alloc(&hb.qg, quant.F32, t*2*q)
		alloc(&hb.gate, quant.F32, t*q)
		partRows(k, alloc, &hb.qRows, t*c.Heads, 1, 2, 0)
		partRows(k, alloc, &hb.gRows, t*c.Heads, 1, 2, 1)
	}
	if hb.sharedGate {
		alloc(&hb.shGate, quant.F32, t)
	}
}

// fusedRows makes the Gather rows of qwen3next's fused products. ssm_in
// gives each token, for each key head g, q_g, k_g, then the v and z of
// its r = v_heads/k_heads value heads, in units of ssm_d; ssm_ba gives
// for each g the r betas, then the r alphas.
func (hb *hybridBufs) fusedRows(k kernels.Kernels, alloc func(**kernels.Buffer, quant.Type, int), c Config, t int) {
	hk, hv := c.SSMKHeads, c.SSMVHeads
	r := hv / hk
	per := 2 + 2*r // units of a key head's group
	alloc(&hb.mixed, quant.F32, t*hk*per*c.SSMDim)
	alloc(&hb.ba, quant.F32, t*2*hv)
	var qkv, z, b, a []int32
	for i := 0; i < t; i++ {
		base := i * hk * per
		for g := 0; g < hk; g++ {
			qkv = append(qkv, int32(base+g*per))
		}
		for g := 0; g < hk; g++ {
			qkv = append(qkv, int32(base+g*per+1))
		}
		for h := 0; h < hv; h++ {
			qkv = append(qkv, int32(base+h/r*per+2+h%r))
			z = append(z, int32(base+h/r*per+2+r+h%r))
		}
		for g := 0; g < hk; g++ {
			b = append(b, int32(i*2*hk+2*g))
			a = append(a, int32(i*2*hk+2*g+1))
		}
	}
	for _, x := range []struct {
		b   **kernels.Buffer
		idx []int32
	}{{&hb.qkvRows, qkv}, {&hb.zRows, z}, {&hb.bRows, b}, {&hb.aRows, a}} {
		alloc(x.b, quant.I32, len(x.idx))
		k.Write(*x.b, 0, kernels.I32Bytes(x.idx))
	}
}

// stageRuns writes the step's runs (tokens of one slot in a row) for the
// recurrent kernels.
func (hb *hybridBufs) stageRuns(k kernels.Kernels, slots []int, pos *kernels.Buffer) {
	hb.hStart, hb.hSlot = hb.hStart[:0], hb.hSlot[:0]
	for i, s := range slots {
		if i == 0 || slots[i-1] != s {
			hb.hStart = append(hb.hStart, int32(i))
			hb.hSlot = append(hb.hSlot, int32(s))
		}
	}
	hb.hStart = append(hb.hStart, int32(len(slots)))
	k.Write(hb.start, 0, kernels.I32Bytes(hb.hStart))
	k.Write(hb.slot, 0, kernels.I32Bytes(hb.hSlot))
	hb.runs = kernels.Runs{N: len(hb.hSlot), Start: hb.start, Slot: hb.slot, Pos: pos}
}
