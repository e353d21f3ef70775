package model

import (
	"errors"
	"reflect"
	"unsafe"

	"jspark/kernels"
	"jspark/kernels/quant"
)

// device is the model's state on its kernels' device: the activations of
// a step, allocated for the largest batch seen and reused (a decode step
// allocates nothing). The weights carry their own buffers (upload).
type device struct {
	tokens, outRows, tableLen int                         // capacities of the buffers below
	x, h, q, k, v, attn       *kernels.Buffer             // F32 (tokens, width)
	gate, up                  *kernels.Buffer             // F32 (tokens, ff): the widest dense or shared MLP
	qkv, gateUp               *kernels.Buffer             // F32 (tokens, fused rows): fused matmuls' outputs, nil unless some layer fuses
	qRows, kRows, vRows       *kernels.Buffer             // I32: where q, k and v lie in qkv, in units of kv_dim (see partRows)
	gluRows                   map[int]*[2]*kernels.Buffer // I32 by ff: where gate and up lie in gateUp, in units of ff
	last, logits              *kernels.Buffer             // F32 (outRows, dim / vocab)
	ids, pos, seq, slots      *kernels.Buffer             // I32 (tokens)
	rows                      *kernels.Buffer             // I32 (outRows) batch indices of the logits rows
	table                     *kernels.Buffer             // I32 (tableLen) block tables, one row a sequence
	moe                       moeBufs                     // the routed experts' (moe.go)
	hyb                       hybridBufs                  // the recurrent and gated layers' (hybrid.go)
	groups                    []groupBufs                 // KV groups 1, 2, …'s (layout.go)
	single                    *KVLayout                   // the layout of a store that states none

	att        kernels.Attention
	step       step         // the step in flight (forward.go)
	fusedQKV   bool         // some layer runs Q, K, V stacked
	fusedGLU   map[int]bool // the ff widths of the MLPs that run Gate, Up stacked
	ff         int          // the widest dense or shared MLP
	expertBias bool         // experts have biases (gpt-oss)

	// Host staging of the step's inputs and the logits.
	hIDs, hPos, hSeq, hSlots, hRows, hTable []int32
	hLogits                                 []float32
	seqTables                               [][]int32 // distinct tables of the step
	seqFirst                                []int     // the first token of each
}

// The matrices that read the same input run as one: a decode step's cost is
// mostly the fixed cost of each parallel product, so Q, K, V stack into one
// matrix and Gate, Up into another (rows in that order), and the one output,
// (n, rows of all parts) row-major, is split back by Gather. Every output
// element is the same row's dot with the same input as before, so the bits
// are those of the separate products.

// fuse turns the stacking on (tests turn it off to compare the bits).
var fuse = true

// A group is a set of a block's weights (attention, mlp, moe …) that
// readies itself at load: setup notes on the device what the step buffers
// must hold for it, stacks matrices that read one input where it can, and
// returns the parts a stack replaces (they are not uploaded).
type group interface {
	setup(d *device) (parts []*kernels.Matrix)
}

// stack returns one matrix holding the rows of ws in order, or nil when they
// differ in type or width. Its bytes are the parts' own when they lie back
// to back in memory (as a GGUF file writes them) and a copy otherwise; the
// parts then point into the copy, so one copy of the weights stays in use
// (of a memory-mapped file, the originals are no longer touched).
func stack(name string, ws ...*kernels.Matrix) *kernels.Matrix {
	s := &kernels.Matrix{Name: name, Type: ws[0].Type, Cols: ws[0].Cols}
	size, adjacent := 0, true
	for i, w := range ws {
		if w.Type != s.Type || w.Cols != s.Cols || len(w.Data) == 0 {
			return nil
		}
		if i > 0 && unsafe.Add(unsafe.Pointer(unsafe.SliceData(ws[i-1].Data)), len(ws[i-1].Data)) != unsafe.Pointer(unsafe.SliceData(w.Data)) {
			adjacent = false
		}
		s.Rows += w.Rows
		size += len(w.Data)
	}
	if adjacent {
		s.Data = unsafe.Slice(unsafe.SliceData(ws[0].Data), size) // the parts keep it alive
		return s
	}
	s.Data = make([]byte, 0, size)
	for _, w := range ws {
		n := len(s.Data)
		s.Data = append(s.Data, w.Data...)
		w.Data = s.Data[n:len(s.Data):len(s.Data)]
	}
	return s
}

