package cpu

import (
	"math"

	"jspark/kernels"
	"jspark/kernels/quant"
	"jspark/kernels/ref"
)

// attendGo is the portable attention in flight (a struct, not a closure,
// so a call allocates nothing).
type attendGo struct {
	k        *Kernels
	a        *kernels.Attention
	q, out   []float32
	kv       [2][]float32
	kv16     [2][]uint16 // F16 keys and values (kv unset), cvt converts a row
	cvt      func(dst []float32, src []uint16)
	pos, seq []int32
	tables   []int32
	sinks    []float32 // each head's sink logit, nil without sinks
}

func (ag *attendGo) task(worker, task int) {
	a := ag.a
	i, h := task/a.Heads, task%a.Heads
	dim, kvDim := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	q := ag.q[i*dim+h*a.HeadDim:][:a.HeadDim]
	out := ag.out[i*dim+h*a.HeadDim:][:a.HeadDim]
	sp := span{lo: ref.WindowStart(int(ag.pos[i]), a.Window), n: int(ag.pos[i]) + 1, bs: a.BlockSize,
		table: ag.tables[int(ag.seq[i])*a.TableStride:][:a.TableStride],
		kvDim: kvDim, kvOff: (h / (a.Heads / a.KVHeads)) * a.HeadDim}
	if ag.sinks != nil {
		sp.sink, sp.hasSink = ag.sinks[h], true
	}
	s := &ag.k.scratch[worker]
	if m := sp.n - sp.lo; cap(s.scores) < m {
		s.scores = make([]float32, m+m/2)
	}
	scores := s.scores[:sp.n-sp.lo]
	switch {
	case ag.cvt != nil:
		if len(s.row) < a.HeadDim {
			s.row = make([]float32, a.HeadDim)
		}
		attendOneF16(out, q, scores, &sp, ag.kv16, a.Scale, s.row[:a.HeadDim], ag.cvt)
	case a.HeadDim == 8:
		attend8(out, q, scores, &sp, ag.kv[0], ag.kv[1], a.Scale)
	default:
		attendOne(out, q, scores, &sp, ag.kv[0], ag.kv[1], a.Scale)
	}
}

// span is the positions lo..n-1 one query head reads of its sequence's
// paged K/V (lo > 0 under a sliding window), and the head's sink logit.
type span struct {
	lo, n, bs    int
	table        []int32
	kvDim, kvOff int
	sink         float32
	hasSink      bool
}

// block is the run of positions from p on that lie in p's block: the
// pool row of p and how many positions (no division per position).
func (sp *span) block(p int) (row, m int) {
	j := p % sp.bs
	return int(sp.table[p/sp.bs])*sp.bs + j, min(sp.bs-j, sp.n-p)
}

// softmax turns scores (max maxS) into e^(score - m) in place and returns
// 1/Σ, the sink's e^(sink - m) counted in the sum (m the larger of maxS
// and the sink), as ref's softmax over the scores and the sink.
func (sp *span) softmax(scores []float32, maxS float32) float32 {
	if sp.hasSink {
		maxS = max(maxS, sp.sink)
	}
	sum := expScores(scores, maxS)
	if sp.hasSink {
		sum += expf(sp.sink - maxS)
	}
	return 1 / sum
}

// attendOne is one query head over its span. Short heads use an inlined
// dot, which beats a SIMD call below 32 lanes.
func attendOne(out, q, scores []float32, sp *span, K, V []float32, scale float32) {
	hd := len(q)
	maxS := float32(math.Inf(-1))
	for p := sp.lo; p < sp.n; {
		row, m := sp.block(p)
		for j := range m {
			k := K[(row+j)*sp.kvDim+sp.kvOff:][:hd]
			var sc float32
			if hd >= 32 {
				sc = quant.DotF32(q, k)
			} else {
				for d, x := range q {
					sc += x * k[d]
				}
			}
			sc *= scale
			scores[p-sp.lo+j] = sc
			maxS = max(maxS, sc)
		}
		p += m
	}
	inv := sp.softmax(scores, maxS)
	clear(out)
	for p := sp.lo; p < sp.n; {
		row, m := sp.block(p)
		for j := range m {
			w := scores[p-sp.lo+j] * inv
			v := V[(row+j)*sp.kvDim+sp.kvOff:][:hd]
			for d := range out {
				out[d] += w * v[d]
			}
		}
		p += m
	}
}

