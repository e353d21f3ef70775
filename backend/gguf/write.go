package gguf

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"

	"jspark/kernels/quant"
)

// Writer builds a GGUF v3 file. Metadata and tensors are written in the
// order they were added, so the same calls give the same bytes. A tensor's
// data is given with it (AddTensor) or made by a producer while the file
// is written (AddTensorFunc): the header needs only names, types and dims,
// so a file of any size is written holding about one tensor at a time.
type Writer struct {
	kvs     []KV
	tensors []wtensor
}

// wtensor is a tensor to write: its data, or the producer of its size bytes.
type wtensor struct {
	TensorInfo
	size    uint64
	produce func() ([]byte, error)
}

// AddKV appends a metadata entry. Value is a Go scalar of a GGUF type, a
// string, a typed slice ([]string, []float32, []int32, …) or an Array.
func (w *Writer) AddKV(key string, value any) { w.kvs = append(w.kvs, KV{key, value}) }

// AddTensor appends a tensor; dims in GGUF order (contiguous first) and data
// already encoded as typ.
func (w *Writer) AddTensor(name string, typ quant.Type, dims []uint64, data []byte) {
	w.tensors = append(w.tensors, wtensor{TensorInfo: TensorInfo{Name: name, Dims: dims, Type: typ, Data: data}, size: uint64(len(data))})
}

// AddTensorFunc appends a tensor whose data, encoded as typ, produce
// returns when the file is written. Each write calls the producers once
// each, in the order they were added, and drops what one returned before
// calling the next; its bytes must be the tensor's size (typ's rows of
// dims[0] elements), or the write fails naming the tensor.
func (w *Writer) AddTensorFunc(name string, typ quant.Type, dims []uint64, produce func() ([]byte, error)) {
	size, ok := tensorSize(typ, dims)
	if !ok {
		size = 0 // Encode refuses it before writing anything
	}
	w.tensors = append(w.tensors, wtensor{TensorInfo: TensorInfo{Name: name, Dims: dims, Type: typ}, size: size, produce: produce})
}

// tensorSize is the encoded size of a tensor of typ and dims, false when
// typ is unknown, its rows are not whole blocks or the size overflows.
func tensorSize(typ quant.Type, dims []uint64) (uint64, bool) {
	if len(dims) == 0 || dims[0] == 0 || dims[0] > math.MaxInt32 || !typ.Known() || !typ.FitsRow(int(dims[0])) {
		return 0, false
	}
	size := uint64(typ.RowBytes(int(dims[0])))
	for _, d := range dims[1:] {
		if d != 0 && size > math.MaxInt64/d {
			return 0, false
		}
		size *= d
	}
	return size, true
}

// WriteFile writes the file to path, streaming each tensor as it is
// produced; on an error it removes what it wrote.
func (w *Writer) WriteFile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = w.Encode(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fmt.Errorf("gguf: writing %s: %w", path, err)
	}
	return nil
}

// Bytes returns the encoded file.
func (w *Writer) Bytes() ([]byte, error) {
	var buf bytes.Buffer
	var data uint64
	for _, t := range w.tensors {
		data += t.size + DefaultAlignment
	}
	if data < 1<<30 {
		buf.Grow(int(data) + 1<<16)
	}
	err := w.Encode(&buf)
	return buf.Bytes(), err
}

// Encode writes the whole file to out: the header, then each tensor as it
// is given or produced.
func (w *Writer) Encode(out io.Writer) error {
	for _, t := range w.tensors {
		if t.produce != nil && t.size == 0 {
			return fmt.Errorf("gguf: tensor %s: type %v does not encode dims %v", t.Name, t.Type, t.Dims)
		}
	}
	var b bytes.Buffer
	le := binary.LittleEndian
	put := func(v any) { binary.Write(&b, le, v) }
	putStr := func(s string) { put(uint64(len(s))); b.WriteString(s) }
	put(uint32(Magic))
	put(uint32(3))
	put(uint64(len(w.tensors)))
	put(uint64(len(w.kvs)))
	align := uint64(DefaultAlignment)
	for _, kv := range w.kvs {
		putStr(kv.Key)
		if kv.Key == "general.alignment" {
			if a, ok := kv.Value.(uint32); ok {
				align = uint64(a)
			}
		}
		if err := writeValue(&b, kv.Value, true); err != nil {
			return fmt.Errorf("gguf: metadata %s: %w", kv.Key, err)
		}
	}
	if align == 0 {
		return fmt.Errorf("gguf: metadata general.alignment 0")
	}
	var off uint64
	for _, t := range w.tensors {
		putStr(t.Name)
		put(uint32(len(t.Dims)))
		for _, d := range t.Dims {
			put(d)
		}
		put(uint32(t.Type))
		put(off)
		off = alignUp(off+t.size, align)
	}
	b.Write(make([]byte, alignUp(uint64(b.Len()), align)-uint64(b.Len())))
	if _, err := out.Write(b.Bytes()); err != nil {
		return err
	}
	zeros := make([]byte, align)
	for i, t := range w.tensors {
		data := t.Data
		if t.produce != nil {
			var err error
			if data, err = t.produce(); err != nil {
				return fmt.Errorf("gguf: tensor %s: %w", t.Name, err)
			}
			if uint64(len(data)) != t.size {
				return fmt.Errorf("gguf: tensor %s: produced %d bytes, want %d (%v of dims %v)", t.Name, len(data), t.size, t.Type, t.Dims)
			}
		}
		if _, err := out.Write(data); err != nil {
			return err
		}
		if i+1 < len(w.tensors) {
			if _, err := out.Write(zeros[:alignUp(t.size, align)-t.size]); err != nil {
				return err
			}
		}
	}
	return nil
}

