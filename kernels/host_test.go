package kernels_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"jspark/kernels"
	"jspark/kernels/quant"
)

func TestHostMemory(t *testing.T) {
	var m kernels.HostMemory
	b, err := m.Alloc(quant.F32, 6)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(make([]float32, 6), kernels.HostF32(b)); d != "" {
		t.Fatalf("not zeroed: %s", d)
	}
	m.Write(b, 2, kernels.F32Bytes([]float32{1, 2, 3}))
	got := make([]float32, 4)
	m.Read(kernels.F32Bytes(got), b, 1)
	if d := cmp.Diff([]float32{0, 1, 2, 3}, got); d != "" {
		t.Fatalf("read back (-want +got):\n%s", d)
	}
	ids, _ := m.Alloc(quant.I32, 3)
	m.Write(ids, 0, kernels.I32Bytes([]int32{7, -1, 9}))
	if d := cmp.Diff([]int32{7, -1, 9}, kernels.HostI32(ids)); d != "" {
		t.Fatal(d)
	}
	h, _ := m.Alloc(quant.F16, 5)
	if len(kernels.HostF16(h)) != 5 || h.Bytes() != 10 {
		t.Fatalf("F16 buffer: %d elements, %d bytes", len(kernels.HostF16(h)), h.Bytes())
	}
	// Upload keeps the caller's bytes: a host device reads weights in place.
	w := quant.Quantize(quant.Q8_0, make([]float32, 64))
	wb, err := m.Upload(quant.Q8_0, 64, w)
	if err != nil || &kernels.HostBytes(wb)[0] != &w[0] {
		t.Fatalf("upload copied or failed: %v", err)
	}
	if _, err := m.Upload(quant.Q8_0, 96, w); err == nil {
		t.Fatal("upload of more elements than bytes hold succeeded")
	}
	m.Free(b)
	defer func() {
		if recover() == nil {
			t.Fatal("a freed buffer was still readable")
		}
	}()
	kernels.HostF32(b)
}
