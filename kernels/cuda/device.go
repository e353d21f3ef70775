//go:build cuda || cudaemu

package cuda

import (
	"embed"
	"fmt"
	"math"
	"strings"

	"jspark/kernels"
	"jspark/kernels/quant"
)

//go:embed ptx/*.ptx
var ptxFiles embed.FS

// Device is one GPU running jspark's kernels. Like every kernels device it
// is driven by one goroutine at a time.
type Device struct {
	rt     runtime
	fn     map[string]kernelFn
	weight map[quant.Type]weightFns
	args   [24]uint64 // kernel arguments of the launch in progress

	scratchPtr uint64 // attention's partial sums (Attend)
	scratchLen int    // floats

	// err is the first failure of a call since the last Err: while it is
	// set, launches and copies do nothing (see kernels' Errors).
	err error
}

// runtime is what the device needs of a GPU: the CUDA driver through
// gorgonia.org/cu (driver.go, tag cuda), or the host emulator that runs the
// same CUDA C on the CPU for the tests of a machine without one (emu.go,
// tag cudaemu). Addresses are device addresses; calls run in order on one
// stream.
type runtime interface {
	name() string
	kernel(name string) (kernelFn, error)
	alloc(bytes int) (uint64, error)       // zeroed
	upload(dst uint64, src []byte) error   // synchronous
	write(dst uint64, src []byte) error    // queued; src may be reused on return
	read(dst []byte, src uint64) error     // after every queued call
	copy(dst, src uint64, bytes int) error // queued, device to device
	free(p uint64)
	// launch queues k over a gx×gy grid of blocks of block threads; each
	// argument is a 64-bit slot whose low half a 32-bit parameter reads.
	launch(k kernelFn, gx, gy, block int, args []uint64) error
	sync() error
	close() error
}

// kernelFn is a runtime's handle of one kernel.
type kernelFn any

// devPtr is a device address, the Dev of the device's buffers.
type devPtr uint64

// weightFns are the kernels of one weight type.
type weightFns struct {
	matmul1, matmul8, embed kernelFn
}

// weightKernels names the kernel suffix of every weight type the device
// computes with; Upload refuses the others.
var weightKernels = map[quant.Type]string{
	quant.F32: "f32", quant.F16: "f16", quant.BF16: "bf16",
	quant.Q8_0: "q8_0", quant.Q4_0: "q4_0", quant.Q4_K: "q4_k", quant.Q6_K: "q6_k",
	quant.Q4_1: "q4_1", quant.Q5_0: "q5_0", quant.Q5_1: "q5_1", quant.IQ4_NL: "iq4_nl", quant.MXFP4: "mxfp4",
	quant.Q2_K: "q2_k", quant.Q3_K: "q3_k", quant.Q5_K: "q5_k", quant.IQ4_XS: "iq4_xs",
}

// kernelNames are every kernel the device launches.
var kernelNames = func() []string {
	names := []string{"rmsnorm", "rope", "silu_mul", "add", "add_bias", "gather", "scatter_f32",
		"scatter_f16", "attend_f32", "attend_f16", "attend_merge", "argmax", "softmax", "swiglu_oai", "weighted_sum",
		"gelu_mul", "sigmoid_mul", "scale", "conv", "delta_net"}
	for _, s := range weightKernels {
		names = append(names, "matmul_"+s+"_1", "matmul_"+s+"_8", "embed_"+s)
	}
	return names
}()

var _ kernels.Kernels = (*Device)(nil)

func newDevice(rt runtime) (*Device, error) {
	d := &Device{rt: rt, fn: map[string]kernelFn{}, weight: map[quant.Type]weightFns{}}
	for _, name := range kernelNames {
		f, err := rt.kernel(name)
		if err != nil {
			rt.close()
			return nil, fmt.Errorf("cuda: %s: kernel %s: %w", rt.name(), name, err)
		}
		d.fn[name] = f
	}
	for t, s := range weightKernels {
		d.weight[t] = weightFns{d.fn["matmul_"+s+"_1"], d.fn["matmul_"+s+"_8"], d.fn["embed_"+s]}
	}
	return d, nil
}

// entryNames lists the .entry names of a PTX module.
func entryNames(ptx string) []string {
	var names []string
	for _, line := range strings.Split(ptx, "\n") {
		name, ok := strings.CutPrefix(strings.TrimSpace(line), ".visible .entry ")
		if !ok {
			continue
		}
		if i := strings.IndexByte(name, '('); i >= 0 {
			name = name[:i]
		}
		names = append(names, name)
	}
	return names
}

// Name says which GPU this is.
func (d *Device) Name() string { return d.rt.name() }

// Close releases the device. Buffers still allocated go with it.
func (d *Device) Close() error { return d.rt.close() }

// fail records err as the device's failure unless one is pending.
func (d *Device) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

// Err returns the first failure since the previous Err (a refused launch or
// copy, a kernel's fault surfaced by a Read, memory that ran out inside a
// call) and clears it, so calls run again.
func (d *Device) Err() error {
	err := d.err
	d.err = nil
	return err
}

// launch queues kernel name. A launch the runtime refuses is the device's
// failure (Err), naming the kernel and its shape.
func (d *Device) launch(name string, gx, gy, block int, args ...uint64) {
	f, ok := d.fn[name]
	if !ok {
		panic(fmt.Sprintf("cuda: no kernel %s", name))
	}
	d.launchFn(name, f, gx, gy, block, args...)
}

func (d *Device) launchFn(name string, f kernelFn, gx, gy, block int, args ...uint64) {
	if gx == 0 || gy == 0 || d.err != nil {
		return
	}
	n := copy(d.args[:], args)
	if err := d.rt.launch(f, gx, gy, block, d.args[:n]); err != nil {
		d.fail(fmt.Errorf("cuda: %s: launching %s (grid %d×%d, block %d): %w", d.rt.name(), name, gx, gy, block, err))
	}
}

func ceil(a, b int) int { return (a + b - 1) / b }

// ptr is a buffer's device address as a kernel argument.
func ptr(b *kernels.Buffer) uint64 {
	p, ok := b.Dev.(devPtr)
	if !ok {
		panic(fmt.Sprintf("cuda: a %v buffer of %d that is not on a CUDA device (freed, or another device's)", b.Type, b.Len))
	}
	return uint64(p)
}

// i32 and f32 are 32-bit kernel arguments; i64 a 64-bit one.
func i32(v int) uint64 {
	if v != int(int32(v)) {
		panic(fmt.Sprintf("cuda: kernel argument %d overflows int32", v))
	}
	return uint64(uint32(int32(v)))
}

func f32(v float32) uint64 { return uint64(math.Float32bits(v)) }

func i64(v int) uint64 { return uint64(int64(v)) }
