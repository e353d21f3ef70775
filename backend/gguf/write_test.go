package gguf

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"jspark/kernels/quant"
)

// TestStreamedSameBytes: tensors given by producers encode to the bytes of
// the same tensors given whole, through Bytes and WriteFile alike, and each
// producer runs once per write, in order.
func TestStreamedSameBytes(t *testing.T) {
	vals := func(n int, k float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = k * float32(i%17-8)
		}
		return v
	}
	tensors := []struct {
		name string
		typ  quant.Type
		dims []uint64
		data []byte
	}{
		{"a", quant.F32, []uint64{3}, quant.Quantize(quant.F32, vals(3, 1))}, // 12 bytes: padded to 32
		{"b", quant.Q8_0, []uint64{64, 3}, quant.Quantize(quant.Q8_0, vals(192, 0.1))},
		{"c", quant.Q4_K, []uint64{256, 2, 2}, quant.Quantize(quant.Q4_K, vals(1024, 0.01))},
		{"d", quant.F16, []uint64{5}, quant.Quantize(quant.F16, vals(5, 2))},
	}
	var whole, streamed Writer
	var calls []string
	for _, w := range []*Writer{&whole, &streamed} {
		w.AddKV("general.architecture", "llama")
		w.AddKV("general.alignment", uint32(32))
	}
	for _, tc := range tensors {
		whole.AddTensor(tc.name, tc.typ, tc.dims, tc.data)
		streamed.AddTensorFunc(tc.name, tc.typ, tc.dims, func() ([]byte, error) {
			calls = append(calls, tc.name)
			return bytes.Clone(tc.data), nil
		})
	}
	want, err := whole.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	got, err := streamed.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("streamed tensors encode differently")
	}
	path := filepath.Join(t.TempDir(), "s.gguf")
	if err := streamed.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	if file, _ := os.ReadFile(path); !bytes.Equal(file, want) {
		t.Fatal("WriteFile wrote other bytes")
	}
	if got := strings.Join(calls, ""); got != "abcdabcd" {
		t.Fatalf("producers ran %q, want abcd once per write", got)
	}
	if _, err := Parse("s.gguf", got); err != nil {
		t.Fatal(err)
	}
}

// TestStreamedErrors: a producer's failure, a wrong size and a type that
// cannot encode the dims are errors naming the tensor, and WriteFile
// leaves no partial file behind.
func TestStreamedErrors(t *testing.T) {
	boom := errors.New("boom")
	for _, c := range []struct {
		name    string
		typ     quant.Type
		dims    []uint64
		produce func() ([]byte, error)
		want    string
	}{
		{"fails", quant.F32, []uint64{4}, func() ([]byte, error) { return nil, boom }, "gguf: tensor fails: boom"},
		{"short", quant.Q8_0, []uint64{32, 2}, func() ([]byte, error) { return make([]byte, 34), nil }, "gguf: tensor short: produced 34 bytes, want 68 (Q8_0 of dims [32 2])"},
		{"ragged", quant.Q4_K, []uint64{100}, func() ([]byte, error) { return nil, nil }, "gguf: tensor ragged: type Q4_K does not encode dims [100]"},
		{"nodims", quant.F32, nil, func() ([]byte, error) { return nil, nil }, "gguf: tensor nodims: type F32 does not encode dims []"},
		{"unknown", quant.Type(99), []uint64{32}, func() ([]byte, error) { return nil, nil }, "gguf: tensor unknown: type"},
		{"align0", quant.F32, []uint64{4}, func() ([]byte, error) { return make([]byte, 16), nil }, "gguf: metadata general.alignment 0"},
		{"overflow", quant.F32, []uint64{1 << 20, 1 << 30, 1 << 20}, func() ([]byte, error) { return nil, nil }, "gguf: tensor overflow: type F32 does not encode dims"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var w Writer
			w.AddKV("general.architecture", "llama")
			if c.name == "align0" {
				w.AddKV("general.alignment", uint32(0))
			}
			w.AddTensor("first", quant.F32, []uint64{1}, make([]byte, 4))
			w.AddTensorFunc(c.name, c.typ, c.dims, c.produce)
			if _, err := w.Bytes(); err == nil || !strings.HasPrefix(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
			path := filepath.Join(t.TempDir(), "x.gguf")
			if err := w.WriteFile(path); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("WriteFile: error %v, want %q", err, c.want)
			}
			if _, err := os.Stat(path); !os.IsNotExist(err) {
				t.Fatalf("WriteFile left %s behind (%v)", path, err)
			}
		})
	}
}
