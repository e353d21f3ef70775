package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCPUProfileAndKVType: --cpuprofile leaves a gzipped pprof profile;
// --kv-type f16 generates (on the embedded model, the same greedy text as
// f32 for these few tokens), and a bad type is refused by name.
func TestCPUProfileAndKVType(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	f32, stderr, code := jspark(t, "generate", "--prompt", "Once upon a time", "--max-tokens", "16", "--cpuprofile", prof, "--kv-type", "f32")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(prof)
	if err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Fatalf("profile %s: %v, %d bytes", prof, err, len(b))
	}
	f16, stderr, code := jspark(t, "generate", "--prompt", "Once upon a time", "--max-tokens", "16") // f16, the default
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if d := cmp.Diff(f32, f16); d != "" {
		t.Errorf("f16 KV text differs (-f32 +f16):\n%s", d)
	}
	_, stderr, code = jspark(t, "generate", "--kv-type", "q8_0")
	if code == 0 || !strings.Contains(stderr, `--kv-type "q8_0": want f32 or f16`) {
		t.Fatalf("exit %d: %s", code, stderr)
	}
}
