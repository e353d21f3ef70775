package model

import (
	"fmt"
	"reflect"
	"strings"

	"jspark/backend/gguf"
	"jspark/kernels"
	"jspark/kernels/quant"
)

// Vec is a weight vector (a norm's gains, a bias, sink logits), or a
// table of them (one bias row per expert), as F32: its values read from
// the file and its buffer on the device.
type Vec struct {
	Name string
	Data []float32
	Buf  *kernels.Buffer
}

// Experts is a 3-D expert tensor (GGUF dims [Cols, Rows, Count]): Count
// matrices of Rows×Cols. Expert e's rows are contiguous bytes of the
// tensor, so M[e] is a Matrix view into it, uploaded and multiplied as
// any matrix.
type Experts struct {
	Name              string
	Type              quant.Type
	Count, Rows, Cols int
	M                 []*kernels.Matrix // (Count)
}

// Weights bind from tensors by struct tags. A field of type
// *kernels.Matrix, *Vec or *Experts tagged
//
//	`gguf:"attn_q" shape:"q dim"`
//
// binds the tensor <prefix>attn_q.weight (a name ending in .bias is taken
// as it is), which must have the shape's dims, outermost first (GGUF
// lists them innermost first), each a name of Config.dims. Tag options:
// "optional" (absent leaves the field nil), "alt:NAME" (bound from NAME
// when the first is absent) and "raw" (the name without .weight). An untagged struct field binds its own
// fields at the same prefix, so shared groups of weights (attention,
// mlp, moe) are one field of an architecture's layer.
type binder struct {
	f   *gguf.File
	c   *Config
	err error
}

// dims are the named sizes a shape tag may use.
func (c *Config) dims() map[string]int {
	d := map[string]int{
		"dim": c.Dim, "vocab": c.Vocab, "heads": c.Heads, "kv_heads": c.KVHeads, "head_dim": c.HeadDim,
		"q": c.Heads * c.HeadDim, "kv": c.KVDim(), "ff": c.FF, "experts": c.Experts, "expert_ff": c.ExpertFF,
		"shared_ff": c.SharedExperts * c.ExpertFF,
	}
	c.hybridDims(d)
	return d
}

func (b *binder) fail(format string, args ...any) {
	if b.err == nil {
		b.err = fmt.Errorf("%s: "+format, append([]any{b.f.Path}, args...)...)
	}
}

