//go:build !cuda && !cudaemu

package cuda

import "testing"

// TestCUDA stands in for the GPU tests, which need the cuda tag and a GPU (or the cudaemu tag):
// a default test run says so rather than passing silently.
func TestCUDA(t *testing.T) {
	t.Skip("kernels/cuda: built without the cuda tag; `make cuda` builds it, scripts/gpu-check.sh runs its tests on a machine with a GPU, make cuda-emu on the host emulator")
}
