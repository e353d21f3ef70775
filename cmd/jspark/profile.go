package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"jspark/kernels/quant"
)

// startCPUProfile writes a CPU profile of the command to path ("" does
// nothing) until the returned stop runs; `go tool pprof` reads it.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpuprofile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// profiled runs run, writing a CPU profile of it to path when one is
// named (--cpuprofile).
func profiled(path string, run func() error) error {
	stop, err := startCPUProfile(path)
	if err != nil {
		return err
	}
	defer stop()
	return run()
}

// parseKVType reads --kv-type: the element type of the KV cache.
func parseKVType(s string) (quant.Type, error) {
	switch s {
	case "f32", "F32":
		return quant.F32, nil
	case "f16", "F16":
		return quant.F16, nil
	}
	return 0, fmt.Errorf("--kv-type %q: want f32 or f16", s)
}
