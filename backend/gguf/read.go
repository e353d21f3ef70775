package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"os"
	"strings"
	"syscall"

	"jspark/kernels/quant"
)

// Error is a malformed-file error: which file, which field, at which byte.
type Error struct {
	Path   string
	Field  string
	Offset uint64
	Msg    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("gguf: %s: %s at offset %d: %s", e.Path, e.Field, e.Offset, e.Msg)
}

// maxDims bounds a tensor's rank (ggml's GGML_MAX_DIMS).
const maxDims = 4

// The GGUF specification's bounds on names: a metadata key is at most
// 65,535 bytes and a tensor name at most 64 (ggml's GGML_MAX_NAME; llama.cpp
// refuses longer ones). A value string is bounded by the file alone: real
// files carry chat templates of tens of KiB and, rarely, a whole
// tokenizer.json of tens of MiB; a reader that must not keep a large one
// takes it out (Take).
const (
	maxKeyLen        = 1<<16 - 1
	maxTensorNameLen = 64
)

// Open memory-maps and parses the file at path.
func Open(path string) (*File, error) {
	fd, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	defer fd.Close()
	st, err := fd.Stat()
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	if st.IsDir() {
		return nil, fmt.Errorf("gguf: %s: is a directory", path)
	}
	size := st.Size()
	if size == 0 {
		return nil, &Error{path, "magic", 0, "file is empty"}
	}
	data, err := syscall.Mmap(int(fd.Fd()), 0, int(size), syscall.PROT_READ, mmapFlags)
	if err != nil {
		return nil, fmt.Errorf("gguf: %s: mmap: %w", path, err)
	}
	f, err := Parse(path, data)
	if err != nil {
		syscall.Munmap(data)
		return nil, err
	}
	f.mapped = data
	f.closer = func() error { f.mapped = nil; return syscall.Munmap(data) }
	// The metadata and tensor infos are copied out: the pages they fill
	// (a 50 MB chat template's) need not stay resident beside the copy.
	if n := int(f.DataOffset) &^ (os.Getpagesize() - 1); n > 0 {
		release(data[:n])
	}
	return f, nil
}

