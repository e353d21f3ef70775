package model

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"jspark/backend/gguf"
	"jspark/kernels/cpu"
)

// vmRSS is the process's resident set (VmRSS), in bytes.
func vmRSS(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			var kb int64
			for _, c := range f[1] {
				kb = kb*10 + int64(c-'0')
			}
			return kb << 10
		}
	}
	t.Skip("no VmRSS")
	return 0
}

// TestLoadedModelFitsItsFile: a model loaded from a file is held once.
// Where the device packs its weights (AVX-512), the file's pages of each
// packed matrix are given back, so the mapping's resident pages plus the
// packed copies stay within the file's size + 10 %, and so does the
// growth of the process's resident set (no KV pool or step buffers yet).
func TestLoadedModelFitsItsFile(t *testing.T) {
	for _, c := range []struct {
		name string
		o    SynthOptions
	}{
		{"llama q4_k_m", SynthOptions{Arch: "llama", Layers: 2, Dim: 1024, Heads: 8, KVHeads: 4, FF: 2816, Seed: 1}},
		// every expert a matrix of its own, packed from its slice of the file
		{"qwen3moe q4_k_m", SynthOptions{Arch: "qwen3moe", Layers: 2, Dim: 512, Heads: 8, KVHeads: 4, FF: 1024, Seed: 2,
			Experts: 16, ExpertsUsed: 2, ExpertFF: 512}},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.o
			o.Mix, _ = ParseMix("q4_k_m")
			w, err := Synth(o)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "m.gguf")
			if err := w.WriteFile(path); err != nil {
				t.Fatal(err)
			}
			runtime.GC()
			before := vmRSS(t)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			k := cpu.New(2)
			if _, err := Load(f, k); err != nil {
				t.Fatal(err)
			}
			grown := vmRSS(t) - before
			file, resident := f.Mapped(), f.Resident()
			packed, released := k.PackedMemory()
			t.Logf("file %.1f MiB: resident %.1f MiB, packed %.1f MiB, given back %.1f MiB; VmRSS grew %.1f MiB",
				mib(file), mib(resident), mib(packed), mib(released), mib(grown))
			if held := resident + packed; float64(held) > 1.1*float64(file) {
				t.Errorf("the weights take %.1f MiB (mapped and resident %.1f + packed %.1f) for a %.1f MiB file", mib(held), mib(resident), mib(packed), mib(file))
			}
			if slack := int64(4 << 20); float64(grown) > 1.1*float64(file)+float64(slack) {
				t.Errorf("VmRSS grew %.1f MiB loading a %.1f MiB file", mib(grown), mib(file))
			}
			if packed > 0 && released < file*8/10 {
				t.Errorf("packed %.1f MiB but gave back only %.1f MiB of the file", mib(packed), mib(released))
			}
		})
	}
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
