//go:build !cuda && !cudaemu

package main

import (
	"strings"
	"testing"
)

// TestDeviceFlag: --device cpu runs; cuda[:N] in a binary built without the
// cuda tag fails at once, saying how to build one; other names are refused.
func TestDeviceFlag(t *testing.T) {
	const noCUDA = "this binary was built without CUDA (build with make cuda)"
	for _, c := range []struct {
		args []string
		want string // in stderr; "" means success
	}{
		{[]string{"generate", "--device", "cpu", "--prompt", "Once", "--max-tokens", "2"}, ""},
		{[]string{"generate", "--device", "cuda", "--prompt", "Once"}, "--device cuda: " + noCUDA},
		{[]string{"generate", "--device", "cuda:1", "--prompt", "Once"}, "--device cuda:1: " + noCUDA},
		{[]string{"generate", "--device", "cuda:x"}, `--device "cuda:x": want cuda:N`},
		{[]string{"generate", "--device", "tpu"}, `--device "tpu": want cpu or cuda[:N]`},
		{[]string{"serve", "--device", "cuda", "--port", "0"}, "--device cuda: " + noCUDA},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			_, stderr, code := jspark(t, c.args...)
			if c.want == "" {
				if code != 0 {
					t.Fatalf("exit %d: %s", code, stderr)
				}
				return
			}
			if code == 0 || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, stderr %q; want a failure saying %q", code, stderr, c.want)
			}
		})
	}
}

// TestDeviceFlagHelp: every command that runs a model offers --device.
func TestDeviceFlagHelp(t *testing.T) {
	for _, cmd := range []string{"generate", "serve", "work"} {
		stdout, stderr, code := jspark(t, cmd, "--help")
		if code != 0 || !strings.Contains(stdout, "--device string") || !strings.Contains(stdout, "cuda[:N]") {
			t.Errorf("%s --help (exit %d) does not offer --device cpu|cuda[:N]:\n%s%s", cmd, code, stdout, stderr)
		}
	}
}