// upload puts every weight on the device, a stack in place of its parts.
// Matrices that share their bytes (tied embeddings) share one buffer.
func (m *Model) upload() error {
	k := m.K
	d := &device{fusedGLU: map[int]bool{}, gluRows: map[int]*[2]*kernels.Buffer{}}
	var errs []error
	seen := map[*byte]*kernels.Buffer{}
	mat := func(w *kernels.Matrix) {
		if w.Buf != nil {
			return
		}
		key := unsafe.SliceData(w.Data)
		if b, ok := seen[key]; ok && b.Type == w.Type && b.Len == w.Rows*w.Cols {
			w.Buf = b
			return
		}
		b, err := k.Upload(w.Type, w.Rows*w.Cols, w.Data)
		errs = append(errs, err)
		w.Buf, seen[key] = b, b
	}
	// prod uploads a matrix that products use, in the device's own layout
	// where it has one (token_embd is only read row by row, unless tied).
	prod := func(w *kernels.Matrix) {
		mat(w)
		if p, ok := k.(kernels.Preparer); ok && w.Buf != nil {
			errs = append(errs, p.Prepare(w))
		}
	}
	vec := func(v *Vec) {
		b, err := k.Upload(quant.F32, len(v.Data), kernels.F32Bytes(v.Data))
		errs = append(errs, err)
		v.Buf = b
	}
	mat(m.TokenEmbd)
	prod(m.Output)
	vec(m.OutputNorm)
	for _, b := range m.Blocks {
		replaced := map[*kernels.Matrix]bool{}
		setupAll(reflect.ValueOf(b).Elem(), d, replaced)
		walk(reflect.ValueOf(b).Elem(), func(w *kernels.Matrix) {
			if !replaced[w] {
				prod(w)
			}
		}, vec, func(e *Experts) {
			for _, w := range e.M {
				prod(w)
			}
		})
		walkStacks(reflect.ValueOf(b).Elem(), prod)
	}
	m.dev = d
	return errors.Join(errs...)
}

// setupAll sets up every group of a block, noting the parts replaced.
func setupAll(v reflect.Value, d *device, replaced map[*kernels.Matrix]bool) {
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if !isGroup(v.Type().Field(i)) {
			continue
		}
		if g, ok := asGroup(f).(group); ok {
			for _, p := range g.setup(d) {
				replaced[p] = true
			}
		}
		setupAll(f, d, replaced)
	}
}

// asGroup is a pointer to the group f, or nil where reflection may not
// hand it out (an embedded group of unexported type: its fields are
// reached one by one).
func asGroup(f reflect.Value) any {
	if p := f.Addr(); p.CanInterface() {
		return p.Interface()
	}
	return nil
}

// walkStacks calls prod on every stacked matrix of a block's groups.
func walkStacks(v reflect.Value, prod func(*kernels.Matrix)) {
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if !isGroup(v.Type().Field(i)) {
			continue
		}
		switch g := asGroup(f).(type) {
		case *attention:
			if g.qkv != nil {
				prod(g.qkv)
			}
		case *mlp:
			if g.gateUp != nil {
				prod(g.gateUp)
			}
		case *sharedExpert:
			if g.gateUp != nil {
				prod(g.gateUp)
			}
		}
		walkStacks(f, prod)
	}
}

// reserve makes the step buffers hold n tokens, nl logits rows and a table
// of tableLen entries, growing (never shrinking) them.
func (d *device) reserve(k kernels.Kernels, c Config, n, nl, tableLen int) error {
	var errs []error
	alloc := func(b **kernels.Buffer, t quant.Type, size int) {
		if *b != nil {
			k.Free(*b)
		}
		var err error
		*b, err = k.Alloc(t, size)
		errs = append(errs, err)
		// Mapped now: the step that grew the batch writes every page.
		kernels.Prefault(k, *b)
	}
	if n > d.tokens {
		d.tokens = max(n, 2*d.tokens)
		t := d.tokens
		qDim := c.Heads * c.HeadDim
		alloc(&d.x, quant.F32, t*c.Dim)
		alloc(&d.h, quant.F32, t*c.Dim)
		alloc(&d.q, quant.F32, t*qDim)
		alloc(&d.attn, quant.F32, t*qDim)
		alloc(&d.k, quant.F32, t*c.KVDim())
		alloc(&d.v, quant.F32, t*c.KVDim())
		if d.ff > 0 {
			alloc(&d.gate, quant.F32, t*d.ff)
			alloc(&d.up, quant.F32, t*d.ff)
		}
		for _, b := range []**kernels.Buffer{&d.ids, &d.pos, &d.seq, &d.slots} {
			alloc(b, quant.I32, t)
		}
		if d.fusedQKV {
			g := qDim / c.KVDim()
			alloc(&d.qkv, quant.F32, t*(qDim+2*c.KVDim()))
			partRows(k, alloc, &d.qRows, t, g, g+2, 0)
			partRows(k, alloc, &d.kRows, t, 1, g+2, g)
			partRows(k, alloc, &d.vRows, t, 1, g+2, g+1)
		}
		if len(d.fusedGLU) > 0 {
			alloc(&d.gateUp, quant.F32, t*2*d.ff)
			for ff := range d.fusedGLU {
				r := d.gluRows[ff]
				if r == nil {
					r = &[2]*kernels.Buffer{}
					d.gluRows[ff] = r
				}
				partRows(k, alloc, &r[0], t, 1, 2, 0)
				partRows(k, alloc, &r[1], t, 1, 2, 1)
			}
		}
		if c.Experts > 0 {
			d.moe.reserve(alloc, c, t, d.expertBias)
		}
		d.hyb.reserve(k, alloc, c, t)
	}
	if nl > d.outRows {
		d.outRows = max(nl, 2*d.outRows)
		alloc(&d.last, quant.F32, d.outRows*c.Dim)
		alloc(&d.logits, quant.F32, d.outRows*c.Vocab)
		alloc(&d.rows, quant.I32, d.outRows)
		d.hLogits = make([]float32, d.outRows*c.Vocab)
	}
	if tableLen > d.tableLen {
		d.tableLen = max(tableLen, 2*d.tableLen)
		alloc(&d.table, quant.I32, d.tableLen)
	}
	return errors.Join(errs...)
}

