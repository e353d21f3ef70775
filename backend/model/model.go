// Package model holds the transformer architectures (llama, qwen2, qwen3)
// as plain structs whose weights bind from GGUF tensor names by struct tags,
// and one batched forward pass over the kernels interface.
package model

import (
	"fmt"
	"math"
	"reflect"
	"sort"
	"strings"

	"jspark/backend/embedded"
	"jspark/backend/gguf"
	"jspark/backend/tokenizer"
	"jspark/kernels"
	"jspark/kernels/quant"
)

// Config holds the architecture facts read from GGUF metadata.
type Config struct {
	Arch       string  `json:"arch"`
	Name       string  `json:"name,omitempty"`
	Layers     int     `json:"n_layer"`
	Dim        int     `json:"n_embd"`
	Heads      int     `json:"n_head"`
	KVHeads    int     `json:"n_head_kv"`
	HeadDim    int     `json:"head_dim"`
	FF         int     `json:"n_ff"`
	Vocab      int     `json:"vocab_size"`
	Context    int     `json:"context_length"`
	RMSEps     float32 `json:"rms_eps"`
	RopeBase   float32 `json:"rope_base"`
	RopeDim    int     `json:"rope_dim"`
	RopeNeox   bool    `json:"-"`
	TiedOutput bool    `json:"tied_output"`
}

// RopeType names the rotation as llama.cpp does: "normal" or "neox".
func (c Config) RopeType() string {
	if c.RopeNeox {
		return "neox"
	}
	return "normal"
}

// KVDim is the width of one token's keys (and of its values) in one layer.
func (c Config) KVDim() int { return c.KVHeads * c.HeadDim }

// KVBytesPerToken is the KV memory one token takes over all layers with
// keys and values of type t (F32 or F16).
func (c Config) KVBytesPerToken(t quant.Type) int { return 2 * c.Layers * t.RowBytes(c.KVDim()) }

// Arch describes what differs between architectures.
type Arch struct {
	RopeNeox bool // rotate halves (GPT-NeoX) instead of adjacent pairs
}

var archs = map[string]Arch{}

// Register makes an architecture loadable; each arch file calls it in init.
func Register(name string, a Arch) { archs[name] = a }

// Archs lists the registered architecture names.
func Archs() []string {
	var names []string
	for n := range archs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Model is a loaded transformer.
type Model struct {
	Config
	Tok *tokenizer.Tokenizer
	K   kernels.Kernels
	// KVType is the element type (F32 or F16) of the KV pools Generate makes.
	KVType quant.Type

	TokenEmbd  *kernels.Matrix `gguf:"token_embd"`            // (vocab, dim)
	OutputNorm []float32       `gguf:"output_norm"`           // (dim)
	Output     *kernels.Matrix `gguf:"output,alt:token_embd"` // (vocab, dim)
	Layers     []Layer         `gguf:"blk"`                   // (layer)
	dev        *device         // weights and step buffers on K's device (device.go)
}

// Layer is one transformer block.
type Layer struct {
	AttnNorm []float32       `gguf:"attn_norm"`            // (dim)
	Q        *kernels.Matrix `gguf:"attn_q"`               // (heads*head_dim, dim)
	K        *kernels.Matrix `gguf:"attn_k"`               // (kv_heads*head_dim, dim)
	V        *kernels.Matrix `gguf:"attn_v"`               // (kv_heads*head_dim, dim)
	QBias    []float32       `gguf:"attn_q.bias,optional"` // (heads*head_dim) qwen2
	KBias    []float32       `gguf:"attn_k.bias,optional"` // (kv_heads*head_dim) qwen2
	VBias    []float32       `gguf:"attn_v.bias,optional"` // (kv_heads*head_dim) qwen2
	QNorm    []float32       `gguf:"attn_q_norm,optional"` // (head_dim) qwen3
	KNorm    []float32       `gguf:"attn_k_norm,optional"` // (head_dim) qwen3
	O        *kernels.Matrix `gguf:"attn_output"`          // (dim, heads*head_dim)
	FFNNorm  []float32       `gguf:"ffn_norm"`             // (dim)
	Gate     *kernels.Matrix `gguf:"ffn_gate"`             // (ff, dim)
	Up       *kernels.Matrix `gguf:"ffn_up"`               // (ff, dim)
	Down     *kernels.Matrix `gguf:"ffn_down"`             // (dim, ff)
}

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
	c := Config{Arch: arch, RopeNeox: a.RopeNeox}
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
	if len(missing) > 0 {
		return Config{}, fmt.Errorf("%s: missing metadata %s", f.Path, strings.Join(missing, ", "))
	}
	if c.Heads == 0 || c.KVHeads == 0 || c.Heads%c.KVHeads != 0 || c.Dim == 0 || c.Layers == 0 {
		return Config{}, fmt.Errorf("%s: bad shape: %d heads, %d kv heads, dim %d, %d layers", f.Path, c.Heads, c.KVHeads, c.Dim, c.Layers)
	}
	c.HeadDim = c.Dim / c.Heads
	num("attention.key_length", &c.HeadDim, false)
	c.RopeDim = c.HeadDim
	num("rope.dimension_count", &c.RopeDim, false)
	if c.RopeDim > c.HeadDim || c.RopeDim%2 != 0 {
		return Config{}, fmt.Errorf("%s: rope dimension %d does not fit head dim %d", f.Path, c.RopeDim, c.HeadDim)
	}
	c.RMSEps = 1e-5
	if v, ok := f.Float(arch + ".attention.layer_norm_rms_epsilon"); ok {
		c.RMSEps = float32(v)
	}
	c.RopeBase = 10000
	if v, ok := f.Float(arch + ".rope.freq_base"); ok {
		c.RopeBase = float32(v)
	}
	if c.Context == 0 {
		c.Context = 2048
	}
	if err := c.fits(f); err != nil {
		return Config{}, fmt.Errorf("%s: %w", f.Path, err)
	}
	return c, nil
}

