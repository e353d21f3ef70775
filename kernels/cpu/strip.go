package cpu

import "jspark/kernels/quant"

// A batch product of a type with a strip form (Q4_K and Q6_K, on AVX2 and
// AVX-VNNI) unpacks each group of packed rows once into a per-worker
// strip (asm/strip256.go states its layout: values as bytes, scales as
// the products the packed tile forms per token) and runs every token of
// the batch over it: the unpacking and the scales' conversions are paid
// once per weight rather than once per token. The integer sums and the
// float combine are packed.go's, so outputs keep their bits (and batch
// invariance) whichever tiles ran.

// stripMin is the fewest tokens a product unpacks strips for: below it
// the unpacking is not repaid.
const stripMin = 16

// stripGroups is the groups a strip task unpacks (4 groups of 16 rows at
// K = 5632: 450 KB, within L2), and stripTokens the tokens it runs over
// them a block at a time (60: twenty tiles of 3; their records, 180 KB
// at K = 5632, stay in L2 across the groups).
const (
	stripGroups = 4
	stripTokens = 20 * pk256StripTokens
)

// stripForm is a type's strip: its bytes per 32-element block of a group
// and how a group's packed bytes become it.
type stripForm struct {
	blockBytes int
	unpack     func(dst, src []byte, nb int)
}

var stripForms = map[quant.Type]stripForm{
	quant.Q4_K: {640, unpackQ4K},
	quant.Q6_K: {832, unpackQ6K},
}

// unpackQ4K writes the strip of one packed Q4_K group of nb blocks
// (unpack256Q4K; unpackQ4KGo in the tests is its reference).
func unpackQ4K(dst, src []byte, nb int) {
	nsb := nb / 8
	unpack256Q4K(&dst[:5120*nsb][0], &src[:2368*nsb][0], nsb)
}

// unpackQ6K writes the strip of one packed Q6_K group of nb blocks
// (unpack256Q6K; unpackQ6KGo in the tests is its reference).
func unpackQ6K(dst, src []byte, nb int) {
	nsb := nb / 8
	unpack256Q6K(&dst[:6656*nsb][0], &src[:3360*nsb][0], nsb)
}

// useStrips reports whether a product of n tokens by p runs over strips,
// and if so readies the workers' scratch (before the tasks run: each then
// grows only its own).
func (k *Kernels) useStrips(p *packed, n int) bool {
	if n < stripMin || k.pk().strips[p.typ] == nil {
		return false
	}
	if len(k.strips) < k.pool.workers {
		k.strips = make([][]byte, k.pool.workers)
	}
	return true
}

// stripBuf is worker's strip scratch, at least n bytes.
func (k *Kernels) stripBuf(worker, n int) []byte {
	if len(k.strips[worker]) < n {
		k.strips[worker] = make([]byte, n)
	}
	return k.strips[worker][:n]
}

// stripTask is task gb of a strip product: it unpacks group block gb and
// runs all the tokens over it.
func (mm *pmm) stripTask(worker, gb int) {
	p := mm.p
	nb := p.cols / quant.Q8Block
	rs := nb * recBytes
	g0, g1 := gb*mm.gper, min(p.groups, (gb+1)*mm.gper)
	f := stripForms[p.typ]
	gsize := nb * f.blockBytes
	buf := mm.k.stripBuf(worker, (g1-g0)*gsize)
	for g := g0; g < g1; g++ {
		f.unpack(buf[(g-g0)*gsize:(g-g0+1)*gsize], p.data[g*p.groupBytes:(g+1)*p.groupBytes], nb)
	}
	tiles, R := mm.k.pk().strips[p.typ], p.rows
	widest := len(tiles) - 1
	for tiles[widest] == nil {
		widest--
	}
	for t0 := 0; t0 < mm.n; t0 += stripTokens {
		t1 := min(mm.n, t0+stripTokens)
		for g := g0; g < g1; g++ {
			for t := t0; t < t1; {
				tn := min(widest, t1-t)
				tiles[tn](&buf[(g-g0)*gsize], &mm.rec[t*rs], rs, nb, &mm.dst[t*R+g*groupRows], R, p.lastMask(g), 1)
				t += tn
			}
		}
	}
}
