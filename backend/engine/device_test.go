//go:build cuda || cudaemu

package engine

import (
	"testing"

	"jspark/kernels/cuda"
)

// TestHybridTurnsOnDevice: TestHybridTurns, two conversations of two
// turns, on the CUDA device (or its emulator: minutes): gemma3's block
// tables per KV group and qwen35's state checkpoints, written into the
// pages of the device's store and read back, resume each turn with
// Generate's ids on that device. The models are 128 wide: the device's
// delta rule takes heads of whole warps.
func TestHybridTurnsOnDevice(t *testing.T) {
	d, err := cuda.New(0)
	if err != nil {
		t.Skipf("no usable GPU: %v", err)
	}
	for _, arch := range []string{"gemma3", "qwen35"} {
		t.Run(arch, func(t *testing.T) { checkTurns(t, hybridModelOn(t, arch, d, 128), 2, 2) })
	}
}
