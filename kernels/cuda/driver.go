//go:build cuda

package cuda

import (
	"fmt"
	goruntime "runtime"
	"strings"
	"unsafe"

	"gorgonia.org/cu"
)

// New starts GPU ordinal (0 is the first): its primary context, a stream,
// and the kernels JIT-compiled from the embedded PTX of the newest
// architecture the GPU runs (compute_90 on Hopper and later, else
// compute_80).
func New(ordinal int) (*Device, error) {
	rt, err := newDriver(ordinal)
	if err != nil {
		return nil, err
	}
	return newDevice(rt)
}

// driver is the CUDA driver API on one GPU. Each call binds the context to
// the calling goroutine's OS thread for its duration (contexts are current
// per thread, goroutines move between threads).
type driver struct {
	ordinal int
	gpu     string
	arch    int // compute capability, major*10+minor
	ctx     cu.CUContext
	stream  cu.Stream
	mods    []cu.Module
	fns     map[string]cu.Function
	params  [24]unsafe.Pointer // as many as Device.args
}

func newDriver(ordinal int) (*driver, error) {
	count, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	if ordinal < 0 || ordinal >= count {
		return nil, fmt.Errorf("cuda: no GPU %d (this machine has %d)", ordinal, count)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("cuda: GPU %d: %w", ordinal, err)
	}
	r := &driver{ordinal: ordinal, fns: map[string]cu.Function{}}
	r.gpu, _ = dev.Name()
	major, err1 := dev.Attribute(cu.ComputeCapabilityMajor)
	minor, err2 := dev.Attribute(cu.ComputeCapabilityMinor)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("cuda: GPU %d: compute capability: %v %v", ordinal, err1, err2)
	}
	r.arch = 10*major + minor
	if r.arch < 80 {
		return nil, fmt.Errorf("cuda: %s has compute capability %d.%d; jspark's kernels need 8.0 or later", r.gpu, major, minor)
	}
	if r.ctx, err = dev.RetainPrimaryCtx(); err != nil {
		return nil, fmt.Errorf("cuda: %s: context: %w", r.gpu, err)
	}
	exit, err := r.enter()
	if err != nil {
		return nil, err
	}
	defer exit()
	if r.stream, err = cu.MakeStream(cu.DefaultStream); err != nil {
		return nil, fmt.Errorf("cuda: %s: stream: %w", r.gpu, err)
	}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// load JIT-compiles every embedded module of the GPU's architecture.
func (r *driver) load() error {
	suffix := ".compute_80.ptx"
	if r.arch >= 90 {
		suffix = ".compute_90.ptx"
	}
	entries, err := ptxFiles.ReadDir("ptx")
	if err != nil {
		return err
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), suffix) {
			continue
		}
		src, err := ptxFiles.ReadFile("ptx/" + e.Name())
		if err != nil {
			return err
		}
		mod, err := cu.LoadData(string(src))
		if err != nil {
			return fmt.Errorf("cuda: %s: loading %s: %w", r.gpu, e.Name(), err)
		}
		r.mods = append(r.mods, mod)
		for _, name := range entryNames(string(src)) {
			if r.fns[name], err = mod.Function(name); err != nil {
				return fmt.Errorf("cuda: %s: kernel %s: %w", r.gpu, name, err)
			}
		}
	}
	return nil
}

// enter binds the context to the calling OS thread until the returned
// function runs.
func (r *driver) enter() (exit func(), err error) {
	goruntime.LockOSThread()
	if err := cu.SetCurrentContext(r.ctx); err != nil {
		goruntime.UnlockOSThread()
		return nil, fmt.Errorf("binding the context: %w", err)
	}
	return goruntime.UnlockOSThread, nil
}

func (r *driver) name() string { return fmt.Sprintf("cuda:%d %s (sm_%d)", r.ordinal, r.gpu, r.arch) }

func (r *driver) kernel(name string) (kernelFn, error) {
	f, ok := r.fns[name]
	if !ok {
		return nil, fmt.Errorf("not in the embedded PTX (run make cuda)")
	}
	return f, nil
}

func (r *driver) alloc(bytes int) (uint64, error) {
	exit, err := r.enter()
	if err != nil {
		return 0, err
	}
	defer exit()
	size := int64(max(bytes, 4))
	p, err := cu.MemAlloc(size)
	if err != nil {
		return 0, fmt.Errorf("allocating %d bytes: %w", size, err)
	}
	if err := cu.MemsetD8Async(p, 0, size, r.stream); err != nil {
		cu.MemFree(p)
		return 0, fmt.Errorf("clearing %d bytes: %w", size, err)
	}
	return uint64(p), nil
}

func (r *driver) upload(dst uint64, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	exit, err := r.enter()
	if err != nil {
		return err
	}
	defer exit()
	return cu.MemcpyHtoD(cu.DevicePtr(dst), unsafe.Pointer(&src[0]), int64(len(src)))
}

// write: the driver stages pageable memory before it returns.
func (r *driver) write(dst uint64, src []byte) error {
	exit, err := r.enter()
	if err != nil {
		return err
	}
	defer exit()
	return cu.MemcpyHtoDAsync(cu.DevicePtr(dst), unsafe.Pointer(&src[0]), int64(len(src)), r.stream)
}

func (r *driver) read(dst []byte, src uint64) error {
	exit, err := r.enter()
	if err != nil {
		return err
	}
	defer exit()
	if err := cu.MemcpyDtoHAsync(unsafe.Pointer(&dst[0]), cu.DevicePtr(src), int64(len(dst)), r.stream); err != nil {
		return err
	}
	return r.stream.Synchronize() // a kernel that faulted earlier surfaces here
}

func (r *driver) copy(dst, src uint64, bytes int) error {
	exit, err := r.enter()
	if err != nil {
		return err
	}
	defer exit()
	return cu.MemcpyDtoDAsync(cu.DevicePtr(dst), cu.DevicePtr(src), int64(bytes), r.stream)
}

func (r *driver) free(p uint64) {
	exit, err := r.enter()
	if err != nil {
		return // a context that cannot be bound has lost its memory anyway
	}
	defer exit()
	cu.MemFree(cu.DevicePtr(p))
}

// launch: cu.Function.Launch copies 8 bytes from each parameter pointer,
// which is why arguments live in 64-bit slots.
func (r *driver) launch(k kernelFn, gx, gy, block int, args []uint64) error {
	exit, err := r.enter()
	if err != nil {
		return err
	}
	defer exit()
	for i := range args {
		r.params[i] = unsafe.Pointer(&args[i])
	}
	return k.(cu.Function).Launch(gx, gy, 1, block, 1, 1, 0, r.stream, r.params[:len(args)])
}

func (r *driver) sync() error {
	exit, err := r.enter()
	if err != nil {
		return err
	}
	defer exit()
	return r.stream.Synchronize()
}

func (r *driver) close() error {
	if exit, err := r.enter(); err == nil {
		for _, m := range r.mods {
			m.Unload()
		}
		r.stream.Destroy()
		exit()
	}
	dev, err := cu.GetDevice(r.ordinal)
	if err != nil {
		return err
	}
	return dev.ReleasePrimaryCtx()
}
