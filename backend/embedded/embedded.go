// Package embedded carries the default model inside the binary.
package embedded

import (
	_ "embed"
	"unsafe"

	"jspark/backend/gguf"
)

// Name is the file name the embedded model reports as its path.
const Name = "embedded:stories260K.gguf"

//go:embed stories260K.gguf
var image string

// SHA256 of the embedded file, as published in README.md beside it.
const SHA256 = "047bf46455a544931cff6fef14d7910154c56afbc23ab1c5e56a72e69912c04b"

// Open parses the embedded model. The bytes are copied once into 8-byte
// aligned memory so that F32 tensors can be used in place.
func Open() (*gguf.File, error) {
	words := make([]uint64, (len(image)+7)/8)
	buf := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)[:len(image)]
	copy(buf, image)
	return gguf.Parse(Name, buf)
}

// Bytes returns the embedded file.
func Bytes() []byte { return []byte(image) }
