package gguf

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"jspark/kernels/quant"
)

// TestNamesPastTheSpecAreRefused: a metadata key over the specification's
// 65,535 bytes or a tensor name over its 64 is an *Error naming the field
// and its offset, before the name is copied; names at the bounds read.
func TestNamesPastTheSpecAreRefused(t *testing.T) {
	tensor := func(name string) *Writer {
		var w Writer
		w.AddKV("general.architecture", "llama")
		w.AddTensor(name, quant.F32, []uint64{1}, quant.Quantize(quant.F32, []float32{1}))
		return &w
	}
	key := func(k string) *Writer {
		var w Writer
		w.AddKV(k, "v")
		return &w
	}
	for _, c := range []struct {
		name  string
		w     *Writer
		field string // "": reads
	}{
		{"key of 65,535 bytes", key(strings.Repeat("k", 65535)), ""},
		{"key of 65,536 bytes", key(strings.Repeat("k", 65536)), "metadata[0].key"},
		{"key of 32 MiB", key(strings.Repeat("k", 32<<20)), "metadata[0].key"},
		{"tensor name of 64 bytes", tensor(strings.Repeat("t", 64)), ""},
		{"tensor name of 65 bytes", tensor(strings.Repeat("t", 65)), "tensor[0].name"},
	} {
		data, err := c.w.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		_, err = Parse("names.gguf", data)
		var e *Error
		switch {
		case c.field == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.field != "" && (!errors.As(err, &e) || e.Field != c.field || !strings.Contains(e.Msg, "over the")):
			t.Errorf("%s: %v; want an error at %s", c.name, err, c.field)
		}
	}
}

// TestTakeLetsAHugeValueGo: a 50 MiB string value taken out of a file is
// no longer held by it (the server takes the chat template, compiles or
// refuses it, and keeps neither copy).
func TestTakeLetsAHugeValueGo(t *testing.T) {
	f := func() *File {
		var w Writer
		w.AddKV("general.architecture", "llama")
		w.AddKV("tokenizer.chat_template", strings.Repeat("x", 50<<20))
		data, err := w.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		f, err := Parse("big.gguf", data)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}()
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	held := heap()
	v, ok := f.Take("tokenizer.chat_template")
	if s, _ := v.(string); !ok || len(s) != 50<<20 {
		t.Fatalf("took %T of %d bytes", v, len(v.(string)))
	}
	v = nil
	if after := heap(); after+40<<20 > held {
		t.Fatalf("the file still holds the value: heap %d MiB before taking it, %d after", held>>20, after>>20)
	}
	if _, ok := f.String("tokenizer.chat_template"); ok || len(f.KVs) != 1 || f.Keys()[0] != "general.architecture" {
		t.Fatalf("after Take: %v", f.Keys())
	}
	runtime.KeepAlive(f)
}
