// Package gguf reads and writes GGUF files (versions 2 and 3).
//
// A File holds the metadata in order and the tensor infos; tensor data is
// a slice of the memory-mapped (or in-memory) file, never copied. Every
// malformed input is an *Error naming the file, the field and the byte
// offset where reading failed.
package gguf

import (
	"fmt"
	"slices"

	"jspark/kernels/quant"
)

// Magic is "GGUF" read as a little-endian uint32.
const Magic = 0x46554747

// DefaultAlignment applies when general.alignment is absent.
const DefaultAlignment = 32

// ValueType numbers the metadata value kinds as in the GGUF spec.
type ValueType uint32

const (
	TypeUint8 ValueType = iota
	TypeInt8
	TypeUint16
	TypeInt16
	TypeUint32
	TypeInt32
	TypeFloat32
	TypeBool
	TypeString
	TypeArray
	TypeUint64
	TypeInt64
	TypeFloat64
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("value-type(%d)", uint32(t))
}

// KV is one metadata entry. Value is a Go scalar (uint8 … float64, bool,
// string) or an Array.
type KV struct {
	Key   string
	Value any
}

// Array is a metadata array. Values is a typed slice ([]string, []float32,
// []int32, …) or, for arrays of arrays, []Array.
type Array struct {
	Elem   ValueType
	Values any
}

// Len is the number of elements.
func (a Array) Len() int {
	switch v := a.Values.(type) {
	case []uint8:
		return len(v)
	case []int8:
		return len(v)
	case []uint16:
		return len(v)
	case []int16:
		return len(v)
	case []uint32:
		return len(v)
	case []int32:
		return len(v)
	case []float32:
		return len(v)
	case []bool:
		return len(v)
	case []string:
		return len(v)
	case []uint64:
		return len(v)
	case []int64:
		return len(v)
	case []float64:
		return len(v)
	case []Array:
		return len(v)
	}
	return 0
}

// TensorInfo describes one tensor. Dims are in GGUF order: Dims[0] is the
// contiguous (fastest-varying) dimension.
type TensorInfo struct {
	Name   string
	Dims   []uint64
	Type   quant.Type
	Offset uint64 // from the start of the data section
	Data   []byte // the tensor's bytes in the file
	At     uint64 // where the tensor's info record starts in the file (read files only)
}

// offsetAt is where the info record holds the tensor's data offset.
func (t *TensorInfo) offsetAt() uint64 {
	return t.At + 8 + uint64(len(t.Name)) + 4 + 8*uint64(len(t.Dims)) + 4
}

// Elems is the number of elements.
func (t *TensorInfo) Elems() uint64 {
	n := uint64(1)
	for _, d := range t.Dims {
		n *= d
	}
	return n
}

// File is a parsed GGUF file.
type File struct {
	Path       string
	Version    uint32
	KVs        []KV
	Tensors    []TensorInfo
	Alignment  uint64
	DataOffset uint64

	kv      map[string]int
	tensors map[string]int
	closer  func() error
	mapped  []byte // the file's mapping (Open), nil for Parse
}

// Mapped is the size of the file's mapping (0 for a parsed image).
func (f *File) Mapped() int64 { return int64(len(f.mapped)) }

// Resident is how many bytes of the mapping are in memory now: the
// weights a device has not packed and given back (see kernels/cpu).
func (f *File) Resident() int64 { return resident(f.mapped) }

// Close releases the mapping, if any. Tensor data must not be used after.
func (f *File) Close() error {
	if f.closer != nil {
		c := f.closer
		f.closer = nil
		return c()
	}
	return nil
}

// Value returns the metadata value for key.
func (f *File) Value(key string) (any, bool) {
	i, ok := f.kv[key]
	if !ok {
		return nil, false
	}
	return f.KVs[i].Value, true
}

// Tensor returns the tensor named name.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tensors[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Take returns the metadata value for key and removes it from f, so that f
// no longer holds it: a user that keeps only what it makes of a large
// value (a chat template, compiled) lets it go.
func (f *File) Take(key string) (any, bool) {
	i, ok := f.kv[key]
	if !ok {
		return nil, false
	}
	v := f.KVs[i].Value
	f.KVs = slices.Delete(f.KVs, i, i+1)
	f.index()
	return v, true
}

// String returns a string value, or "" and false.
func (f *File) String(key string) (string, bool) {
	v, ok := f.Value(key)
	s, isStr := v.(string)
	return s, ok && isStr
}

// Uint returns an unsigned or non-negative integer value of any width.
func (f *File) Uint(key string) (uint64, bool) {
	v, ok := f.Value(key)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	case int8:
		return uint64(x), x >= 0
	case int16:
		return uint64(x), x >= 0
	case int32:
		return uint64(x), x >= 0
	case int64:
		return uint64(x), x >= 0
	}
	return 0, false
}

// Float returns a floating-point (or integer) value as float64.
func (f *File) Float(key string) (float64, bool) {
	v, ok := f.Value(key)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case float32:
		return float64(x), true
	case float64:
		return x, true
	}
	if u, ok := f.Uint(key); ok {
		return float64(u), true
	}
	return 0, false
}

// Bool returns a boolean value.
func (f *File) Bool(key string) (bool, bool) {
	v, ok := f.Value(key)
	b, isBool := v.(bool)
	return b, ok && isBool
}

// Array returns an array value.
func (f *File) Array(key string) (Array, bool) {
	v, ok := f.Value(key)
	a, isArr := v.(Array)
	return a, ok && isArr
}

// Keys lists metadata keys in file order.
func (f *File) Keys() []string {
	keys := make([]string, len(f.KVs))
	for i, kv := range f.KVs {
		keys[i] = kv.Key
	}
	return keys
}

// TensorTypes counts tensors per element type, sorted by type name.
func (f *File) TensorTypes() map[string]int {
	m := map[string]int{}
	for _, t := range f.Tensors {
		m[t.Type.String()]++
	}
	return m
}

func (f *File) index() {
	f.kv = make(map[string]int, len(f.KVs))
	for i, kv := range f.KVs {
		f.kv[kv.Key] = i
	}
	f.tensors = make(map[string]int, len(f.Tensors))
	for i, t := range f.Tensors {
		f.tensors[t.Name] = i
	}
}

// TensorNames lists tensor names in sorted order.
func (f *File) TensorNames() []string {
	names := make([]string, len(f.Tensors))
	for i, t := range f.Tensors {
		names[i] = t.Name
	}
	slices.Sort(names)
	return names
}
