//go:build cuda

package cuda

import (
	"embed"
	"fmt"
	"runtime"
	"strings"
	"unsafe"

	"gorgonia.org/cu"

	"jspark/kernels"
	"jspark/kernels/quant"
)

//go:embed ptx/*.ptx
var ptxFiles embed.FS

// Device is one GPU running jspark's kernels. Like every kernels device it
// is driven by one goroutine at a time; each call binds the device's context
// to the calling OS thread for its duration.
type Device struct {
	ordinal int
	name    string
	arch    int // compute capability, major*10+minor
	ctx     cu.CUContext
	stream  cu.Stream
	mods    []cu.Module
	fn      map[string]cu.Function
	weight  map[quant.Type]weightFns

	args   [16]uint64 // kernel arguments of the launch in progress
	params [16]unsafe.Pointer
}

// weightFns are the kernels of one weight type.
type weightFns struct {
	matmul1, matmul8, embed cu.Function
}

// weightKernels names the kernel suffix of every weight type the device
// computes with; Upload refuses the others.
var weightKernels = map[quant.Type]string{
	quant.F32: "f32", quant.F16: "f16", quant.BF16: "bf16",
	quant.Q8_0: "q8_0", quant.Q4_0: "q4_0", quant.Q4_K: "q4_k", quant.Q6_K: "q6_k",
}

var _ kernels.Kernels = (*Device)(nil)

// New starts device ordinal (0 is the first GPU): its primary context, a
// stream, and the kernels JIT-compiled from the embedded PTX of the newest
// architecture the device runs (compute_90 on Hopper and later, else
// compute_80).
func New(ordinal int) (*Device, error) {
	count, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("cuda: %w", err)
	}
	if ordinal < 0 || ordinal >= count {
		return nil, fmt.Errorf("cuda: device %d of %d", ordinal, count)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	d := &Device{ordinal: ordinal, fn: map[string]cu.Function{}, weight: map[quant.Type]weightFns{}}
	d.name, _ = dev.Name()
	major, err1 := dev.Attribute(cu.ComputeCapabilityMajor)
	minor, err2 := dev.Attribute(cu.ComputeCapabilityMinor)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("cuda: device %d: compute capability: %v %v", ordinal, err1, err2)
	}
	d.arch = 10*major + minor
	if d.arch < 80 {
		return nil, fmt.Errorf("cuda: %s has compute capability %d.%d; jspark's kernels need 8.0 or later", d.name, major, minor)
	}
	if d.ctx, err = dev.RetainPrimaryCtx(); err != nil {
		return nil, fmt.Errorf("cuda: %s: context: %w", d.name, err)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		return nil, fmt.Errorf("cuda: %s: context: %w", d.name, err)
	}
	if d.stream, err = cu.MakeStream(cu.DefaultStream); err != nil {
		return nil, fmt.Errorf("cuda: %s: stream: %w", d.name, err)
	}
	if err := d.load(); err != nil {
		return nil, err
	}
	return d, nil
}

// load JIT-compiles every embedded module of the device's architecture and
// looks up its kernels.
func (d *Device) load() error {
	suffix := ".compute_80.ptx"
	if d.arch >= 90 {
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
			return fmt.Errorf("cuda: %s: loading %s: %w", d.name, e.Name(), err)
		}
		d.mods = append(d.mods, mod)
		for _, name := range entryNames(string(src)) {
			f, err := mod.Function(name)
			if err != nil {
				return fmt.Errorf("cuda: %s: kernel %s: %w", d.name, name, err)
			}
			d.fn[name] = f
		}
	}
	for t, s := range weightKernels {
		d.weight[t] = weightFns{d.fn["matmul_"+s+"_1"], d.fn["matmul_"+s+"_8"], d.fn["embed_"+s]}
	}
	for _, name := range kernelNames {
		if _, ok := d.fn[name]; !ok {
			return fmt.Errorf("cuda: kernel %s missing from the embedded PTX (run make cuda)", name)
		}
	}
	return nil
}

