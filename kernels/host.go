package kernels

import (
	"fmt"
	"unsafe"

	"jspark/kernels/quant"
)

// HostMemory implements Memory in Go memory for host devices (ref, cpu):
// Alloc is make, Upload keeps the caller's bytes, Write and Read are copy.
// Host kernels reach the elements through HostF32, HostI32 and HostF16,
// which cost nothing over plain slices.
type HostMemory struct{}

var _ Memory = HostMemory{}

func (HostMemory) Alloc(t quant.Type, n int) (*Buffer, error) {
	if t != quant.F32 && t != quant.F16 && t != quant.I32 {
		panic(fmt.Sprintf("kernels: Alloc of %v", t))
	}
	// Allocated as words so that every view is aligned.
	words := make([]uint32, (t.RowBytes(n)+3)/4)
	b := unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), t.RowBytes(n))
	if len(b) >= hugeMin {
		hugePages(b)
	}
	return NewHostBuffer(t, n, b), nil
}

// hugeMin is the allocation size from which Alloc asks for huge pages.
const hugeMin = 4 << 20

// Prefault maps the pages of b now, on a device that keeps b in host
// memory (elsewhere it does nothing): a buffer's first writer otherwise
// takes a page fault per page, inside whatever step first writes it.
func Prefault(m Memory, b *Buffer) {
	if _, ok := m.(interface{ hostMemory() }); ok && b != nil {
		prefault(b.host)
	}
}

func (HostMemory) hostMemory() {}

// touch writes a zero to each page of b, zeroed memory.
func touch(b []byte) {
	for i := 0; i < len(b); i += 4096 {
		b[i] = 0
	}
}

func (HostMemory) Upload(t quant.Type, n int, data []byte) (*Buffer, error) {
	if len(data) < t.RowBytes(n) {
		return nil, fmt.Errorf("kernels: upload of %d %v elements from %d bytes", n, t, len(data))
	}
	return NewHostBuffer(t, n, data), nil
}

func (HostMemory) Write(dst *Buffer, off int, src []byte) {
	copy(dst.host[dst.Type.RowBytes(off):], src)
}

func (HostMemory) Read(dst []byte, src *Buffer, off int) {
	copy(dst, src.host[src.Type.RowBytes(off):])
}

// Err is nil: host memory and host kernels do not fail as a device can.
func (HostMemory) Err() error { return nil }

func (HostMemory) Free(b *Buffer) {
	*b = Buffer{Type: b.Type, Len: b.Len} // views gone: any use panics
}

// NewHostBuffer wraps host bytes holding n elements of type t.
func NewHostBuffer(t quant.Type, n int, data []byte) *Buffer {
	if len(data) < t.RowBytes(n) {
		panic(fmt.Sprintf("kernels: %d bytes for %d %v elements", len(data), n, t))
	}
	b := &Buffer{Type: t, Len: n, host: data[:t.RowBytes(n)]}
	aligned := n == 0 || uintptr(unsafe.Pointer(&data[0]))%4 == 0
	switch {
	case n == 0:
	case t == quant.F32 && aligned:
		b.f32 = unsafe.Slice((*float32)(unsafe.Pointer(&data[0])), n)
	case t == quant.I32 && aligned:
		b.i32 = unsafe.Slice((*int32)(unsafe.Pointer(&data[0])), n)
	case t == quant.F16 || t == quant.BF16:
		if uintptr(unsafe.Pointer(&data[0]))%2 == 0 {
			b.u16 = unsafe.Slice((*uint16)(unsafe.Pointer(&data[0])), n)
		}
	}
	return b
}

// HostBytes is a host buffer's encoded elements.
func HostBytes(b *Buffer) []byte { return b.host }

// HostF32 is a host F32 buffer's elements.
func HostF32(b *Buffer) []float32 {
	if b.f32 == nil && b.Len > 0 {
		panic(fmt.Sprintf("kernels: %v buffer of %d used as host F32", b.Type, b.Len))
	}
	return b.f32
}

// HostI32 is a host I32 buffer's elements.
func HostI32(b *Buffer) []int32 {
	if b.i32 == nil && b.Len > 0 {
		panic(fmt.Sprintf("kernels: %v buffer of %d used as host I32", b.Type, b.Len))
	}
	return b.i32
}

// HostF16 is a host F16 (or BF16) buffer's elements as raw bits.
func HostF16(b *Buffer) []uint16 {
	if b.u16 == nil && b.Len > 0 {
		panic(fmt.Sprintf("kernels: %v buffer of %d used as host F16", b.Type, b.Len))
	}
	return b.u16
}

// F32Bytes is the encoding of v, sharing its memory (for Write and Read).
func F32Bytes(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// I32Bytes is the encoding of v, sharing its memory.
func I32Bytes(v []int32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// Slot maps token i's position pos to its physical KV slot, reading a host
// attention's table.
func (a *Attention) Slot(i, pos int) int {
	row := int(HostI32(a.Seq)[i]) * a.TableStride
	return int(HostI32(a.Table)[row+pos/a.BlockSize])*a.BlockSize + pos%a.BlockSize
}

// HostView makes v a view of elements off..off+n-1 of the host buffer b
// (an activation type: F32, F16 or I32), sharing its memory: a kernel that
// runs another on part of a buffer reuses one view instead of allocating.
func HostView(v, b *Buffer, off, n int) {
	*v = Buffer{Type: b.Type, Len: n, host: b.host[b.Type.RowBytes(off):][:b.Type.RowBytes(n)]}
	switch {
	case b.f32 != nil:
		v.f32 = b.f32[off : off+n]
	case b.i32 != nil:
		v.i32 = b.i32[off : off+n]
	case b.u16 != nil:
		v.u16 = b.u16[off : off+n]
	}
}
