package gguf

import "syscall"

// mmapFlags maps the file shared and reads it in at once (MAP_POPULATE,
// as llama.cpp does by default): the first forward pass would otherwise
// fault in every page of the weights inside the first request's time.
const mmapFlags = syscall.MAP_SHARED | syscall.MAP_POPULATE

// release lets the kernel drop b's pages from memory (they fault in again
// from the file if read).
func release(b []byte) { syscall.Madvise(b, syscall.MADV_DONTNEED) }
