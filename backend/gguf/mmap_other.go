//go:build !linux

package gguf

import "syscall"

// mmapFlags maps the file shared; its pages fault in on first use.
const mmapFlags = syscall.MAP_SHARED

// release leaves b's pages to the system.
func release(b []byte) {}

// resident is not measured off Linux: the whole mapping counts.
func resident(b []byte) int64 { return int64(len(b)) }
