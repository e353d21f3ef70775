package model

import (
	"fmt"
	"reflect"
	"strings"

	"jspark/backend/gguf"
)

// ReadConfig reads the architecture facts of a GGUF file.
func ReadConfig(f *gguf.File) (Config, error) {
	arch, ok := f.String("general.architecture")
	if !ok {
		return Config{}, fmt.Errorf("%s: no general.architecture", f.Path)
	}
	a, known := archs[arch]
	if !known {
		return Config{}, fmt.Errorf("%s: unsupported architecture %q (supported: %s)", f.Path, arch, strings.Join(Archs(), ", "))
	}
	c := Config{Arch: arch, RopeNeox: a.ropeNeox}
	c.Name, _ = f.String("general.name")
	var missing []string
	num := func(key string, dst *int, required bool) {
		if v, ok := f.Uint(arch + "." + key); ok && v < 1<<31 {
			*dst = int(v)
		} else if required {
			missing = append(missing, arch+"."+key)
		}
	}
	num("block_count", &c.Layers, true)
	num("embedding_length", &c.Dim, true)
	num("attention.head_count", &c.Heads, true)
	num("feed_forward_length", &c.FF, true)
	num("context_length", &c.Context, false)
	c.KVHeads = c.Heads
	num("attention.head_count_kv", &c.KVHeads, false)
	for _, key := range a.keys {
		var v int
		num(key, &v, true)
	}
	num("expert_count", &c.Experts, false)
	num("expert_used_count", &c.ExpertsUsed, false)
	num("expert_feed_forward_length", &c.ExpertFF, false)
	num("expert_shared_count", &c.SharedExperts, false)
	num("leading_dense_block_count", &c.DenseLayers, false)
	num("attention.sliding_window", &c.SlidingWindow, false)
	var nextn int // GLM's multi-token-prediction layers, last in the file: not run
	num("nextn_predict_layers", &nextn, false)
	if len(missing) > 0 {
		return Config{}, fmt.Errorf("%s: missing metadata %s", f.Path, strings.Join(missing, ", "))
	}
	if nextn >= c.Layers {
		return Config{}, fmt.Errorf("%s: %s.nextn_predict_layers %d leaves none of %d blocks", f.Path, arch, nextn, c.Layers)
	}
	c.Layers -= nextn
	if c.Heads == 0 || c.KVHeads == 0 || c.Heads%c.KVHeads != 0 || c.Dim == 0 || c.Layers == 0 {
		return Config{}, fmt.Errorf("%s: bad shape: %d heads, %d kv heads, dim %d, %d layers", f.Path, c.Heads, c.KVHeads, c.Dim, c.Layers)
	}
	if c.Experts > 0 && (c.ExpertsUsed == 0 || c.ExpertsUsed > c.Experts || c.ExpertFF == 0) {
		return Config{}, fmt.Errorf("%s: bad experts: %d used of %d, expert ff %d", f.Path, c.ExpertsUsed, c.Experts, c.ExpertFF)
	}
	if c.DenseLayers > c.Layers {
		return Config{}, fmt.Errorf("%s: %d leading dense blocks of %d", f.Path, c.DenseLayers, c.Layers)
	}
	c.HeadDim = c.Dim / c.Heads
	num("attention.key_length", &c.HeadDim, false)
	c.RopeDim = c.HeadDim
	num("rope.dimension_count", &c.RopeDim, false)
	if c.RopeDim > c.HeadDim || c.RopeDim%2 != 0 || c.RopeDim == 0 {
		return Config{}, fmt.Errorf("%s: rope dimension %d does not fit head dim %d", f.Path, c.RopeDim, c.HeadDim)
	}
	flt := func(key string, dst *float32, def float32) {
		*dst = def
		if v, ok := f.Float(arch + "." + key); ok {
			*dst = float32(v)
		}
	}
	flt("attention.layer_norm_rms_epsilon", &c.RMSEps, 1e-5)
	flt("rope.freq_base", &c.RopeBase, 10000)
	flt("expert_weights_scale", &c.ExpertWeightsScale, 1)
	c.ExpertWeightsNorm, _ = f.Bool(arch + ".expert_weights_norm")
	_, c.Sinks = f.Tensor("blk.0.attn_sinks.weight")
	if err := c.readRopeScaling(f); err != nil {
		return Config{}, fmt.Errorf("%s: %w", f.Path, err)
	}
	if c.Context == 0 {
		c.Context = 2048
	}
	if a.config != nil {
		if err := a.config(&c, f); err != nil {
			return Config{}, fmt.Errorf("%s: %w", f.Path, err)
		}
	}
	if err := c.fits(f); err != nil {
		return Config{}, fmt.Errorf("%s: %w", f.Path, err)
	}
	c.States = make([]LayerState, c.Layers)
	if a.state != nil {
		for i := range c.States {
			c.States[i] = a.state(&c, i)
		}
	}
	return c, nil
}