// layerTensors is how many tensors every block has (Layer's required tags).
var layerTensors = func() int {
	n := 0
	t := reflect.TypeOf(Layer{})
	for i := 0; i < t.NumField(); i++ {
		if tag := t.Field(i).Tag.Get("gguf"); tag != "" && !strings.Contains(tag, ",optional") {
			n++
		}
	}
	return n
}()

// fits checks the metadata's counts against what the file holds, before
// anything is allocated from them: a hostile block_count must be an error,
// not an allocation of a billion layers. The exact shapes are checked once
// the weights are bound (check).
func (c Config) fits(f *gguf.File) error {
	if c.Layers > len(f.Tensors)/layerTensors {
		return fmt.Errorf("%s.block_count %d needs %d tensors per block, and the file holds %d tensors", c.Arch, c.Layers, layerTensors, len(f.Tensors))
	}
	var most uint64 // elements of the largest tensor
	for i := range f.Tensors {
		most = max(most, f.Tensors[i].Elems())
	}
	for _, d := range []struct {
		key string
		n   int
	}{{"embedding_length", c.Dim}, {"feed_forward_length", c.FF}, {"attention.head_count × key_length", c.Heads * c.HeadDim}, {"attention.head_count_kv × key_length", c.KVHeads * c.HeadDim}} {
		if uint64(d.n) > most {
			return fmt.Errorf("%s.%s is %d, more than the %d elements of the file's largest tensor", c.Arch, d.key, d.n, most)
		}
	}
	return nil
}

// Load binds a model's weights from f (which must stay open) and builds its
// tokenizer. The kernels k compute its forward pass.
func Load(f *gguf.File, k kernels.Kernels) (*Model, error) {
	c, err := ReadConfig(f)
	if err != nil {
		return nil, err
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, err
	}
	m := &Model{Config: c, Tok: tok, K: k}
	m.Layers = make([]Layer, c.Layers)
	b := binder{f: f}
	b.bind(reflect.ValueOf(m).Elem(), "")
	for i := range m.Layers {
		b.bind(reflect.ValueOf(&m.Layers[i]).Elem(), fmt.Sprintf("blk.%d.", i))
	}
	if b.err != nil {
		return nil, b.err
	}
	m.Vocab = m.TokenEmbd.Rows
	m.TiedOutput = m.Output == m.TokenEmbd || m.Output.Data != nil && &m.Output.Data[0] == &m.TokenEmbd.Data[0]
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	if err := m.upload(); err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return m, nil
}