// Parse reads a GGUF image held in memory; name is used in errors. Tensor
// data aliases data.
func Parse(name string, data []byte) (*File, error) {
	r := &reader{path: name, buf: data}
	f := &File{Path: name}
	magic, err := r.u32("magic")
	if err != nil {
		return nil, err
	}
	if magic != Magic {
		return nil, r.errAt("magic", 0, fmt.Sprintf("not a GGUF file (magic %#08x)", magic))
	}
	if f.Version, err = r.u32("version"); err != nil {
		return nil, err
	}
	if f.Version != 2 && f.Version != 3 {
		return nil, r.errAt("version", 4, fmt.Sprintf("unsupported GGUF version %d (want 2 or 3)", f.Version))
	}
	nTensors, err := r.u64("tensor_count")
	if err != nil {
		return nil, err
	}
	nKV, err := r.u64("metadata_kv_count")
	if err != nil {
		return nil, err
	}
	// Each KV needs at least 12 bytes and each tensor info at least 24.
	if nKV > uint64(r.left())/12 {
		return nil, r.errAt("metadata_kv_count", 16, fmt.Sprintf("%d entries cannot fit in %d bytes", nKV, len(data)))
	}
	if nTensors > uint64(r.left())/24 {
		return nil, r.errAt("tensor_count", 8, fmt.Sprintf("%d tensors cannot fit in %d bytes", nTensors, len(data)))
	}
	f.KVs = make([]KV, 0, nKV)
	seen := map[string]bool{}
	for i := uint64(0); i < nKV; i++ {
		at := r.off
		key, err := r.name(fmt.Sprintf("metadata[%d].key", i), maxKeyLen)
		if err != nil {
			return nil, err
		}
		if seen[key] {
			return nil, r.errAt("metadata key "+key, at, "duplicate key")
		}
		seen[key] = true
		vt, err := r.u32(key + ".type")
		if err != nil {
			return nil, err
		}
		v, err := r.value(key, ValueType(vt), 0)
		if err != nil {
			return nil, err
		}
		f.KVs = append(f.KVs, KV{key, v})
	}
	f.index()
	f.Alignment = DefaultAlignment
	if a, ok := f.Value("general.alignment"); ok {
		u, isU32 := a.(uint32)
		if !isU32 || u == 0 || u&(u-1) != 0 {
			return nil, r.errAt("general.alignment", 0, fmt.Sprintf("must be a power-of-two uint32, got %v", a))
		}
		f.Alignment = uint64(u)
	}
	f.Tensors = make([]TensorInfo, 0, nTensors)
	names := map[string]bool{}
	for i := uint64(0); i < nTensors; i++ {
		at := r.off
		field := fmt.Sprintf("tensor[%d]", i)
		name, err := r.name(field+".name", maxTensorNameLen)
		if err != nil {
			return nil, err
		}
		field = "tensor " + name
		if names[name] {
			return nil, r.errAt(field, at, "duplicate tensor name")
		}
		names[name] = true
		nd, err := r.u32(field + ".n_dims")
		if err != nil {
			return nil, err
		}
		if nd == 0 || nd > maxDims {
			return nil, r.errAt(field+".n_dims", r.off-4, fmt.Sprintf("%d dimensions (want 1..%d)", nd, maxDims))
		}
		t := TensorInfo{Name: name, Dims: make([]uint64, nd), At: uint64(at)}
		elems := uint64(1)
		for d := range t.Dims {
			if t.Dims[d], err = r.u64(fmt.Sprintf("%s.dims[%d]", field, d)); err != nil {
				return nil, err
			}
			if t.Dims[d] == 0 || t.Dims[d] > 1<<40 || elems > (1<<50)/t.Dims[d] {
				return nil, r.errAt(fmt.Sprintf("%s.dims[%d]", field, d), r.off-8, fmt.Sprintf("bad dimension %d", t.Dims[d]))
			}
			elems *= t.Dims[d]
		}
		typ, err := r.u32(field + ".type")
		if err != nil {
			return nil, err
		}
		t.Type = quant.Type(typ)
		if !t.Type.Known() {
			return nil, r.errAt(field+".type", r.off-4, fmt.Sprintf("tensor type %s (ggml type %d) is not supported (supported: %s)", strings.TrimSuffix(t.Type.String(), " (unsupported)"), typ, supportedTypes()))
		}
		if !t.Type.FitsRow(int(t.Dims[0])) {
			return nil, r.errAt(field+".dims[0]", r.off-4, fmt.Sprintf("row of %d is not a whole number of %v blocks", t.Dims[0], t.Type))
		}
		if t.Offset, err = r.u64(field + ".offset"); err != nil {
			return nil, err
		}
		if t.Offset%f.Alignment != 0 {
			return nil, r.errAt(field+".offset", r.off-8, fmt.Sprintf("offset %d is not aligned to %d", t.Offset, f.Alignment))
		}
		f.Tensors = append(f.Tensors, t)
	}
	f.DataOffset = alignUp(uint64(r.off), f.Alignment)
	end := uint64(len(data))
	for i := range f.Tensors {
		t := &f.Tensors[i]
		// NOTE: offsets and sizes come from the file; every sum and product
		// is checked before it is formed, so a hostile value cannot wrap
		// around and pass for a small one.
		if f.DataOffset > end || t.Offset > end-f.DataOffset {
			return nil, r.errAt("tensor "+t.Name+".offset", int(t.offsetAt()),
				fmt.Sprintf("offset %d is past the end of the file (data starts at %d, file ends at %d)", t.Offset, f.DataOffset, end))
		}
		start := f.DataOffset + t.Offset
		hi, size := bits.Mul64(uint64(t.Type.RowBytes(int(t.Dims[0]))), t.Elems()/t.Dims[0])
		if hi != 0 || size > end-start {
			return nil, r.errAt("tensor "+t.Name+".data", int(start),
				fmt.Sprintf("needs %d bytes but the file ends at %d (truncated?)", size, end))
		}
		t.Data = data[start : start+size : start+size]
	}
	f.index()
	return f, nil
}

// supportedTypes lists the weight types jspark computes with.
func supportedTypes() string {
	var names []string
	for _, t := range quant.WeightTypes() {
		names = append(names, t.String())
	}
	return strings.Join(names, ", ")
}

func alignUp(x, a uint64) uint64 { return (x + a - 1) / a * a }

type reader struct {
	path string
	buf  []byte
	off  int
}

func (r *reader) left() int { return len(r.buf) - r.off }

func (r *reader) errAt(field string, off int, msg string) *Error {
	return &Error{Path: r.path, Field: field, Offset: uint64(off), Msg: msg}
}

func (r *reader) need(field string, n int) ([]byte, error) {
	if n < 0 || r.left() < n {
		return nil, r.errAt(field, r.off, fmt.Sprintf("need %d bytes, %d left (truncated file)", n, r.left()))
	}
	b := r.buf[r.off : r.off+n]
	r.off += n
	return b, nil
}

func (r *reader) u32(field string) (uint32, error) {
	b, err := r.need(field, 4)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint32(b), nil
}

func (r *reader) u64(field string) (uint64, error) {
	b, err := r.need(field, 8)
	if err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b), nil
}

func (r *reader) str(field string) (string, error) {
	at := r.off
	n, err := r.u64(field + ".length")
	if err != nil {
		return "", err
	}
	if n > uint64(r.left()) {
		return "", r.errAt(field, at, fmt.Sprintf("string of %d bytes, %d left (truncated file)", n, r.left()))
	}
	b, _ := r.need(field, int(n))
	return string(b), nil
}

// name reads a key or a tensor name, refusing one over max bytes before
// it is copied.
func (r *reader) name(field string, max int) (string, error) {
	at := r.off
	n, err := r.u64(field + ".length")
	if err != nil {
		return "", err
	}
	r.off = at
	if n > uint64(max) {
		return "", r.errAt(field, at, fmt.Sprintf("%d bytes, over the %d a name may have", n, max))
	}
	return r.str(field)
}

// elemSize is the encoded size of a fixed-size value type, 0 otherwise.
func elemSize(t ValueType) int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