func (b *binder) bind(v reflect.Value, prefix string) {
	t := v.Type()
	for i := 0; i < t.NumField() && b.err == nil; i++ {
		sf := t.Field(i)
		tag, tagged := sf.Tag.Lookup("gguf")
		if !tagged {
			if isGroup(sf) {
				b.bind(v.Field(i), prefix)
			}
			continue
		}
		parts := strings.Split(tag, ",")
		names := []string{parts[0]}
		optional, raw := false, false
		for _, p := range parts[1:] {
			if alt, ok := strings.CutPrefix(p, "alt:"); ok {
				names = append(names, alt)
			}
			optional = optional || p == "optional"
			raw = raw || p == "raw"
		}
		name := func(n string) string {
			if raw {
				return prefix + n
			}
			return tensorName(prefix, n)
		}
		var ti *gguf.TensorInfo
		for _, n := range names {
			if x, ok := b.f.Tensor(name(n)); ok {
				ti = x
				break
			}
		}
		if ti == nil {
			if !optional {
				b.fail("missing tensor %s", name(names[0]))
			}
			continue
		}
		want, err := b.shape(sf.Tag.Get("shape"))
		if err != nil {
			panic(fmt.Sprintf("model: field %s.%s: %v", t.Name(), sf.Name, err)) // a bad tag is a bug, not bad input
		}
		if !sameDims(ti.Dims, want) {
			b.fail("tensor %s has dims %v, want %v", ti.Name, ti.Dims, reversed(want))
			return
		}
		field := v.Field(i)
		switch field.Interface().(type) {
		case *kernels.Matrix:
			rows := 1 // a vector is a matrix of one row
			if len(ti.Dims) > 1 {
				rows = int(ti.Dims[1])
			}
			w := &kernels.Matrix{Name: ti.Name, Type: ti.Type, Rows: rows, Cols: int(ti.Dims[0]), Data: ti.Data}
			if err := w.Check(); err != nil {
				b.fail("%v", err)
				return
			}
			field.Set(reflect.ValueOf(w))
		case *Vec:
			out := make([]float32, ti.Elems())
			quant.Dequantize(ti.Type, ti.Data, out)
			field.Set(reflect.ValueOf(&Vec{Name: ti.Name, Data: out}))
		case *Experts:
			e := &Experts{Name: ti.Name, Type: ti.Type, Cols: int(ti.Dims[0]), Rows: int(ti.Dims[1]), Count: int(ti.Dims[2])}
			size := e.Rows * ti.Type.RowBytes(e.Cols)
			for x := 0; x < e.Count; x++ {
				w := &kernels.Matrix{Name: fmt.Sprintf("%s[%d]", ti.Name, x), Type: ti.Type, Rows: e.Rows, Cols: e.Cols, Data: ti.Data[x*size : (x+1)*size : (x+1)*size]}
				if err := w.Check(); err != nil {
					b.fail("%v", err)
					return
				}
				e.M = append(e.M, w)
			}
			field.Set(reflect.ValueOf(e))
		default:
			panic(fmt.Sprintf("model: field %s.%s: gguf tag on %v", t.Name(), sf.Name, sf.Type))
		}
	}
}

// tensorName is a tag's tensor: <prefix><name>.weight, or the name as it
// is when it ends in .bias.
func tensorName(prefix, name string) string {
	if strings.HasSuffix(name, ".bias") {
		return prefix + name
	}
	return prefix + name + ".weight"
}

// shape reads a shape tag's dims, outermost first.
func (b *binder) shape(tag string) ([]uint64, error) {
	named := b.c.dims()
	var out []uint64
	for _, f := range strings.Fields(tag) {
		n, ok := named[f]
		if !ok {
			return nil, fmt.Errorf("unknown dim %q in shape %q", f, tag)
		}
		out = append(out, uint64(n))
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no shape")
	}
	return out, nil
}

// sameDims compares GGUF dims (innermost first) with a shape (outermost
// first).
func sameDims(gguf, shape []uint64) bool {
	if len(gguf) != len(shape) {
		return false
	}
	for i, d := range gguf {
		if d != shape[len(shape)-1-i] {
			return false
		}
	}
	return true
}

func reversed(s []uint64) []uint64 {
	out := make([]uint64, len(s))
	for i, d := range s {
		out[len(s)-1-i] = d
	}
	return out
}

// isGroup reports whether a struct field is a group of weights bound at
// its parent's prefix: an untagged struct, named or embedded.
func isGroup(sf reflect.StructField) bool {
	_, tagged := sf.Tag.Lookup("gguf")
	return !tagged && sf.Type.Kind() == reflect.Struct && (sf.IsExported() || sf.Anonymous)
}

// walk calls the functions on every bound weight of v (a block's struct),
// nested groups included, in field order.
func walk(v reflect.Value, mat func(*kernels.Matrix), vec func(*Vec), exps func(*Experts)) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if _, tagged := sf.Tag.Lookup("gguf"); !tagged {
			if isGroup(sf) {
				walk(v.Field(i), mat, vec, exps)
			}
			continue
		}
		switch w := v.Field(i).Interface().(type) {
		case *kernels.Matrix:
			if w != nil && mat != nil {
				mat(w)
			}
		case *Vec:
			if w != nil && vec != nil {
				vec(w)
			}
		case *Experts:
			if w != nil && exps != nil {
				exps(w)
			}
		}
	}
}
