package cpu

import (
	"encoding/binary"
	"maps"
	"sync"
	"unsafe"

	"jspark/kernels"
	"jspark/kernels/quant"
)

// On AVX-512 and AVX2 (pkSets) every weight matrix is multiplied in a
// packed layout, made
// once (Prepare, or the first product): groups of 16 rows whose values for
// one step of K lie side by side, so that one vector load holds a step of
// 16 rows, each lane accumulates one row's output, and a one-token product
// reads each group as one stream.
//
// Rows past the last full group are left zero: their outputs, whatever
// they come to, are never stored.
//
// Float types (F32, F16, BF16): a group is K steps of 16 values (64 or 32
// bytes). An output is one FMA chain over K in order:
//
//	out = fma(x[k], w[k], out)   for k = 0 … K-1
//
// Integer types multiply 32-element blocks of activations quantized as
// quant.QuantizeQ8 (d_x, q_x) by the packed weights as exact integer dot
// products, 4 bytes a lane per VPDPBUSD (unsigned weights, signed
// activations), scaled to float in block order:
//
//	Q8_0 (544 bytes a block: 8 steps × 16 rows × 4 bytes of w+128, then 16
//	halves d_w):  out = fma(float(Σ(w+128)·q_x − 128·Σq_x), d_w·d_x, out)
//	Q4_0 (288: 4 loads × 16 rows × 4 bytes, low nibbles steps 0-3, high
//	steps 4-7, then d_w):  out = fma(float(Σq·q_x − 8·Σq_x), d_w·d_x, out)
//	Q4_K (2368 a super-block: d, dmin, then scales and mins [8][16] bytes,
//	then 8 sub-blocks as Q4_0's nibbles): per sub-block j,
//	  out = fma(float(Σq·q_x), (d·sc_j)·d_x, out)
//	  out = fma(−(dmin·m_j), d_x·Σq_x, out)
//	Q6_K (3360: d, scales [16][16] int8, then per block 4 loads of low
//	nibbles and 2 of 2-bit highs, step 4h+f of load h at bits 2f):
//	  out = fma(float(sc_A·(Σ_A u·q_x − 32·Σ_A q_x) + sc_B·(…B…)), d·d_x, out)
//	with u = q+32 in 0…63 and A, B the block's two 16-element halves.
//
// The types K-quant mixes add (packed_more.go lays them out) compute, with
// v a code's integer value (quant.Value) and Σ over a block's elements:
//
//	Q5_0, IQ4_NL (352, 288: nibbles [, fifth bits], 16 halves d):
//	  out = fma(float(Σv·q_x), d·d_x, out)
//	MXFP4 (272: nibbles, 16 exponent bytes e): s = 2^(e−128) (quant.E8M0Half),
//	  out = fma(float(Σv·q_x), s·d_x, out)
//	Q4_1, Q5_1 (320, 384: nibbles [, fifth bits], d, then 16 halves m):
//	  out = fma(float(Σv·q_x), d·d_x, out); out = fma(m, d_x·Σq_x, out)
//	Q5_K (2880: as Q4_K, each sub-block's nibbles followed by its fifth
//	bits): as Q4_K
//	IQ4_XS (2208: d, [8][16] int8 scales sc−32, 8 sub-blocks of nibbles):
//	  out = fma(float(Σv·q_x), (d·sc_j)·d_x, out)
//	Q3_K (1824: d, [16][16] int8 scales sc−32, per block 2 loads of 2-bit
//	codes and one of third bits): per block, halves A and B,
//	  out = fma(float(sc_A·Σ_A v·q_x + sc_B·Σ_B v·q_x), d·d_x, out)
//	Q2_K (1344: d, dmin, [16][16] bytes sc | m<<4, per block 2 loads of
//	2-bit codes):
//	  out = fma(float(sc_A·Σ_A v·q_x + sc_B·Σ_B v·q_x), d·d_x, out)
//	  out = fma(float(m_A·Σ_A q_x + m_B·Σ_B q_x), −(dmin·d_x), out)
//
// NOTE: an output's arithmetic depends only on K and the type: the same in
// every tile shape, for any batch, thread count or chunking, so greedy
// outputs stay batch-invariant; AVX2's tiles (asm/packed256.go) compute
// the same bits with 8-lane halves of a group. The plain-Go path keeps the
// unpacked kernels (matmul.go, qmatmul.go), whose arithmetic differs.
type packed struct {
	typ        quant.Type
	rows, cols int
	groups     int
	groupBytes int
	buf        *kernels.Buffer // holds data, in the device's memory
	data       []byte
}

