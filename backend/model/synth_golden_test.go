package model

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"jspark/backend/gguf"
	"jspark/kernels/quant"
)

var updateSynth = flag.Bool("update-synth", false, "record testdata/synth-sha256.tsv from today's Synth")

// goldenSynth is the models whose bytes testdata/synth-sha256.tsv pins:
// every architecture in four types and mixes, small enough to write
// in milliseconds.
func goldenSynth(t *testing.T) map[string]SynthOptions {
	t.Helper()
	vocab, err := gguf.Open(filepath.Join("..", "..", "testdata", "vocab", "ggml-vocab-llama-spm.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { vocab.Close() })
	cases := map[string]SynthOptions{}
	for _, arch := range Archs() {
		types := []string{"f32", "q8_0", "q4_k_m", "mxfp4"}
		if arch == "llama" {
			types = append(types, "iq4_xs", "q3_k_m")
		}
		for _, typ := range types {
			mix, err := ParseMix(typ)
			if err != nil {
				t.Fatal(err)
			}
			o := SynthOptions{Arch: arch, Layers: 4, Dim: 256, Heads: 4, KVHeads: 2, FF: 256, Mix: mix, Seed: 11}
			DefaultMoE(&o)
			cases[arch+"/"+typ] = o
		}
	}
	o := SynthOptions{Arch: "llama", Layers: 1, Dim: 64, Heads: 8, KVHeads: 2, FF: 96, Type: quant.Q8_0, Seed: 3, Vocab: vocab, Context: 65536}
	cases["llama/q8_0/spm-vocab"] = o
	o = SynthOptions{Arch: "qwen3", Layers: 1, Dim: 64, Heads: 2, FF: 96, Type: quant.Q5_1, Seed: 2, TextVocab: true}
	cases["qwen3/q5_1/text-vocab"] = o
	return cases
}

// TestSynthBytesUnchanged: Synth writes the same bytes, option for option,
// as when testdata/synth-sha256.tsv was recorded (go test -update-synth),
// so that files written once (the benchmarks' models, a peer's reference
// outputs) stay the files the tests describe.
func TestSynthBytesUnchanged(t *testing.T) {
	path := filepath.Join("testdata", "synth-sha256.tsv")
	cases := goldenSynth(t)
	got := map[string]string{}
	for name, o := range cases {
		w, err := Synth(o)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := w.Bytes()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		sum := sha256.Sum256(b)
		got[name] = hex.EncodeToString(sum[:])
	}
	if *updateSynth {
		var sb strings.Builder
		for _, name := range slices.Sorted(maps.Keys(got)) {
			fmt.Fprintf(&sb, "%s\t%s\n", name, got[name])
		}
		if err := os.WriteFile(path, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, sum, ok := strings.Cut(sc.Text(), "\t")
		if !ok {
			t.Fatalf("%s: line %q", path, sc.Text())
		}
		want[name] = sum
	}
	if len(want) != len(got) {
		t.Errorf("%s holds %d models, the test writes %d", path, len(want), len(got))
	}
	for name, sum := range got {
		if want[name] != sum {
			t.Errorf("%s: sha256 %s, recorded %s", name, sum, want[name])
		}
	}
}
