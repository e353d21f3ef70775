package gguf

import (
	"fmt"
	"os"
	"strings"
)

// MemoryPlan is where a loaded model's weights lie: the file's mapping
// (and how much of it is resident), the copies a device made in its own
// layout, the file's pages it gave back once it had them, and the whole
// process's resident set (weights, KV cache and buffers).
type MemoryPlan struct {
	Mapped, Resident   int64 // the file's mapping; its bytes in memory now
	Packed, GivenBack  int64 // the device's own copies; the file's bytes it dropped
	ProcessResident    int64 // VmRSS, 0 where unknown
	PackedByThisDevice bool  // the device reports packing (else Packed is 0 by nature)
}

// packer is a device that packs weights (kernels/cpu).
type packer interface {
	PackedMemory() (packed, givenBack int64)
}

// MemoryPlan measures f's plan after a model was loaded from it onto
// device (any kernels; one that packs reports what it packed).
func (f *File) MemoryPlan(device any) MemoryPlan {
	p := MemoryPlan{Mapped: f.Mapped(), Resident: f.Resident(), ProcessResident: vmRSS()}
	if pk, ok := device.(packer); ok {
		p.Packed, p.GivenBack = pk.PackedMemory()
		p.PackedByThisDevice = true
	}
	return p
}

func (p MemoryPlan) String() string {
	gib := func(n int64) string {
		if n < 1<<30 {
			return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
		}
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "memory: weights file %s mapped, %s of it resident", gib(p.Mapped), gib(p.Resident))
	if p.PackedByThisDevice && p.Packed > 0 {
		fmt.Fprintf(&b, "; packed %s (%s of the file given back)", gib(p.Packed), gib(p.GivenBack))
	}
	if p.ProcessResident > 0 {
		fmt.Fprintf(&b, "; process resident %s (weights, KV cache and buffers)", gib(p.ProcessResident))
	}
	return b.String()
}

// vmRSS is the process's resident set from /proc/self/status, 0 where
// there is none.
func vmRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			fmt.Sscanf(rest, "%d", &kb)
			return kb << 10
		}
	}
	return 0
}
