//go:build cuda

package cuda

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"

	"jspark/kernels"
	"jspark/kernels/quant"
)

// Alloc returns n zeroed elements of t in device memory.
func (d *Device) Alloc(t quant.Type, n int) (*kernels.Buffer, error) {
	if t != quant.F32 && t != quant.F16 && t != quant.I32 {
		return nil, fmt.Errorf("cuda: Alloc of %v", t)
	}
	defer d.enter()()
	size := int64(max(t.RowBytes(n), 4))
	p, err := cu.MemAlloc(size)
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: allocating %d bytes: %w", d.name, size, err)
	}
	if err := cu.MemsetD8Async(p, 0, size, d.stream); err != nil {
		cu.MemFree(p)
		return nil, fmt.Errorf("cuda: %s: clearing %d bytes: %w", d.name, size, err)
	}
	return &kernels.Buffer{Type: t, Len: n, Dev: p}, nil
}

// Upload copies n elements of t into device memory, once, at load. Weight
// types without kernels here are refused, naming the type, so that a model
// the device cannot run fails when it loads.
func (d *Device) Upload(t quant.Type, n int, data []byte) (*kernels.Buffer, error) {
	if _, ok := weightKernels[t]; !ok && t != quant.I32 {
		return nil, fmt.Errorf("cuda: no kernels for %v weights", t)
	}
	size := t.RowBytes(n)
	if len(data) < size {
		return nil, fmt.Errorf("cuda: upload of %d %v elements from %d bytes", n, t, len(data))
	}
	defer d.enter()()
	p, err := cu.MemAlloc(int64(max(size, 4)))
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: allocating %d bytes for weights: %w", d.name, size, err)
	}
	if size > 0 {
		if err := cu.MemcpyHtoD(p, unsafe.Pointer(&data[0]), int64(size)); err != nil {
			cu.MemFree(p)
			return nil, fmt.Errorf("cuda: %s: uploading %d bytes: %w", d.name, size, err)
		}
	}
	return &kernels.Buffer{Type: t, Len: n, Dev: p}, nil
}

// Write queues a copy of src into dst from element off on. The driver
// stages pageable memory before it returns, so src may be reused at once.
func (d *Device) Write(dst *kernels.Buffer, off int, src []byte) {
	if len(src) == 0 {
		return
	}
	d.checkRange("Write", dst, off, len(src))
	defer d.enter()()
	p := cu.DevicePtr(ptr(dst) + uint64(dst.Type.RowBytes(off)))
	if err := cu.MemcpyHtoDAsync(p, unsafe.Pointer(&src[0]), int64(len(src)), d.stream); err != nil {
		panic(fmt.Errorf("cuda: %s: Write of %d bytes: %w", d.name, len(src), err))
	}
}

// Read copies len(dst) bytes of src from element off on, after every
// earlier call on the stream has finished.
func (d *Device) Read(dst []byte, src *kernels.Buffer, off int) {
	if len(dst) == 0 {
		return
	}
	d.checkRange("Read", src, off, len(dst))
	defer d.enter()()
	p := cu.DevicePtr(ptr(src) + uint64(src.Type.RowBytes(off)))
	if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), p, int64(len(dst)), d.stream); err != nil {
		panic(fmt.Errorf("cuda: %s: Read of %d bytes: %w", d.name, len(dst), err))
	}
	if err := d.stream.Synchronize(); err != nil {
		// A kernel that faulted earlier in the step surfaces here.
		panic(fmt.Errorf("cuda: %s: %w", d.name, err))
	}
}

// Free releases b's device memory.
func (d *Device) Free(b *kernels.Buffer) {
	p, ok := b.Dev.(cu.DevicePtr)
	if !ok {
		return
	}
	defer d.enter()()
	cu.MemFree(p)
	b.Dev = nil
}

func (d *Device) checkRange(op string, b *kernels.Buffer, off, n int) {
	if off < 0 || b.Type.RowBytes(off)+n > b.Type.RowBytes(b.Len) {
		panic(fmt.Sprintf("cuda: %s of %d bytes at element %d of a %v buffer of %d", op, n, off, b.Type, b.Len))
	}
}

// Sync waits for every queued call to finish (for timing).
func (d *Device) Sync() error {
	defer d.enter()()
	return d.stream.Synchronize()
}

// MemGiB is the device's free and total memory in GiB.
func (d *Device) MemGiB() (free, total float64, err error) {
	defer d.enter()()
	f, t, err := cu.MemInfo()
	return float64(f) / (1 << 30), float64(t) / (1 << 30), err
}