func writeValue(b *bytes.Buffer, v any, withType bool) error {
	le := binary.LittleEndian
	tag := func(t ValueType) {
		if withType {
			binary.Write(b, le, uint32(t))
		}
	}
	switch x := v.(type) {
	case uint8:
		tag(TypeUint8)
		b.WriteByte(x)
	case int8:
		tag(TypeInt8)
		b.WriteByte(byte(x))
	case uint16:
		tag(TypeUint16)
		binary.Write(b, le, x)
	case int16:
		tag(TypeInt16)
		binary.Write(b, le, x)
	case uint32:
		tag(TypeUint32)
		binary.Write(b, le, x)
	case int32:
		tag(TypeInt32)
		binary.Write(b, le, x)
	case float32:
		tag(TypeFloat32)
		binary.Write(b, le, math.Float32bits(x))
	case bool:
		tag(TypeBool)
		if x {
			b.WriteByte(1)
		} else {
			b.WriteByte(0)
		}
	case string:
		tag(TypeString)
		binary.Write(b, le, uint64(len(x)))
		b.WriteString(x)
	case uint64:
		tag(TypeUint64)
		binary.Write(b, le, x)
	case int64:
		tag(TypeInt64)
		binary.Write(b, le, x)
	case float64:
		tag(TypeFloat64)
		binary.Write(b, le, math.Float64bits(x))
	case Array:
		tag(TypeArray)
		return writeArray(b, x)
	default:
		a, ok := arrayOf(v)
		if !ok {
			return fmt.Errorf("cannot encode %T", v)
		}
		tag(TypeArray)
		return writeArray(b, a)
	}
	return nil
}

func writeArray(b *bytes.Buffer, a Array) error {
	binary.Write(b, binary.LittleEndian, uint32(a.Elem))
	binary.Write(b, binary.LittleEndian, uint64(a.Len()))
	var err error
	each := func(n int, at func(int) any) {
		for i := 0; i < n && err == nil; i++ {
			err = writeValue(b, at(i), false)
		}
	}
	switch x := a.Values.(type) {
	case []uint8:
		b.Write(x)
	case []int8:
		each(len(x), func(i int) any { return x[i] })
	case []uint16:
		each(len(x), func(i int) any { return x[i] })
	case []int16:
		each(len(x), func(i int) any { return x[i] })
	case []uint32:
		each(len(x), func(i int) any { return x[i] })
	case []int32:
		each(len(x), func(i int) any { return x[i] })
	case []float32:
		each(len(x), func(i int) any { return x[i] })
	case []bool:
		each(len(x), func(i int) any { return x[i] })
	case []string:
		each(len(x), func(i int) any { return x[i] })
	case []uint64:
		each(len(x), func(i int) any { return x[i] })
	case []int64:
		each(len(x), func(i int) any { return x[i] })
	case []float64:
		each(len(x), func(i int) any { return x[i] })
	case []Array:
		for _, e := range x {
			if err = writeArray(b, e); err != nil {
				break
			}
		}
	default:
		return fmt.Errorf("cannot encode array of %T", a.Values)
	}
	return err
}

// arrayOf wraps a typed Go slice as an Array.
func arrayOf(v any) (Array, bool) {
	switch v.(type) {
	case []uint8:
		return Array{TypeUint8, v}, true
	case []int8:
		return Array{TypeInt8, v}, true
	case []uint16:
		return Array{TypeUint16, v}, true
	case []int16:
		return Array{TypeInt16, v}, true
	case []uint32:
		return Array{TypeUint32, v}, true
	case []int32:
		return Array{TypeInt32, v}, true
	case []float32:
		return Array{TypeFloat32, v}, true
	case []bool:
		return Array{TypeBool, v}, true
	case []string:
		return Array{TypeString, v}, true
	case []uint64:
		return Array{TypeUint64, v}, true
	case []int64:
		return Array{TypeInt64, v}, true
	case []float64:
		return Array{TypeFloat64, v}, true
	case []Array:
		return Array{TypeArray, v}, true
	}
	return Array{}, false
}
