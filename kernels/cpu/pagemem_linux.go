package cpu

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// packMemory returns n zeroed bytes for a packed matrix, mapped outside
// the Go heap: packed weights are most of a process's memory, and counted
// in the heap they would let the collector's target (GOGC) grow by as much
// again before it ran. Large ones are advised onto huge pages (fewer TLB
// misses when a decode streams them). They are never unmapped: a model's
// weights live as long as the process.
func packMemory(n int) []byte {
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		return make([]byte, n)
	}
	if n >= 4<<20 {
		_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
	}
	// Faulted in at once rather than a page at a time by the packer's
	// writes (a 4 KiB fault costs ~10 µs on a virtual machine).
	_ = unix.Madvise(b, unix.MADV_POPULATE_WRITE)
	return b
}

// releaseSource gives back the pages of b, a matrix's bytes as the file
// encodes them, once its packed copy is made, and returns how many bytes
// it gave back. Only whole pages of a read-only mapping of a file are
// given back (MADV_DONTNEED): a later read of them, if any, faults them in
// again from the file. Anything else (Go memory, a private writable
// mapping) is left alone, for there DONTNEED would lose the bytes.
func releaseSource(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	page := uintptr(os.Getpagesize())
	start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	end := start + uintptr(len(b))
	lo, hi := (start+page-1)&^(page-1), end&^(page-1)
	if hi <= lo || !fileMapped(start, end) {
		return 0
	}
	if unix.Madvise(b[lo-start:hi-start], unix.MADV_DONTNEED) != nil {
		return 0
	}
	return int(hi - lo)
}

// fileMapped reports whether [start, end) lies in one read-only mapping
// of a file, by /proc/self/maps (read each call: mappings come and go).
func fileMapped(start, end uintptr) bool {
	data, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		// 7f00-7f80 r--s 00000000 08:01 1234   /path/to/model.gguf
		f := bytes.Fields(sc.Bytes())
		if len(f) < 6 || f[5][0] != '/' || bytes.IndexByte(f[1], 'w') >= 0 {
			continue
		}
		dash := bytes.IndexByte(f[0], '-')
		if dash < 0 {
			continue
		}
		a, err1 := strconv.ParseUint(string(f[0][:dash]), 16, 64)
		z, err2 := strconv.ParseUint(string(f[0][dash+1:]), 16, 64)
		if err1 == nil && err2 == nil && uintptr(a) <= start && end <= uintptr(z) {
			return true
		}
	}
	return false
}