const groupRows = 16

// pkSet is an instruction set's packed tiles: float[t][tokens][groups],
// floatGroups[n] the widest float tile of n tokens (n ≥ 1), and ints[t]
// [tokens] of up to intTokens tokens, whose activation records records
// writes; streams[t], where a type has one, runs one token down runs of
// streamGroups full groups at once. A type with no tiles is multiplied
// unpacked.
type pkSet struct {
	float        map[quant.Type]*pkFloatShapes
	floatGroups  []int
	ints         map[quant.Type]*pkIntShapes
	intTokens    int
	streams      map[quant.Type]pkIntFn
	streamGroups int
	strips       map[quant.Type]*pkIntShapes // tiles over strips (strip.go)
	records      func(x *float32, r *byte, nb int, c int32, halves bool)
}

// pkSets are the packed tiles of each instruction set. The layouts are
// one: AVX2 tiles compute what AVX-512's do, bit for bit, and also serve
// an AVX-512 CPU without VNNI.
var pkSets = func() (s [isaAVX512 + 1]pkSet) {
	avx2 := pkSet{float: pk256FloatTiles, floatGroups: pk256FloatGroups,
		ints: pk256IntTiles, intTokens: pk256IntTokens, records: quant256Q8R,
		streams: pk256StreamTiles, streamGroups: pk256Streams}
	s[isaAVX2] = avx2
	s[isaAVX2].strips = pk256StripTiles
	s[isaAVXVNNI] = avx2
	s[isaAVXVNNI].ints = maps.Clone(avx2.ints)
	maps.Copy(s[isaAVXVNNI].ints, pk256VNNITiles)
	s[isaAVXVNNI].strips = maps.Clone(pk256StripTiles)
	maps.Copy(s[isaAVXVNNI].strips, pk256VNNIStripTiles)
	s[isaAVXVNNI].streams = pk256VNNIStreamTiles
	g := make([]int, pkTokens+1)
	for t := range g {
		g[t] = pkGroups
	}
	g[1] = pkDecodeGroups
	s[isaAVX512] = pkSet{float: pkFloatTiles, floatGroups: g, ints: avx2.ints, intTokens: avx2.intTokens, records: avx2.records,
		streams: avx2.streams, streamGroups: avx2.streamGroups, strips: s[isaAVX2].strips}
	if hasVNNI {
		s[isaAVX512].ints, s[isaAVX512].intTokens, s[isaAVX512].records = pkIntTiles, pkIntTokens, quant512Q8R
		s[isaAVX512].streams, s[isaAVX512].streamGroups = pkStreamTiles, pkStreams
		s[isaAVX512].strips = nil // AVX-512's tiles share their unpacking among 8 tokens already
	}
	return s
}()

// pk is the packed tiles of k's instruction set.
func (k *Kernels) pk() *pkSet { return &pkSets[k.isa] }

// usePacked reports whether products of type t run packed on this ISA.
func (k *Kernels) usePacked(t quant.Type) bool {
	s := k.pk()
	return s.float[t] != nil || s.ints[t] != nil
}

// Prepare packs w now (at load) rather than at its first product.
func (k *Kernels) Prepare(w *kernels.Matrix) error {
	if k.usePacked(w.Type) {
		_, err := k.packedOf(w)
		return err
	}
	return nil
}

var packMu sync.Mutex // guards the packed forms kept in weight buffers

// packedOf returns w's packed form, kept in its buffer's Dev.
func (k *Kernels) packedOf(w *kernels.Matrix) (*packed, error) {
	packMu.Lock()
	defer packMu.Unlock()
	if p, ok := w.Buf.Dev.(*packed); ok {
		return p, nil
	}
	p, err := k.pack(w)
	if err != nil {
		return nil, err
	}
	w.Buf.Dev = p
	return p, nil
}