// partRows makes b the Gather indices of one part of a stacked output, in
// units of the part's width: for each of t tokens, the per consecutive
// units from unit first of the token's stride units.
func partRows(k kernels.Kernels, alloc func(**kernels.Buffer, quant.Type, int), b **kernels.Buffer, t, per, stride, first int) {
	alloc(b, quant.I32, t*per)
	idx := make([]int32, 0, t*per)
	for i := 0; i < t; i++ {
		for j := 0; j < per; j++ {
			idx = append(idx, int32(i*stride+first+j))
		}
	}
	k.Write(*b, 0, kernels.I32Bytes(idx))
}

// stage writes the step's ids, positions, KV slots, block tables and logits
// rows to the device: the only host-to-device traffic of a step besides
// the experts' routing (moe.go).
func (d *device) stage(k kernels.Kernels, b *Batch, bs int) (stride int) {
	n := len(b.Tokens)
	d.hIDs, d.hPos, d.hSeq, d.hSlots = d.hIDs[:0], d.hPos[:0], d.hSeq[:0], d.hSlots[:0]
	d.seqTables, d.seqFirst = d.seqTables[:0], d.seqFirst[:0]
	for i := 0; i < n; i++ {
		t := b.Table[i]
		s := len(d.seqTables) - 1
		if s < 0 || !sameTable(d.seqTables[s], t) {
			for s = 0; s < len(d.seqTables) && !sameTable(d.seqTables[s], t); s++ {
			}
			if s == len(d.seqTables) {
				d.seqTables = append(d.seqTables, t)
				d.seqFirst = append(d.seqFirst, i)
				stride = max(stride, len(t))
			}
		}
		p := b.Pos[i]
		d.hIDs = append(d.hIDs, int32(b.Tokens[i]))
		d.hPos = append(d.hPos, int32(p))
		d.hSeq = append(d.hSeq, int32(s))
		d.hSlots = append(d.hSlots, t[p/bs]*int32(bs)+int32(p%bs))
	}
	d.hTable = d.hTable[:0]
	for _, t := range d.seqTables {
		d.hTable = append(d.hTable, t...)
		for j := len(t); j < stride; j++ {
			d.hTable = append(d.hTable, 0)
		}
	}
	d.hRows = d.hRows[:0]
	for _, i := range b.Logits {
		d.hRows = append(d.hRows, int32(i))
	}
	k.Write(d.ids, 0, kernels.I32Bytes(d.hIDs))
	k.Write(d.pos, 0, kernels.I32Bytes(d.hPos))
	k.Write(d.seq, 0, kernels.I32Bytes(d.hSeq))
	k.Write(d.slots, 0, kernels.I32Bytes(d.hSlots))
	k.Write(d.rows, 0, kernels.I32Bytes(d.hRows))
	k.Write(d.table, 0, kernels.I32Bytes(d.hTable))
	return stride
}

// tableLen bounds the size of the step's table upload, before staging:
// runs of one table × the longest table.
func tableLen(b *Batch) int {
	var runs, longest int
	for i, t := range b.Table {
		if i == 0 || !sameTable(b.Table[i-1], t) {
			runs++
		}
		longest = max(longest, len(t))
	}
	return runs * longest
}

func sameTable(a, b []int32) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
