package cpu

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/cpu"
)

// isa is the instruction set the kernels use, chosen once at start.
type isa int

const (
	isaGo isa = iota
	isaAVX2
	isaAVX512
)

func (i isa) String() string { return [...]string{"go", "avx2", "avx512"}[i] }

// bestISA is the best instruction set this CPU runs.
var bestISA = func() isa {
	switch {
	case hasAsm && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512BW:
		return isaAVX512
	case hasAsm && cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return isaAVX2
	}
	return isaGo
}()

// ISAEnv is the environment variable that forces an instruction set:
// avx512, avx2 or go (a CPU that has AVX-512 runs all three), so that one
// machine can test and measure every path. Unset or empty: the best.
const ISAEnv = "JSPARK_ISA"

// envISA is what New uses: ISAEnv's choice, else the best; envErr says
// why ISAEnv's value cannot be used (Open reports it).
var envISA, envErr = parseISA(os.Getenv(ISAEnv))

// parseISA reads an ISAEnv value.
func parseISA(s string) (isa, error) {
	if s == "" {
		return bestISA, nil
	}
	for i := isaGo; i <= isaAVX512; i++ {
		if strings.EqualFold(s, i.String()) {
			if i > bestISA {
				return bestISA, fmt.Errorf("%s=%s: this CPU runs at most %v", ISAEnv, s, bestISA)
			}
			return i, nil
		}
	}
	return bestISA, fmt.Errorf("%s=%q: want avx512, avx2 or go", ISAEnv, s)
}

// Open is New with ISAEnv's value checked: an unknown instruction set, or
// one this CPU lacks, is an error rather than a quiet fallback.
func Open(threads int) (*Kernels, error) {
	if envErr != nil {
		return nil, envErr
	}
	return New(threads), nil
}