func (k *Kernels) pack(w *kernels.Matrix) (*packed, error) {
	p := &packed{typ: w.Type, rows: w.Rows, cols: w.Cols, groups: (w.Rows + groupRows - 1) / groupRows}
	K := w.Cols
	switch w.Type {
	case quant.F32:
		p.groupBytes = 64 * K
	case quant.F16, quant.BF16:
		p.groupBytes = 32 * K
	default:
		p.groupBytes = K / w.Type.BlockElems() * pkGroupBytes[w.Type]
	}
	size := p.groups * p.groupBytes
	p.data = packMemory(size)
	p.buf = kernels.NewHostBuffer(quant.F32, size/4, p.data)
	src := kernels.HostBytes(w.Buf)
	rowBytes := w.Type.RowBytes(K)
	// Groups are independent: the device's threads pack a share each
	// (a model's load is mostly packing).
	var wg sync.WaitGroup
	for t := range k.pool.workers {
		wg.Go(func() {
			for g := t; g < p.groups; g += k.pool.workers {
				dst := p.data[g*p.groupBytes : (g+1)*p.groupBytes]
				for i := 0; i < groupRows; i++ {
					r := g*groupRows + i
					if r >= w.Rows {
						break
					}
					packRow(w.Type, dst, i, src[r*rowBytes:(r+1)*rowBytes], K)
				}
			}
		})
	}
	wg.Wait()
	k.mem.packed.Add(int64(size))
	k.mem.released.Add(int64(releaseSource(src[:w.Rows*rowBytes])))
	return p, nil
}

// packRow writes row i of a group (src: the row as the file encodes it).
func packRow(t quant.Type, dst []byte, i int, src []byte, K int) {
	switch t {
	case quant.F32:
		d, s := words32(dst), words32(src[:4*K])
		for k, v := range s {
			d[groupRows*k+i] = v
		}
	case quant.F16, quant.BF16:
		d, s := words16(dst), words16(src[:2*K])
		for k, v := range s {
			d[groupRows*k+i] = v
		}
	case quant.Q8_0:
		for b := 0; b < K/32; b++ {
			blk, out := src[34*b:34*b+34], dst[544*b:]
			for c := 0; c < 8; c++ { // int8 w + 128, four lanes a word
				binary.LittleEndian.PutUint32(out[64*c+4*i:], le32(blk[2+4*c:])^0x80808080)
			}
			copy(out[512+2*i:][:2], blk[:2])
		}
	case quant.Q4_0:
		for b := 0; b < K/32; b++ {
			blk, out := src[18*b:18*b+18], dst[288*b:]
			// element j's nibble is low in byte j, j+16's high: the
			// packed pairs (c, c+4) are the file's bytes as they are
			for c := 0; c < 4; c++ {
				copy(out[64*c+4*i:][:4], blk[2+4*c:][:4])
			}
			copy(out[256+2*i:][:2], blk[:2])
		}
	case quant.Q4_K:
		for sb := 0; sb < K/quant.QK_K; sb++ {
			blk, out := src[144*sb:144*sb+144], dst[2368*sb:]
			copy(out[2*i:][:2], blk[0:2])
			copy(out[32+2*i:][:2], blk[2:4])
			sc, m := scalesK4(blk[4:16])
			qs := blk[16:]
			for j := 0; j < 8; j++ {
				out[64+16*j+i], out[192+16*j+i] = sc[j], m[j]
				putNibblesShifted(out[320+256*j:], i, qs[32*(j/2):], uint(4*(j%2)))
			}
		}
	case quant.Q6_K:
		for sb := 0; sb < K/quant.QK_K; sb++ {
			blk, out := src[210*sb:210*sb+210], dst[3360*sb:]
			copy(out[2*i:][:2], blk[208:210])
			for s := 0; s < 16; s++ {
				out[32+16*s+i] = blk[192+s]
			}
			u := q6Values(blk)
			for b := 0; b < 8; b++ {
				ub := u[32*b : 32*b+32]
				putNibbles(out[288+256*b:], i, ub)
				for h := 0; h < 2; h++ {
					var v uint32
					for f := 0; f < 4; f++ {
						v |= (le32(ub[4*(4*h+f):]) >> 4 & 0x03030303) << (2 * f)
					}
					binary.LittleEndian.PutUint32(out[2336+128*b+64*h+4*i:], v)
				}
			}
		}
	default:
		packRowMore(t, dst, i, src, K)
	}
}

// putNibbles writes a block's 32 four-bit values for row i: load c (of 4)
// holds steps c (low nibbles) and c+4 (high).
func putNibbles(out []byte, i int, q []uint8) { putNibblesShifted(out, i, q, 0) }

