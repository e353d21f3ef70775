package kernels

import "golang.org/x/sys/unix"

// hugePages asks for b to be backed by transparent huge pages (2 MiB): the
// first step that writes a large buffer (a KV pool) then takes one page
// fault per 2 MiB instead of one per 4 KiB, which on a virtual machine
// cost ~10 µs each (0.5 s of a 4,000-token prompt's keys and values), and
// attention over a long context misses the TLB less.
func hugePages(b []byte) {
	if len(b) > 0 {
		_ = unix.Madvise(b, unix.MADV_HUGEPAGE) // advice: refused is fine
	}
}

// prefault maps b's pages now (MADV_POPULATE_WRITE, Linux 5.14), else by
// writing a byte a page.
func prefault(b []byte) {
	if len(b) > 0 && unix.Madvise(b, unix.MADV_POPULATE_WRITE) != nil {
		touch(b)
	}
}