func (r *reader) value(field string, t ValueType, depth int) (any, error) {
	if t == TypeString {
		return r.str(field)
	}
	if t == TypeArray {
		return r.array(field, depth)
	}
	size := elemSize(t)
	if size == 0 {
		return nil, r.errAt(field, r.off-4, fmt.Sprintf("unknown value type %d", uint32(t)))
	}
	at := r.off
	b, err := r.need(field, size)
	if err != nil {
		return nil, err
	}
	switch t {
	case TypeUint8:
		return b[0], nil
	case TypeInt8:
		return int8(b[0]), nil
	case TypeBool:
		if b[0] > 1 {
			return nil, r.errAt(field, at, fmt.Sprintf("bool byte %d", b[0]))
		}
		return b[0] == 1, nil
	case TypeUint16:
		return binary.LittleEndian.Uint16(b), nil
	case TypeInt16:
		return int16(binary.LittleEndian.Uint16(b)), nil
	case TypeUint32:
		return binary.LittleEndian.Uint32(b), nil
	case TypeInt32:
		return int32(binary.LittleEndian.Uint32(b)), nil
	case TypeFloat32:
		return math.Float32frombits(binary.LittleEndian.Uint32(b)), nil
	case TypeUint64:
		return binary.LittleEndian.Uint64(b), nil
	case TypeInt64:
		return int64(binary.LittleEndian.Uint64(b)), nil
	default: // TypeFloat64
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
	}
}

// maxArrayDepth bounds nesting so a hostile file cannot recurse without end.
const maxArrayDepth = 8

func (r *reader) array(field string, depth int) (Array, error) {
	if depth >= maxArrayDepth {
		return Array{}, r.errAt(field, r.off, "arrays nested too deeply")
	}
	et, err := r.u32(field + ".elem_type")
	if err != nil {
		return Array{}, err
	}
	at := r.off
	n, err := r.u64(field + ".count")
	if err != nil {
		return Array{}, err
	}
	elem := ValueType(et)
	min := elemSize(elem)
	if elem == TypeString {
		min = 8
	} else if elem == TypeArray {
		min = 12
	} else if min == 0 {
		return Array{}, r.errAt(field+".elem_type", at-4, fmt.Sprintf("unknown value type %d", et))
	}
	if n > uint64(r.left()/min) {
		return Array{}, r.errAt(field, at, fmt.Sprintf("array of %d %v cannot fit in %d bytes left (truncated file)", n, elem, r.left()))
	}
	count := int(n)
	a := Array{Elem: elem}
	if size := elemSize(elem); size > 0 {
		b, _ := r.need(field, count*size)
		a.Values = decodeFixed(elem, b, count)
		if elem == TypeBool {
			for i, c := range b {
				if c > 1 {
					return Array{}, r.errAt(fmt.Sprintf("%s[%d]", field, i), at+8+i, fmt.Sprintf("bool byte %d", c))
				}
			}
		}
		return a, nil
	}
	if elem == TypeString {
		vs := make([]string, count)
		for i := range vs {
			if vs[i], err = r.str(fmt.Sprintf("%s[%d]", field, i)); err != nil {
				return Array{}, err
			}
		}
		a.Values = vs
		return a, nil
	}
	vs := make([]Array, count)
	for i := range vs {
		if vs[i], err = r.array(fmt.Sprintf("%s[%d]", field, i), depth+1); err != nil {
			return Array{}, err
		}
	}
	a.Values = vs
	return a, nil
}

func decodeFixed(t ValueType, b []byte, n int) any {
	le := binary.LittleEndian
	switch t {
	case TypeUint8:
		return append([]uint8(nil), b...)
	case TypeInt8:
		v := make([]int8, n)
		for i := range v {
			v[i] = int8(b[i])
		}
		return v
	case TypeBool:
		v := make([]bool, n)
		for i := range v {
			v[i] = b[i] == 1
		}
		return v
	case TypeUint16:
		v := make([]uint16, n)
		for i := range v {
			v[i] = le.Uint16(b[2*i:])
		}
		return v
	case TypeInt16:
		v := make([]int16, n)
		for i := range v {
			v[i] = int16(le.Uint16(b[2*i:]))
		}
		return v
	case TypeUint32:
		v := make([]uint32, n)
		for i := range v {
			v[i] = le.Uint32(b[4*i:])
		}
		return v
	case TypeInt32:
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(le.Uint32(b[4*i:]))
		}
		return v
	case TypeFloat32:
		v := make([]float32, n)
		for i := range v {
			v[i] = math.Float32frombits(le.Uint32(b[4*i:]))
		}
		return v
	case TypeUint64:
		v := make([]uint64, n)
		for i := range v {
			v[i] = le.Uint64(b[8*i:])
		}
		return v
	case TypeInt64:
		v := make([]int64, n)
		for i := range v {
			v[i] = int64(le.Uint64(b[8*i:]))
		}
		return v
	default:
		v := make([]float64, n)
		for i := range v {
			v[i] = math.Float64frombits(le.Uint64(b[8*i:]))
		}
		return v
	}
}