// putNibblesShifted is putNibbles of the 4 bits at shift of each byte of
// q, four lanes a word (packing speed is a model's load time).
func putNibblesShifted(out []byte, i int, q []uint8, shift uint) {
	const m = 0x0f0f0f0f
	for c := 0; c < 4; c++ {
		lo, hi := le32(q[4*c:]), le32(q[16+4*c:])
		binary.LittleEndian.PutUint32(out[64*c+4*i:], lo>>shift&m|(hi>>shift&m)<<4)
	}
}

func le32(b []byte) uint32 { return binary.LittleEndian.Uint32(b) }

// q6Values decodes a Q6_K block's 256 six-bit values (q+32, in 0…63) in
// element order, as ggml's dequantize_row_q6_K walks them.
func q6Values(blk []byte) [256]uint8 {
	var u [256]uint8
	ql, qh := blk[:128], blk[128:192]
	for n := 0; n < 2; n++ {
		l0, h0, y := ql[64*n:], qh[32*n:], u[128*n:]
		for l := 0; l < 32; l++ {
			y[l] = l0[l]&15 | (h0[l]&3)<<4
			y[l+32] = l0[l+32]&15 | (h0[l]>>2&3)<<4
			y[l+64] = l0[l]>>4 | (h0[l]>>4&3)<<4
			y[l+96] = l0[l+32]>>4 | (h0[l]>>6&3)<<4
		}
	}
	return u
}

type (
	pkFloatFn func(x *float32, xs int, w *byte, gs int, k int, dst *float32, ds int, mask uint16)
	pkIntFn   func(w *byte, r *byte, rs int, nb int, dst *float32, ds int, mask uint16, groups int)
)

// pmm is one packed product in flight: tasks quantize its tokens'
// activations into records (phase 1, integer types), then multiply.
type pmm struct {
	k       *Kernels
	p       *packed
	dst, x  []float32
	rec     []byte // the tokens' activation records (integer types)
	n       int
	gblocks int // group blocks
	gper    int // groups per task
	quant   bool
	strip   bool // tasks unpack strips (strip.go)
}

// plan sets a product of n tokens by p over dst and x (and rec, the
// tokens' records): its task shape. tasks is its count of tile tasks.
func (mm *pmm) plan(p *packed, dst, x []float32, rec []byte, n, workers int) (tasks int) {
	mm.p, mm.dst, mm.x, mm.rec, mm.n = p, dst, x, rec, n
	streams := 1
	if set := mm.k.pk(); set.streams[p.typ] != nil {
		streams = set.streamGroups
	}
	mm.gper = groupsPerTask(p.groups, n, workers, streams)
	if mm.strip = mm.k.useStrips(p, n); mm.strip {
		mm.gper = stripGroups
	}
	mm.gblocks = (p.groups + mm.gper - 1) / mm.gper
	if mm.strip {
		return mm.gblocks
	}
	return mm.gblocks * ((n + tokBlock - 1) / tokBlock)
}

// groupsPerTask: a one-token product's tasks are ~8 per thread of
// contiguous groups, whole runs of streams where the matrix has enough
// (a streams tile takes them); a batch's are 4 groups (64 rows).
func groupsPerTask(groups, n, workers, streams int) int {
	if n != 1 {
		return pkGroups
	}
	g := min(max(1, groups/(8*workers)), 32)
	if streams > 1 && groups >= 2*workers*streams {
		g = max(streams, g/streams*streams)
	}
	return g
}

func (k *Kernels) pmatmul(dst, x *kernels.Buffer, n int, p *packed) {
	mm := &k.pm
	var rec []byte
	if k.pk().ints[p.typ] != nil {
		rec = k.quantRecords(kernels.HostF32(x), n, p)
	}
	*mm = pmm{k: k}
	tasks := mm.plan(p, kernels.HostF32(dst), kernels.HostF32(x), rec, n, k.pool.workers)
	k.pool.runSized(tasks, n*p.rows*p.cols, mm)
	*mm = pmm{}
}

