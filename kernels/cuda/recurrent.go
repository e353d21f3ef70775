//go:build cuda || cudaemu

package cuda

import (
	"fmt"

	"jspark/kernels"
)

// The hybrid families' operations (recurrent.cu).

func (d *Device) GELUMul(gate, up *kernels.Buffer, n int) {
	d.launch("gelu_mul", ceil(n, flat), 1, flat, ptr(gate), ptr(up), i64(n))
}

func (d *Device) SigmoidMul(x, gate *kernels.Buffer, n, per int) {
	d.launch("sigmoid_mul", ceil(n, flat), 1, flat, ptr(x), ptr(gate), i64(n), i32(per))
}

func (d *Device) Scale(x *kernels.Buffer, n int, s float32) {
	d.launch("scale", ceil(n, flat), 1, flat, ptr(x), i64(n), f32(s))
}

// convTaps is recurrent.cu's MAXK: the widest convolution.
const convTaps = 64

// Conv runs a thread a (run, channel), each over its run's tokens in order.
func (d *Device) Conv(c *kernels.Conv) {
	if c.Width < 2 || c.Width > convTaps {
		panic(fmt.Sprintf("cuda: Conv of %d taps: the kernel holds 2 to %d", c.Width, convTaps))
	}
	if c.Runs.N == 0 {
		return
	}
	r := c.Runs
	d.launch("conv", ceil(c.Channels, flat), r.N, flat, ptr(c.Out), ptr(c.X), ptr(c.W), ptr(c.State),
		i32(c.StateStride), i32(c.StateOff), ptr(r.Start), ptr(r.Slot), ptr(r.Pos), i32(c.Channels), i32(c.Width))
}

// DeltaNet runs a block a (run, value head), a thread a column of the
// head's state. NOTE: the chunked form keeps a chunk's queries and keys in
// shared memory, chunk × dim ≤ 4096 floats and chunks of 32 at most; a
// layer past that runs every token one step at a time, which its bits
// then follow in every batch alike.
func (d *Device) DeltaNet(n *kernels.DeltaNet) {
	if n.Dim%32 != 0 || n.Dim > 256 {
		panic(fmt.Sprintf("cuda: DeltaNet of heads %d wide: the kernel takes whole warps up to 256", n.Dim))
	}
	if n.KHeads <= 0 || n.VHeads%n.KHeads != 0 {
		panic(fmt.Sprintf("cuda: DeltaNet of %d value heads over %d key heads", n.VHeads, n.KHeads))
	}
	if n.Runs.N == 0 {
		return
	}
	r := n.Runs
	tiled := 0
	if n.Tiled {
		tiled = 1
	}
	d.launch("delta_net", n.VHeads, r.N, n.Dim, ptr(n.Out), ptr(n.X), ptr(n.Alpha), ptr(n.Beta), ptr(n.DT), ptr(n.A),
		ptr(n.State), i32(n.StateStride), i32(n.StateOff), ptr(r.Start), ptr(r.Slot), ptr(r.Pos),
		i32(n.KHeads), i32(n.VHeads), i32(n.Dim), i32(tiled), i32(n.Chunk), f32(n.Eps))
}
