package main

import (
	"fmt"
	"strconv"
	"strings"

	"jspark/kernels"
	"jspark/kernels/cpu"
)

// deviceFlagHelp is the --device flag's help, shared by every command that
// runs a model.
const deviceFlagHelp = "compute device: cpu, or cuda[:N] (GPU N, default 0; needs a binary built with make cuda)"

// openDevice returns the kernels --device names and a function that
// releases them. cuda[:N] needs a binary built with the cuda tag
// (device_cuda.go); without it the error says so.
func openDevice(spec string, threads int) (kernels.Kernels, func(), error) {
	switch {
	case spec == "" || spec == "cpu":
		k, err := cpu.Open(threads) // JSPARK_ISA may force an instruction set
		if err != nil {
			return nil, nil, err
		}
		return k, func() {}, nil
	case spec == "cuda" || strings.HasPrefix(spec, "cuda:"):
		ordinal := 0
		if s, ok := strings.CutPrefix(spec, "cuda:"); ok {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return nil, nil, fmt.Errorf("--device %q: want cuda:N with N a GPU number", spec)
			}
			ordinal = n
		}
		k, closeK, err := openCUDA(ordinal)
		if err != nil {
			return nil, nil, fmt.Errorf("--device %s: %w", spec, err)
		}
		return k, closeK, nil
	}
	return nil, nil, fmt.Errorf("--device %q: want cpu or cuda[:N]", spec)
}
