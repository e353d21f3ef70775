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
	isaAVXVNNI // AVX2 and VEX VPDPBUSD on ymm: AVX2's kernels, VNNI tiles
	isaAVX512
)

func (i isa) String() string { return [...]string{"go", "avx2", "avxvnni", "avx512"}[i] }

// ymm reports whether i runs the AVX2 kernels (AVX-VNNI adds tiles to
// them).
func (i isa) ymm() bool { return i == isaAVX2 || i == isaAVXVNNI }

// hasAVXVNNI: the CPU runs AVX-VNNI (not implied by AVX-512: Skylake-X
// and Ice Lake have AVX512_VNNI, not the VEX form).
var hasAVXVNNI = hasAsm && cpu.X86.HasAVXVNNI && cpu.X86.HasAVX2 && cpu.X86.HasFMA

// usable reports whether this CPU runs i.
func (i isa) usable() bool { return i <= bestISA && (i != isaAVXVNNI || hasAVXVNNI) }

// bestISA is the best instruction set this CPU runs.
var bestISA = func() isa {
	switch {
	case hasAsm && cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512BW:
		return isaAVX512
	case hasAVXVNNI:
		return isaAVXVNNI
	case hasAsm && cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return isaAVX2
	}
	return isaGo
}()

// ISAEnv is the environment variable that forces an instruction set:
// avx512, avxvnni, avx2 or go (a CPU that has AVX-512 runs all but
// avxvnni, which needs AVX-VNNI: Intel Alder Lake and later, AMD Zen 5),
// so that one machine can test and measure every path; avx2 is pure
// AVX2 (no VNNI). Unset or empty: the best.
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
			if !i.usable() {
				return bestISA, fmt.Errorf("%s=%s: this CPU has no AVX-VNNI", ISAEnv, s)
			}
			return i, nil
		}
	}
	return bestISA, fmt.Errorf("%s=%q: want avx512, avxvnni, avx2 or go", ISAEnv, s)
}

// Open is New with ISAEnv's value checked: an unknown instruction set, or
// one this CPU lacks, is an error rather than a quiet fallback.
func Open(threads int) (*Kernels, error) {
	if envErr != nil {
		return nil, envErr
	}
	return New(threads), nil
}
