//go:build cuda || cudaemu

package cuda

import (
	"fmt"

	"jspark/kernels"
	"jspark/kernels/quant"
)

// Alloc returns n zeroed elements of t in device memory.
func (d *Device) Alloc(t quant.Type, n int) (*kernels.Buffer, error) {
	if t != quant.F32 && t != quant.F16 && t != quant.I32 {
		return nil, fmt.Errorf("cuda: Alloc of %v", t)
	}
	p, err := d.rt.alloc(t.RowBytes(n))
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: %w", d.rt.name(), err)
	}
	return &kernels.Buffer{Type: t, Len: n, Dev: devPtr(p)}, nil
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
	p, err := d.rt.alloc(size)
	if err != nil {
		return nil, fmt.Errorf("cuda: %s: weights: %w", d.rt.name(), err)
	}
	if err := d.rt.upload(p, data[:size]); err != nil {
		d.rt.free(p)
		return nil, fmt.Errorf("cuda: %s: uploading %d bytes: %w", d.rt.name(), size, err)
	}
	return &kernels.Buffer{Type: t, Len: n, Dev: devPtr(p)}, nil
}

// Write queues a copy of src into dst from element off on; src may be
// reused as soon as Write returns. A refused copy is the device's failure
// (Err).
func (d *Device) Write(dst *kernels.Buffer, off int, src []byte) {
	if len(src) == 0 {
		return
	}
	d.checkRange("Write", dst, off, len(src))
	if d.err != nil {
		return
	}
	if err := d.rt.write(ptr(dst)+uint64(dst.Type.RowBytes(off)), src); err != nil {
		d.fail(fmt.Errorf("cuda: %s: Write of %d bytes: %w", d.rt.name(), len(src), err))
	}
}

// Read copies len(dst) bytes of src from element off on, after every
// earlier call has finished. A failed copy, or an earlier kernel's fault,
// which surfaces here, is the device's failure (Err) and leaves dst as it
// was.
func (d *Device) Read(dst []byte, src *kernels.Buffer, off int) {
	if len(dst) == 0 {
		return
	}
	d.checkRange("Read", src, off, len(dst))
	if d.err != nil {
		return
	}
	if err := d.rt.read(dst, ptr(src)+uint64(src.Type.RowBytes(off))); err != nil {
		d.fail(fmt.Errorf("cuda: %s: Read of %d bytes: %w", d.rt.name(), len(dst), err))
	}
}

// Free releases b's device memory.
func (d *Device) Free(b *kernels.Buffer) {
	if p, ok := b.Dev.(devPtr); ok {
		d.rt.free(uint64(p))
		b.Dev = nil
	}
}

func (d *Device) checkRange(op string, b *kernels.Buffer, off, n int) {
	if off < 0 || b.Type.RowBytes(off)+n > b.Type.RowBytes(b.Len) {
		panic(fmt.Sprintf("cuda: %s of %d bytes at element %d of a %v buffer of %d", op, n, off, b.Type, b.Len))
	}
}

// Sync waits for every queued call to finish (for timing) and returns the
// device's failure, as Err does.
func (d *Device) Sync() error {
	if d.err == nil {
		if err := d.rt.sync(); err != nil {
			d.fail(fmt.Errorf("cuda: %s: synchronising: %w", d.rt.name(), err))
		}
	}
	return d.Err()
}