// quantRecords quantizes n tokens' activations x into records for the
// integer tiles of p's type (as quant.QuantizeQ8, with the type's offset
// terms), in parallel, and returns them.
func (k *Kernels) quantRecords(x []float32, n int, p *packed) []byte {
	nb := p.cols / quant.Q8Block
	k.xq.ensureRecords(n * nb * recBytes)
	mm := &k.pm
	*mm = pmm{k: k, p: p, x: x, rec: k.xq.rec, quant: true}
	k.pool.runSized(n, n*p.cols*8, mm)
	*mm = pmm{}
	return k.xq.rec[:n*nb*recBytes]
}

// lastMask is the row mask of group g's store.
func (p *packed) lastMask(g int) uint16 {
	if g == p.groups-1 && p.rows%groupRows != 0 {
		return uint16(1)<<(p.rows%groupRows) - 1
	}
	return 0xffff
}

// recordOffsets are quant512Q8R's offset multiplier and halves by type.
var recordOffsets = map[quant.Type]struct {
	c      int32
	halves bool
}{quant.Q8_0: {-128, false}, quant.Q4_0: {-8, false}, quant.Q4_K: {0, false}, quant.Q6_K: {-32, true},
	quant.Q4_1: {0, false}, quant.Q5_0: {-16, false}, quant.Q5_1: {0, false}, quant.Q5_K: {0, false},
	// the grids are looked up as value+128
	quant.IQ4_NL: {-128, false}, quant.IQ4_XS: {-128, false}, quant.MXFP4: {-128, false},
	// Q2_K's records carry the halves' sums for its mins
	quant.Q2_K: {1, true}, quant.Q3_K: {-4, true}}

func (mm *pmm) task(worker, i int) {
	p, K := mm.p, mm.p.cols
	nb := K / quant.Q8Block
	rs := nb * recBytes
	if mm.quant {
		o := recordOffsets[p.typ]
		mm.k.pk().records(&mm.x[i*K], &mm.rec[i*rs], nb, o.c, o.halves)
		return
	}
	if mm.strip {
		mm.stripTask(worker, i)
		return
	}
	set := mm.k.pk()
	gb, tb := i%mm.gblocks, i/mm.gblocks
	g0, g1 := gb*mm.gper, min(p.groups, (gb+1)*mm.gper)
	t0, t1 := tb*tokBlock, min(mm.n, (tb+1)*tokBlock)
	R := p.rows
	if tiles := set.ints[p.typ]; tiles != nil {
		rec := mm.rec
		if t1-t0 == 1 {
			g := g0
			if st := set.streams[p.typ]; st != nil {
				full := g1 - g0 // the streams tile stores whole groups
				if p.lastMask(g1-1) != 0xffff {
					full--
				}
				if full = full / set.streamGroups * set.streamGroups; full > 0 {
					st(&p.data[g0*p.groupBytes], &rec[t0*rs], rs, nb, &mm.dst[t0*R+g0*groupRows], R, 0xffff, full)
					g += full
				}
			}
			if g < g1 {
				tiles[1](&p.data[g*p.groupBytes], &rec[t0*rs], rs, nb, &mm.dst[t0*R+g*groupRows], R, p.lastMask(g1-1), g1-g)
			}
			return
		}
		for g := g0; g < g1; g++ {
			for t := t0; t < t1; {
				tn := min(set.intTokens, t1-t)
				tiles[tn](&p.data[g*p.groupBytes], &rec[t*rs], rs, nb, &mm.dst[t*R+g*groupRows], R, p.lastMask(g), 1)
				t += tn
			}
		}
		return
	}
	tiles, widest := set.float[p.typ], set.floatGroups
	for t := t0; t < t1; {
		tn := min(len(widest)-1, t1-t)
		for g := g0; g < g1; {
			m := min(widest[tn], g1-g)
			tiles[tn][m](&mm.x[t*K], K, &p.data[g*p.groupBytes], p.groupBytes, K, &mm.dst[t*R+g*groupRows], R, p.lastMask(g+m-1))
			g += m
		}
		t += tn
	}
}

// ensureRecords grows the activation records to n bytes.
func (q *qscratch) ensureRecords(n int) {
	if len(q.rec) < n {
		q.rec = make([]byte, n)
	}
}

// words32 and words16 view little-endian bytes as words (amd64 only runs
// the packed kernels).
func words32(b []byte) []uint32 {
	return unsafe.Slice((*uint32)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/4)
}

func words16(b []byte) []uint16 {
	return unsafe.Slice((*uint16)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/2)
}
