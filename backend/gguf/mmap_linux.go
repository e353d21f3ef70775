package gguf

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"unsafe"
)

// mmapFlags maps the file shared and reads it in at once (MAP_POPULATE,
// as llama.cpp does by default): the first forward pass would otherwise
// fault in every page of the weights inside the first request's time.
const mmapFlags = syscall.MAP_SHARED | syscall.MAP_POPULATE

// release lets the kernel drop b's pages from memory (they fault in again
// from the file if read).
func release(b []byte) { syscall.Madvise(b, syscall.MADV_DONTNEED) }

// resident is the bytes of the mapping b counted in the process's
// resident set: its Rss in /proc/self/smaps. (mincore would count the
// file's pages in the page cache, mapped here or not.)
func resident(b []byte) int64 {
	if len(b) == 0 {
		return 0
	}
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		return int64(len(b))
	}
	start := uint64(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
	in := false
	for _, line := range strings.Split(string(data), "\n") {
		var lo, hi uint64
		if n, _ := fmt.Sscanf(line, "%x-%x ", &lo, &hi); n == 2 {
			in = lo == start
			continue
		}
		if in && strings.HasPrefix(line, "Rss:") {
			var kb int64
			fmt.Sscanf(strings.TrimPrefix(line, "Rss:"), "%d", &kb)
			return kb << 10
		}
	}
	return int64(len(b))
}