// attendOneF16 is attendOne over F16 keys and values, each row converted
// to floats (row) by cvt as it is read.
func attendOneF16(out, q, scores []float32, sp *span, kv [2][]uint16, scale float32, row []float32, cvt func([]float32, []uint16)) {
	hd := len(q)
	maxS := float32(math.Inf(-1))
	for p := sp.lo; p < sp.n; {
		r, m := sp.block(p)
		for j := range m {
			cvt(row, kv[0][(r+j)*sp.kvDim+sp.kvOff:][:hd])
			var sc float32
			if hd >= 32 {
				sc = quant.DotF32(q, row)
			} else {
				for d, x := range q {
					sc += x * row[d]
				}
			}
			sc *= scale
			scores[p-sp.lo+j] = sc
			maxS = max(maxS, sc)
		}
		p += m
	}
	inv := sp.softmax(scores, maxS)
	clear(out)
	for p := sp.lo; p < sp.n; {
		r, m := sp.block(p)
		for j := range m {
			w := scores[p-sp.lo+j] * inv
			cvt(row, kv[1][(r+j)*sp.kvDim+sp.kvOff:][:hd])
			for d := range out {
				out[d] += w * row[d]
			}
		}
		p += m
	}
}

func cvtHalvesGo(dst []float32, src []uint16) {
	for i, h := range src {
		dst[i] = quant.F16ToF32(h)
	}
}

// expScores turns scores into e^(score - maxS) in place and returns their sum.
func expScores(scores []float32, maxS float32) float32 {
	var sum float32
	for p, x := range scores {
		e := expf(x - maxS)
		scores[p] = e
		sum += e
	}
	return sum
}

// expf is e^x for x <= 0 in float32 (softmax arguments after subtracting the
// maximum), within 1e-6 relative: 2^(x·log2 e) split into an integer power, set in the
// exponent bits, and a degree-6 polynomial for the fraction.
func expf(x float32) float32 {
	if x < -87 {
		return 0
	}
	t := x * 1.4426950408889634 // log2(e)
	i := float32(math.Floor(float64(t) + 0.5))
	f := t - i // [-0.5, 0.5]
	// 2^f = e^(f·ln2) by its Taylor series to degree 6: within 2e-7 on this range.
	p := float32(1.5403530393381606e-4)
	p = p*f + 1.3333558146428443e-3
	p = p*f + 9.6181291076284772e-3
	p = p*f + 5.5504108664821580e-2
	p = p*f + 2.4022650695910071e-1
	p = p*f + 6.9314718055994531e-1
	p = p*f + 1
	return p * math.Float32frombits(uint32(int32(i)+127)<<23)
}

// attend8 is attendOne for 8-wide heads (the embedded model's), with the rows
// as fixed-size arrays so the compiler drops every bounds check and unrolls.
func attend8(out, q, scores []float32, sp *span, K, V []float32, scale float32) {
	qq := (*[8]float32)(q)
	maxS := float32(math.Inf(-1))
	for p := sp.lo; p < sp.n; {
		row, m := sp.block(p)
		row = row*sp.kvDim + sp.kvOff
		sc := scores[p-sp.lo:][:m]
		for j := range sc {
			k := (*[8]float32)(K[row+j*sp.kvDim:])
			d := qq[0]*k[0] + qq[1]*k[1] + qq[2]*k[2] + qq[3]*k[3] + qq[4]*k[4] + qq[5]*k[5] + qq[6]*k[6] + qq[7]*k[7]
			d *= scale
			sc[j] = d
			maxS = max(maxS, d)
		}
		p += m
	}
	inv := sp.softmax(scores, maxS)
	var o [8]float32
	for p := sp.lo; p < sp.n; {
		row, m := sp.block(p)
		row = row*sp.kvDim + sp.kvOff
		for j, w := range scores[p-sp.lo:][:m] {
			v := (*[8]float32)(V[row+j*sp.kvDim:])
			o[0] += w * v[0]
			o[1] += w * v[1]
			o[2] += w * v[2]
			o[3] += w * v[3]
			o[4] += w * v[4]
			o[5] += w * v[5]
			o[6] += w * v[6]
			o[7] += w * v[7]
		}
		p += m
	}
	for d := range o {
		out[d] = o[d] * inv
	}
}
