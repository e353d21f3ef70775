//go:build !linux

package kernels

// hugePages is Linux's transparent huge page advice; elsewhere nothing.
func hugePages(b []byte) {}

// prefault maps b's pages now by writing a byte a page.
func prefault(b []byte) { touch(b) }
