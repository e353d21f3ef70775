//go:build !amd64

package cpu

import "jspark/kernels/quant"

// The assembly kernels are amd64 only; elsewhere the portable tiles run.
const hasAsm = false

var tiles256 [3][7]tile256Fn

func attn512F32(q *float32, k *byte, v *byte, stride int, n int, mask uint16, hd int, scale float32, state *[2]float32, o *float32, s *[16]float32) {
	panic("cpu: no assembly")
}

func attn512F16(q *float32, k *byte, v *byte, stride int, n int, mask uint16, hd int, scale float32, state *[2]float32, o *float32, s *[16]float32) {
	panic("cpu: no assembly")
}

func attn256F32(q *float32, k *byte, v *byte, stride int, n int, mask uint16, hd int, scale float32, state *[2]float32, o *float32, s *[16]float32) {
	panic("cpu: no assembly")
}

func attnStage256F32(dst, k, v *byte, stride, rows, hd int) { panic("cpu: no assembly") }

func attnStage256F16(dst, k, v *byte, stride, rows, hd int) { panic("cpu: no assembly") }

func attnPrefetch512(k, v *byte, stride, rows, lines int) {}

func quant512Q8(x *float32, q *int8, d *float32, s *int32, nb int) { panic("cpu: no assembly") }

func silu512(gate, up *float32, n int) { panic("cpu: no assembly") }

var (
	pkFloatTiles     map[quant.Type]*pkFloatShapes
	pkIntTiles       map[quant.Type]*pkIntShapes
	pkStreamTiles    map[quant.Type]pkIntFn
	pk256FloatTiles  map[quant.Type]*pkFloatShapes
	pk256IntTiles    map[quant.Type]*pkIntShapes
	pk256FloatGroups = []int{0, 1}
)

const pk256IntTokens = 1

func quant512Q8R(x *float32, r *byte, nb int, c int32, halves bool) { panic("cpu: no assembly") }

func read512(p *byte, stride int, n int) uint32 { panic("cpu: no assembly") }

var (
	attnChunks    map[attnKey]attnSteps
	attnChunks256 map[int]attnSteps
)

var pk256VNNITiles, pk256StripTiles, pk256VNNIStripTiles map[quant.Type]*pkIntShapes

const pk256StripTokens = 1

func unpack256Q4K(dst *byte, src *byte, nsb int) { panic("cpu: no assembly") }

func unpack256Q6K(dst *byte, src *byte, nsb int) { panic("cpu: no assembly") }

var pk256StreamTiles, pk256VNNIStreamTiles map[quant.Type]pkIntFn

const pk256Streams = 1

func quant256Q8R(x *float32, r *byte, nb int, c int32, halves bool) { panic("cpu: no assembly") }
