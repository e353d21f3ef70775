//go:build cudaemu && !cuda

package cuda

// #cgo CXXFLAGS: -std=c++17 -O2
// #include <stdint.h>
// #include <stdlib.h>
// #include <string.h>
// int emu_launch(const char *name, int gx, int gy, int block, const uint64_t *args, int nargs);
import "C"

import (
	"fmt"
	"unsafe"
)

// New returns the host emulator (tag cudaemu): the kernels' CUDA C compiled
// as C++ (emu.cpp over emu.h) and run with every GPU thread a fiber, so the
// device's Go code, launch shapes and kernels are tested on a machine with
// no GPU. Device memory is C memory; everything runs synchronously.
func New(ordinal int) (*Device, error) {
	if ordinal != 0 {
		return nil, fmt.Errorf("cuda: the emulator has only GPU 0")
	}
	return newDevice(&emulator{names: map[string]*C.char{}})
}

type emulator struct {
	names map[string]*C.char // kernel names as C strings, made once
}

func (e *emulator) name() string { return "cudaemu (host emulator)" }

func (e *emulator) kernel(name string) (kernelFn, error) {
	e.names[name] = C.CString(name)
	return name, nil
}

func (e *emulator) alloc(bytes int) (uint64, error) {
	p := C.calloc(C.size_t(max(bytes, 4)), 1)
	if p == nil {
		return 0, fmt.Errorf("out of memory for %d bytes", bytes)
	}
	return uint64(uintptr(p)), nil
}

// cptr is emulated device address p as the C pointer it is.
func cptr(p uint64) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&p)) }

func (e *emulator) bytes(p uint64, n int) []byte { return unsafe.Slice((*byte)(cptr(p)), n) }

func (e *emulator) upload(dst uint64, src []byte) error {
	copy(e.bytes(dst, len(src)), src)
	return nil
}
func (e *emulator) write(dst uint64, src []byte) error { copy(e.bytes(dst, len(src)), src); return nil }
func (e *emulator) read(dst []byte, src uint64) error  { copy(dst, e.bytes(src, len(dst))); return nil }

func (e *emulator) copy(dst, src uint64, n int) error {
	copy(e.bytes(dst, n), e.bytes(src, n))
	return nil
}

func (e *emulator) free(p uint64) { C.free(cptr(p)) }

func (e *emulator) launch(k kernelFn, gx, gy, block int, args []uint64) error {
	name := k.(string)
	cargs := (*C.uint64_t)(C.malloc(C.size_t(8 * max(len(args), 1))))
	defer C.free(unsafe.Pointer(cargs))
	copy(unsafe.Slice((*uint64)(unsafe.Pointer(cargs)), len(args)), args)
	switch rc := C.emu_launch(e.names[name], C.int(gx), C.int(gy), C.int(block), cargs, C.int(len(args))); rc {
	case 0:
		return nil
	case -1:
		return fmt.Errorf("no kernel %s in the emulator", name)
	case -2:
		return fmt.Errorf("%s: %d arguments do not match the kernel's parameters", name, len(args))
	default:
		return fmt.Errorf("%s: a block of %d threads is more than the emulator holds", name, block)
	}
}

func (e *emulator) sync() error  { return nil }
func (e *emulator) close() error { return nil }
