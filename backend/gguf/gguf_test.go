package gguf

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"jspark/kernels/quant"
)

const stories = "../embedded/stories260K.gguf"

func sample(t testing.TB) []byte {
	var w Writer
	w.AddKV("general.architecture", "llama")
	w.AddKV("u8", uint8(7))
	w.AddKV("i8", int8(-7))
	w.AddKV("u16", uint16(700))
	w.AddKV("i16", int16(-700))
	w.AddKV("u32", uint32(70000))
	w.AddKV("i32", int32(-70000))
	w.AddKV("f32", float32(1.5))
	w.AddKV("bool", true)
	w.AddKV("u64", uint64(1)<<40)
	w.AddKV("i64", int64(-1)<<40)
	w.AddKV("f64", 2.25)
	w.AddKV("strs", []string{"a", "bc", ""})
	w.AddKV("f32s", []float32{1, 2, 3})
	w.AddKV("nested", []Array{{TypeInt32, []int32{1, 2}}, {TypeString, []string{"x"}}})
	w.AddTensor("a", quant.F32, []uint64{4, 2}, quant.Quantize(quant.F32, []float32{1, 2, 3, 4, 5, 6, 7, 8}))
	w.AddTensor("b", quant.Q8_0, []uint64{32}, quant.Quantize(quant.Q8_0, make([]float32, 32)))
	b, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	data := sample(t)
	f, err := Parse("sample.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	want := []KV{
		{"general.architecture", "llama"}, {"u8", uint8(7)}, {"i8", int8(-7)}, {"u16", uint16(700)},
		{"i16", int16(-700)}, {"u32", uint32(70000)}, {"i32", int32(-70000)}, {"f32", float32(1.5)},
		{"bool", true}, {"u64", uint64(1) << 40}, {"i64", int64(-1) << 40}, {"f64", 2.25},
		{"strs", Array{TypeString, []string{"a", "bc", ""}}},
		{"f32s", Array{TypeFloat32, []float32{1, 2, 3}}},
		{"nested", Array{TypeArray, []Array{{TypeInt32, []int32{1, 2}}, {TypeString, []string{"x"}}}}},
	}
	if d := cmp.Diff(want, f.KVs); d != "" {
		t.Fatalf("metadata (-want +got):\n%s", d)
	}
	a, _ := f.Tensor("a")
	if got := quant.F32s(a.Data); !cmp.Equal(got, []float32{1, 2, 3, 4, 5, 6, 7, 8}) {
		t.Fatalf("tensor a = %v", got)
	}
	if b, _ := f.Tensor("b"); b.Offset%32 != 0 || len(b.Data) != 34 {
		t.Fatalf("tensor b offset %d len %d", b.Offset, len(b.Data))
	}
	// Writing what we read gives the same bytes.
	var w Writer
	for _, kv := range f.KVs {
		w.AddKV(kv.Key, kv.Value)
	}
	for _, ti := range f.Tensors {
		w.AddTensor(ti.Name, ti.Type, ti.Dims, ti.Data)
	}
	again, _ := w.Bytes()
	if !cmp.Equal(again, data) {
		t.Fatal("re-encoding changed the bytes")
	}
}

func TestTruncatedEveryPrefix(t *testing.T) {
	data := sample(t)
	for n := 0; n < len(data); n++ {
		_, err := Parse("cut.gguf", data[:n])
		var ge *Error
		if !errors.As(err, &ge) {
			t.Fatalf("prefix %d: error %v, want *Error", n, err)
		}
		if ge.Path != "cut.gguf" || ge.Offset > uint64(len(data)) || ge.Field == "" {
			t.Fatalf("prefix %d: unhelpful error %v", n, err)
		}
	}
}

func TestErrorsNameFieldAndOffset(t *testing.T) {
	data := sample(t)
	cases := map[string]struct {
		mutate func([]byte) []byte
		want   string
	}{
		"magic":   {func(b []byte) []byte { b[0] = 'X'; return b }, "magic at offset 0: not a GGUF file"},
		"version": {func(b []byte) []byte { b[4] = 9; return b }, "version at offset 4: unsupported GGUF version 9"},
		"kvcount": {func(b []byte) []byte { b[16+7] = 0x7f; return b }, "metadata_kv_count at offset 16"},
		"short":   {func(b []byte) []byte { return b[:len(b)-10] }, "tensor b.data at offset"},
		// tensor b's type field: b's info record starts after a's
		"type":      {func(b []byte) []byte { return setType(t, b, "b", 16) }, "tensor b.type at offset"},
		"type name": {func(b []byte) []byte { return setType(t, b, "b", 16) }, "tensor type IQ2_XXS (ggml type 16) is not supported"},
		"type id":   {func(b []byte) []byte { return setType(t, b, "b", 77) }, "tensor type type(77) (ggml type 77) is not supported"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Parse("m.gguf", c.mutate(append([]byte(nil), data...)))
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "gguf: m.gguf: ") {
				t.Fatalf("error %v, want it to contain %q", err, c.want)
			}
		})
	}
}

// setType rewrites tensor name's type id in a file image.
func setType(t *testing.T, b []byte, name string, typ uint32) []byte {
	f, err := Parse("m.gguf", b)
	if err != nil {
		t.Fatal(err)
	}
	ti, _ := f.Tensor(name)
	at := ti.At + 8 + uint64(len(ti.Name)) + 4 + 8*uint64(len(ti.Dims))
	binary.LittleEndian.PutUint32(b[at:], typ)
	return b
}