// readRopeScaling reads rope.scaling.*, as llama.cpp does: the factor
// (or the old rope.scale_linear), the original context (else the trained
// one), YaRN's attention factor and betas (defaults 1, 32, 1).
func (c *Config) readRopeScaling(f *gguf.File) error {
	p := c.Arch + ".rope.scaling."
	c.RopeScaling, _ = f.String(p + "type")
	fl := func(key string, def float32) float32 {
		if v, ok := f.Float(key); ok {
			return float32(v)
		}
		return def
	}
	c.RopeFactor = fl(p+"factor", fl(c.Arch+".rope.scale_linear", 0))
	c.RopeAttn = fl(p+"attn_factor", 1)
	c.YarnBetaFast = fl(p+"yarn_beta_fast", 32)
	c.YarnBetaSlow = fl(p+"yarn_beta_slow", 1)
	if v, ok := f.Uint(p + "original_context_length"); ok && v < 1<<31 {
		c.RopeOrigCtx = int(v)
	}
	switch c.RopeScaling {
	case "", "none":
		c.RopeScaling = ""
	case "linear", "yarn":
		if c.RopeFactor == 0 { // no factor: no scaling, as llama.cpp
			c.RopeScaling = ""
			return nil
		}
		if !(c.RopeFactor > 0) || c.RopeFactor > 1e6 {
			return fmt.Errorf("%sfactor %g", p, c.RopeFactor)
		}
		if c.RopeOrigCtx == 0 {
			c.RopeOrigCtx = c.Context
		}
		if c.RopeScaling == "yarn" && c.RopeOrigCtx == 0 {
			return fmt.Errorf("%soriginal_context_length: needed by yarn", p)
		}
	default:
		return fmt.Errorf("%stype %q (want none, linear or yarn)", p, c.RopeScaling)
	}
	return nil
}

// fits checks the metadata's counts against what the file holds, before
// anything is allocated from them: a hostile block_count must be an error,
// not an allocation of a billion layers. The exact shapes are checked as
// the weights are bound.
func (c Config) fits(f *gguf.File) error {
	per := archs[c.Arch].tensorsPerLayer(&c)
	if c.Layers > len(f.Tensors)/per {
		return fmt.Errorf("%s.block_count %d needs %d tensors per block, and the file holds %d tensors", c.Arch, c.Layers, per, len(f.Tensors))
	}
	var most uint64 // elements of the largest tensor
	for i := range f.Tensors {
		most = max(most, f.Tensors[i].Elems())
	}
	for _, d := range []struct {
		key string
		n   int
	}{{"embedding_length", c.Dim}, {"feed_forward_length", c.FF}, {"attention.head_count × key_length", c.Heads * c.HeadDim},
		{"attention.head_count_kv × key_length", c.KVHeads * c.HeadDim}, {"expert_count", c.Experts},
		{"expert_feed_forward_length", c.ExpertFF}, {"expert_shared_count × expert_feed_forward_length", c.SharedExperts * c.ExpertFF}} {
		if uint64(d.n) > most {
			return fmt.Errorf("%s.%s is %d, more than the %d elements of the file's largest tensor", c.Arch, d.key, d.n, most)
		}
	}
	return nil
}

// tensorsPerLayer is the fewest required tensors a layer of the
// architecture has (its blocks' required tags).
func (a archSpec) tensorsPerLayer(c *Config) int {
	fewest := 0
	for _, i := range []int{0, c.Layers - 1} {
		n := 0
		countTags(reflect.TypeOf(a.layer(c, i)).Elem(), &n)
		if fewest == 0 || n < fewest {
			fewest = n
		}
	}
	return max(fewest, 1)
}

func countTags(t reflect.Type, n *int) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, ok := f.Tag.Lookup("gguf")
		switch {
		case isGroup(f):
			countTags(f.Type, n)
		case ok && !strings.Contains(tag, ",optional"):
			*n++
		}
	}
}
