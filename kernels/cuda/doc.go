// Package cuda is the NVIDIA GPU implementation of kernels.Kernels, over
// the CUDA driver API through gorgonia.org/cu. Weights are uploaded once,
// activations and the paged KV pool live in device memory, and one stream
// runs every call in order; Read is the only synchronisation.
//
// The kernels are CUDA C (*.cu beside this file), compiled by `make cuda`
// to PTX for compute_80 and compute_90 (ptx/, checked in), embedded, and
// JIT-compiled by the driver when a device starts. Every kernel follows
// kernels/ref's arithmetic and the package contract of kernels: each output
// element is reduced in a fixed order that depends only on the shapes, with
// no atomics, so a row's bits do not depend on the batch.
//
// The device talks to the GPU through a small runtime seam: driver.go (build
// tag cuda) is the CUDA driver; emu.go and emu.cpp (tag cudaemu) are a host
// emulator that compiles the same .cu files as C++ and runs every GPU thread
// as a fiber, so the tests run on a machine without a GPU (make cuda-emu).
// A launch or copy the GPU refuses, a kernel that faults and memory that
// runs out inside a call are the device's errors (Err, as kernels' package
// doc has them), never a panic; the emulator injects each (InjectFault), and
// its tests follow one from the kernel to an HTTP 500.
// gorgonia.org/cu needs cgo, cuda.h and libcuda, and its init() exits the
// process when no GPU is present, so a default build never links it: without
// either tag this package is empty and its test skips, saying why.
package cuda