func TestOpenStories(t *testing.T) {
	f, err := Open(stories)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if arch, _ := f.String("general.architecture"); arch != "llama" {
		t.Fatalf("arch %q", arch)
	}
	if n, _ := f.Uint("llama.block_count"); n != 5 {
		t.Fatalf("block_count %d", n)
	}
	emb, ok := f.Tensor("token_embd.weight")
	if !ok || emb.Dims[0] != 64 || emb.Dims[1] != 512 || emb.Type != quant.F32 {
		t.Fatalf("token_embd %+v", emb)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing.gguf")); err == nil || !strings.Contains(err.Error(), "missing.gguf") {
		t.Fatalf("missing file: %v", err)
	}
	empty := filepath.Join(dir, "empty.gguf")
	os.WriteFile(empty, nil, 0o644)
	if _, err := Open(empty); err == nil || !strings.Contains(err.Error(), "empty.gguf: magic at offset 0: file is empty") {
		t.Fatalf("empty file: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add(sample(f))
	if b, err := os.ReadFile(stories); err == nil {
		f.Add(b[:4096])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("fuzz.gguf", data)
		if err != nil {
			var ge *Error
			if !errors.As(err, &ge) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		for _, ti := range file.Tensors {
			_ = ti.Data[len(ti.Data)-1]
		}
	})
}

// fieldAt is where tensor name's info record holds field ("n_dims",
// "dims[i]", "type" or "offset") in data, a file Parse accepts.
func fieldAt(t *testing.T, data []byte, name, field string) int {
	t.Helper()
	f, err := Parse("x.gguf", data)
	if err != nil {
		t.Fatal(err)
	}
	ti, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("no tensor %s", name)
	}
	at := int(ti.At) + 8 + len(name)
	switch field {
	case "n_dims":
		return at
	case "type":
		return at + 4 + 8*len(ti.Dims)
	case "offset":
		return int(ti.offsetAt())
	}
	var d int
	if _, err := fmt.Sscanf(field, "dims[%d]", &d); err != nil {
		t.Fatalf("field %q", field)
	}
	return at + 4 + 8*d
}

// A tensor offset near 2^64 once wrapped the data-offset sum around to a
// small number and passed the bounds check.
func TestTensorOffsetWrapsAround(t *testing.T) {
	for _, off := range []uint64{1<<64 - 32, 1<<64 - 4096, 1 << 63} {
		data := sample(t)
		binary.LittleEndian.PutUint64(data[fieldAt(t, data, "b", "offset"):], off)
		_, err := Parse("wrap.gguf", data)
		var ge *Error
		if !errors.As(err, &ge) || ge.Field != "tensor b.offset" || !strings.Contains(ge.Msg, "past the end of the file") {
			t.Fatalf("offset %d: %v, want a tensor b.offset error", off, err)
		}
	}
}

// FuzzParseFields is the structure-aware twin of FuzzParse: a valid file
// whose header counts and tensor records (n_dims, dims, type, offset) take
// fuzzed values. Parse must refuse with an *Error or return tensors that
// lie inside the file.
func FuzzParseFields(f *testing.F) {
	f.Add(uint8(0), uint8(0), uint64(1<<64-32))
	f.Add(uint8(1), uint8(3), uint64(1<<40))
	f.Add(uint8(2), uint8(1), uint64(1e9))
	f.Add(uint8(1), uint8(6), uint64(3))
	base := sample(f)
	fields := []string{"n_dims", "dims[0]", "dims[1]", "type", "offset"}
	f.Fuzz(func(t *testing.T, which, field uint8, v uint64) {
		data := append([]byte(nil), base...)
		switch which % 4 {
		case 0: // a tensor's offset
			binary.LittleEndian.PutUint64(data[fieldAt(t, base, "a", "offset"):], v)
		case 1: // any field of either tensor's record
			name := []string{"a", "b"}[field%2]
			fl := fields[int(field/2)%len(fields)]
			if fl == "dims[1]" && name == "b" {
				fl = "dims[0]"
			}
			at := fieldAt(t, base, name, fl)
			if fl == "n_dims" || fl == "type" {
				binary.LittleEndian.PutUint32(data[at:], uint32(v))
			} else {
				binary.LittleEndian.PutUint64(data[at:], v)
			}
		case 2: // the header's counts
			binary.LittleEndian.PutUint64(data[8+8*int(field%2):], v)
		case 3: // the first metadata key's length
			binary.LittleEndian.PutUint64(data[24:], v)
		}
		file, err := Parse("fields.gguf", data)
		if err != nil {
			var ge *Error
			if !errors.As(err, &ge) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		for _, ti := range file.Tensors {
			size := uint64(ti.Type.RowBytes(int(ti.Dims[0]))) * (ti.Elems() / ti.Dims[0])
			if uint64(len(ti.Data)) != size || ti.Offset > uint64(len(data)) {
				t.Fatalf("tensor %s: %d bytes at offset %d, want %d inside %d", ti.Name, len(ti.Data), ti.Offset, size, len(data))
			}
		}
	})
}

func TestMemoryPlanString(t *testing.T) {
	p := MemoryPlan{Mapped: 18 << 30, Resident: 300 << 20, Packed: 17 << 30, GivenBack: 17<<30 + 512<<20, ProcessResident: 20 << 30, PackedByThisDevice: true}
	want := "memory: weights file 18.00 GiB mapped, 300.0 MiB of it resident; packed 17.00 GiB (17.50 GiB of the file given back); process resident 20.00 GiB (weights, KV cache and buffers)"
	if got := p.String(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
