//go:build cudaemu && !cuda

package cuda

// #cgo CXXFLAGS: -std=c++17 -O2
// #include <stdint.h>
// #include <stdlib.h>
// #include <string.h>
// int emu_launch(const char *name, int gx, int gy, int block, const uint64_t *args, int nargs);
import "C"

import (
	"errors"
	"fmt"
	"sync"
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

	mu      sync.Mutex // the fault is armed from a test's goroutine
	fault   Fault
	calls   int   // calls of fault.Op since it was armed
	pending error // a faulted kernel's error, for the next read or sync
}

// Fault is a device failure injected into the emulator (tests), met by the
// device as it would meet a GPU's.
type Fault struct {
	// Op is where it strikes: "launch" (the driver refuses a launch),
	// "kernel" (a launched kernel faults: it does not run, and its error
	// surfaces at the next read or sync, as CUDA's asynchronous errors do)
	// or "alloc" (the device is out of memory).
	Op string
	// After is how many calls of Op pass before it strikes.
	After int
	// Times is how many calls of Op fail; 0: every one from then on, a
	// device that stays broken.
	Times int
}

// Injected errors read as the driver's would, marked as injected.
var (
	errLaunch = errors.New("CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure (injected)")
	errKernel = errors.New("CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered (injected)")
	errMemory = errors.New("CUDA_ERROR_OUT_OF_MEMORY: out of memory (injected)")
)

// InjectFault arms f on d, a device of the emulator; Fault{} disarms it
// (a kernel fault not yet surfaced stays pending).
func InjectFault(d *Device, f Fault) {
	e := d.rt.(*emulator)
	e.mu.Lock()
	e.fault, e.calls = f, 0
	e.mu.Unlock()
}

// strikes counts a call of op and reports whether the armed fault fails it.
func (e *emulator) strikes(op string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	f := e.fault
	if f.Op != op {
		return false
	}
	e.calls++
	return e.calls > f.After && (f.Times == 0 || e.calls <= f.After+f.Times)
}

// surface returns the pending kernel fault, once.
func (e *emulator) surface() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	err := e.pending
	e.pending = nil
	return err
}

func (e *emulator) name() string { return "cudaemu (host emulator)" }

func (e *emulator) kernel(name string) (kernelFn, error) {
	e.names[name] = C.CString(name)
	return name, nil
}

func (e *emulator) alloc(bytes int) (uint64, error) {
	if e.strikes("alloc") {
		return 0, fmt.Errorf("allocating %d bytes: %w", bytes, errMemory)
	}
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

func (e *emulator) read(dst []byte, src uint64) error {
	if err := e.surface(); err != nil {
		return err
	}
	copy(dst, e.bytes(src, len(dst)))
	return nil
}

func (e *emulator) copy(dst, src uint64, n int) error {
	copy(e.bytes(dst, n), e.bytes(src, n))
	return nil
}

func (e *emulator) free(p uint64) { C.free(cptr(p)) }

func (e *emulator) launch(k kernelFn, gx, gy, block int, args []uint64) error {
	name := k.(string)
	if e.strikes("launch") {
		return errLaunch
	}
	if e.strikes("kernel") {
		e.mu.Lock()
		if e.pending == nil {
			e.pending = fmt.Errorf("%s: %w", name, errKernel)
		}
		e.mu.Unlock()
		return nil
	}
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

func (e *emulator) sync() error  { return e.surface() }
func (e *emulator) close() error { return nil }
