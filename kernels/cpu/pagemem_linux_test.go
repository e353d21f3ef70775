package cpu

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"jspark/kernels"
	"jspark/kernels/quant"
)

// residentPages counts the pages of the mapping b in this process's
// resident set (its Rss in /proc/self/smaps).
func residentPages(t *testing.T, b []byte) int {
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	start := uint64(uintptr(unsafe.Pointer(&b[0])))
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		var lo, hi uint64
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 {
			in = lo == start
		} else if in && strings.HasPrefix(line, "Rss:") {
			var kb int
			fmt.Sscanf(strings.TrimPrefix(line, "Rss:"), "%d", &kb)
			return kb / 4
		}
	}
	t.Fatal("the mapping is not in /proc/self/smaps")
	return 0
}

// TestPackGivesBackFilePages: once a matrix read from a file mapping is
// packed, the mapping's pages are no longer resident, and the products
// (and a later read of the file's bytes) are unchanged; a matrix in Go
// memory keeps its bytes.
func TestPackGivesBackFilePages(t *testing.T) {
	k := New(2)
	if !k.usePacked(quant.Q4_K) {
		t.Skip("no packing on this ISA")
	}
	r := rand.New(rand.NewPCG(12, 12))
	const rows, cols = 512, 1024
	data := quant.Quantize(quant.Q4_K, randVec(r, rows*cols))
	path := filepath.Join(t.TempDir(), "w.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	fd, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer fd.Close()
	mapped, err := syscall.Mmap(int(fd.Fd()), 0, len(data), syscall.PROT_READ, syscall.MAP_SHARED|syscall.MAP_POPULATE)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Munmap(mapped)
	pages := (len(mapped) + 4095) / 4096
	if n := residentPages(t, mapped); n != pages {
		t.Fatalf("%d of %d pages resident before packing", n, pages)
	}
	fileW := &kernels.Matrix{Type: quant.Q4_K, Rows: rows, Cols: cols, Data: mapped, Buf: kernels.NewHostBuffer(quant.Q4_K, rows*cols, mapped)}
	heapW := &kernels.Matrix{Type: quant.Q4_K, Rows: rows, Cols: cols, Data: data, Buf: kernels.NewHostBuffer(quant.Q4_K, rows*cols, data)}
	for _, w := range []*kernels.Matrix{fileW, heapW} {
		if err := k.Prepare(w); err != nil {
			t.Fatal(err)
		}
	}
	if n := residentPages(t, mapped); n > 1 {
		t.Fatalf("%d of %d pages still resident after packing", n, pages)
	}
	if packed, released := k.PackedMemory(); released != int64(len(data))/4096*4096 || packed < int64(len(data)) {
		t.Errorf("packed %d, released %d of a %d-byte file", packed, released, len(data))
	}
	x := randVec(r, 3*cols)
	a, b := make([]float32, 3*rows), make([]float32, 3*rows)
	k.MatMul(f32(a), f32(x), 3, fileW)
	k.MatMul(f32(b), f32(x), 3, heapW)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("output %d: %v from the file's matrix, %v from memory", i, a[i], b[i])
		}
	}
	if string(mapped) != string(data) {
		t.Fatal("the file's bytes read back differently after their pages were given back")
	}
}