// kernelNames are the kernels the device launches by name.
var kernelNames = func() []string {
	names := []string{"rmsnorm", "rope", "silu_mul", "add", "add_bias", "gather", "scatter_f32",
		"scatter_f16", "attend_f32", "attend_f16", "argmax", "softmax"}
	for _, s := range weightKernels {
		names = append(names, "matmul_"+s+"_1", "matmul_"+s+"_8", "embed_"+s)
	}
	return names
}()

// entryNames lists the .entry names of a PTX module.
func entryNames(ptx string) []string {
	var names []string
	for _, line := range strings.Split(ptx, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, ".visible .entry ") {
			continue
		}
		name := strings.TrimPrefix(line, ".visible .entry ")
		if i := strings.IndexByte(name, '('); i >= 0 {
			name = name[:i]
		}
		names = append(names, name)
	}
	return names
}

// Name is the GPU's name, its ordinal and compute capability.
func (d *Device) Name() string {
	return fmt.Sprintf("cuda:%d %s (sm_%d)", d.ordinal, d.name, d.arch)
}

// Close releases the device's modules, stream and context. Buffers still
// allocated are released with the context.
func (d *Device) Close() error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		return err
	}
	for _, m := range d.mods {
		m.Unload()
	}
	d.stream.Destroy()
	dev, err := cu.GetDevice(d.ordinal)
	if err != nil {
		return err
	}
	return dev.ReleasePrimaryCtx()
}

// enter binds the device's context to the calling goroutine's OS thread
// until the returned function runs.
func (d *Device) enter() func() {
	runtime.LockOSThread()
	if err := cu.SetCurrentContext(d.ctx); err != nil {
		runtime.UnlockOSThread()
		panic(fmt.Errorf("cuda: %s: binding the context: %w", d.name, err))
	}
	return runtime.UnlockOSThread
}

// launch queues kernel name on the device's stream. Each argument is a
// 64-bit slot; a 32-bit parameter reads the slot's low half (little
// endian), which is how cu.Function.Launch copies parameters.
//
// NOTE: the kernels interface has no error results, so a launch the driver
// refuses panics, naming the kernel: a failed launch would otherwise leave
// stale results that look like real ones.
func (d *Device) launch(name string, gx, gy, block, shared int, args ...uint64) {
	f, ok := d.fn[name]
	if !ok {
		panic(fmt.Sprintf("cuda: no kernel %s", name))
	}
	d.launchFn(name, f, gx, gy, block, shared, args...)
}

func (d *Device) launchFn(name string, f cu.Function, gx, gy, block, shared int, args ...uint64) {
	if gx == 0 || gy == 0 {
		return
	}
	n := copy(d.args[:], args)
	for i := range n {
		d.params[i] = unsafe.Pointer(&d.args[i])
	}
	if err := f.Launch(gx, gy, 1, block, 1, 1, shared, d.stream, d.params[:n]); err != nil {
		panic(fmt.Errorf("cuda: %s: launching %s (grid %d×%d, block %d): %w", d.name, name, gx, gy, block, err))
	}
}

func ceil(a, b int) int { return (a + b - 1) / b }

// ptr is a buffer's device address as a kernel argument.
func ptr(b *kernels.Buffer) uint64 {
	p, ok := b.Dev.(cu.DevicePtr)
	if !ok {
		panic(fmt.Sprintf("cuda: a %v buffer of %d that is not on a CUDA device (freed, or another device's)", b.Type, b.Len))
	}
	return uint64(p)
}

// i32 and f32 are 32-bit kernel arguments.
func i32(v int) uint64 {
	if v != int(int32(v)) {
		panic(fmt.Sprintf("cuda: kernel argument %d overflows int32", v))
	}
	return uint64(uint32(int32(v)))
}

func f32(v float32) uint64 { return uint64(*(*uint32)(unsafe.Pointer(&v))) }

func i64(v int) uint64 { return uint64(int64(v)) }
