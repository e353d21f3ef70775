package engine

import (
	"strings"
	"testing"
)

// TestStartupLineByKind: the start-up line says the cache by layer kind:
// gemma3's full layer and its five sliding ones (window 20: 3 blocks),
// qwen35's full layer and its recurrent ones' state slots and checkpoint
// pages; a plain model's line stays in tokens.
func TestStartupLineByKind(t *testing.T) {
	for _, c := range []struct{ arch, want string }{
		{"gemma3", "jspark engine: gemma3, KV cache 1536 pages of 16 tokens × 1 layer (6.0 MiB), 6 groups, context 32768 (the model states 4096; running beyond it); " +
			"full attention: 1 layer, up to 24256 tokens a sequence; sliding window 20: 5 layers, 48 tokens a sequence\n"},
		{"qwen35", "jspark engine: qwen35, KV cache 256 pages of 16 tokens × 1 layer (1.0 MiB), 1 group, context 32768 (the model states 4096; running beyond it); " +
			"full attention: 1 layer, up to 4096 tokens a sequence; recurrent: 3 layers, 64 state slots (1.0 MiB: at most 64 sequences at once), checkpoints of 5 pages\n"},
		{"llama", "jspark engine: llama, KV cache 4096 tokens (256 blocks of 16, 0.2 MiB), context 131072\n"},
	} {
		t.Run(c.arch, func(t *testing.T) {
			m := tinyModel(t, 16, 1)
			if c.arch != "llama" {
				m = hybridModel(t, c.arch)
			}
			var b strings.Builder
			newEngine(t, m, func(o *Options) { o.Log, o.KVBlocks = &b, 256 })
			if b.String() != c.want {
				t.Fatalf("start-up line\n%q\nwant\n%q", b.String(), c.want)
			}
		})
	}
}