// check verifies every weight's shape against the config.
func (m *Model) check() error {
	c := m.Config
	q, kv := c.Heads*c.HeadDim, c.KVDim()
	want := func(w *kernels.Matrix, rows, cols int) error {
		if w.Rows != rows || w.Cols != cols {
			return fmt.Errorf("tensor %s is %dx%d, want %dx%d", w.Name, w.Rows, w.Cols, rows, cols)
		}
		return w.Check()
	}
	vec := func(name string, v []float32, n int) error {
		if v != nil && len(v) != n {
			return fmt.Errorf("tensor %s has %d elements, want %d", name, len(v), n)
		}
		return nil
	}
	if tv := m.Tok.VocabSize(); tv != c.Vocab {
		return fmt.Errorf("tokenizer has %d tokens, token_embd %d rows", tv, c.Vocab)
	}
	errs := []error{want(m.TokenEmbd, c.Vocab, c.Dim), want(m.Output, c.Vocab, c.Dim), vec("output_norm", m.OutputNorm, c.Dim)}
	for i := range m.Layers {
		l := &m.Layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		errs = append(errs,
			vec(p+"attn_norm", l.AttnNorm, c.Dim), vec(p+"ffn_norm", l.FFNNorm, c.Dim),
			want(l.Q, q, c.Dim), want(l.K, kv, c.Dim), want(l.V, kv, c.Dim), want(l.O, c.Dim, q),
			want(l.Gate, c.FF, c.Dim), want(l.Up, c.FF, c.Dim), want(l.Down, c.Dim, c.FF),
			vec(p+"attn_q.bias", l.QBias, q), vec(p+"attn_k.bias", l.KBias, kv), vec(p+"attn_v.bias", l.VBias, kv),
			vec(p+"attn_q_norm", l.QNorm, c.HeadDim), vec(p+"attn_k_norm", l.KNorm, c.HeadDim))
	}
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// binder fills struct fields from tensors named by their gguf tags.
type binder struct {
	f   *gguf.File
	err error
}

func (b *binder) bind(v reflect.Value, prefix string) {
	t := v.Type()
	for i := 0; i < t.NumField() && b.err == nil; i++ {
		tag := t.Field(i).Tag.Get("gguf")
		if tag == "" || t.Field(i).Type.Kind() == reflect.Slice && t.Field(i).Type.Elem().Kind() == reflect.Struct {
			continue
		}
		parts := strings.Split(tag, ",")
		names := []string{parts[0]}
		optional := false
		for _, p := range parts[1:] {
			if alt, ok := strings.CutPrefix(p, "alt:"); ok {
				names = append(names, alt)
			}
			optional = optional || p == "optional"
		}
		var ti *gguf.TensorInfo
		for _, n := range names {
			full := prefix + n
			if !strings.HasSuffix(full, ".bias") {
				full += ".weight"
			}
			if x, ok := b.f.Tensor(full); ok {
				ti = x
				break
			}
		}
		if ti == nil {
			if !optional {
				b.err = fmt.Errorf("%s: missing tensor %s%s.weight", b.f.Path, prefix, names[0])
			}
			continue
		}
		field := v.Field(i)
		switch field.Interface().(type) {
		case *kernels.Matrix:
			if len(ti.Dims) != 2 {
				b.err = fmt.Errorf("%s: tensor %s has %d dims, want 2", b.f.Path, ti.Name, len(ti.Dims))
				return
			}
			field.Set(reflect.ValueOf(&kernels.Matrix{Name: ti.Name, Type: ti.Type, Rows: int(ti.Dims[1]), Cols: int(ti.Dims[0]), Data: ti.Data}))
		case []float32:
			out := make([]float32, ti.Elems())
			quant.Dequantize(ti.Type, ti.Data, out)
			field.Set(reflect.ValueOf(out))
		}
	}
}

// AttnScale is the softmax scale 1/sqrt(head_dim).
func (c Config) AttnScale() float32 { return float32(1 / math.Sqrt(float64(c.HeadDim))) }

// OpenFile opens the GGUF file at path, or the embedded default when path
// is "".
func OpenFile(path string) (*gguf.File, error) {
	if path == "" {
		return embedded.Open()
	}
	return gguf.Open(path)
}

// Open loads the model at path, or the embedded default when path is "".
// The returned close function releases the file.
func Open(path string, k kernels.Kernels) (*Model, func() error, error) {
	f, err := OpenFile(path)
	if err != nil {
		return nil, nil, err
	}
	m, err := Load(f, k)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return m, f.Close, nil
}
