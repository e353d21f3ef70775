package cpu

import (
	"math"

	"jspark/kernels"
	"jspark/kernels/quant"
	"jspark/kernels/ref"
)

// attend is one fused attention call in flight: each query token of a
// head walks its sequence's blocks in order with an online softmax
// (attn512*: scores, running max and sum, and the value sum for up to 16
// slots per call), so no score row is materialised. A token's result
// depends only on its own sequence's keys and values, in position order.
//
// A task is the query heads of one KV head (its whole group, or a share
// of it when there are too few tasks for the threads) for a run of up to
// qBlock consecutive tokens of one sequence (a prefill chunk's, or one
// decode token): chunk by chunk of keys, every (token, head) of the task
// that sees the chunk takes its step while the chunk's keys and values
// are in L1. So a KV head's keys and values are read once per task, not
// once per query head (grouped-query attention shares them), and not once
// per token (at 4,000 tokens of prefill attention was 64% of the time, at
// 0.5 instructions a cycle, when each token streamed the context from
// L3). Several queries take one step together (the fixed-width steps'
// "many"): the heads of one token when the run is short (decode), else
// consecutive tokens of one head; their chains interleave, which is what
// keeps a one-token decode from waiting on each step's latency. Each
// query still takes the same steps in the same order, so its bits depend
// neither on the run it falls in nor on the heads beside it.
type attend struct {
	k        *Kernels
	a        *kernels.Attention
	q, out   []float32
	kv       [2][]byte
	pos, seq []int32
	tables   []int32
	sinks    []float32 // (heads), nil: none
	runs     []qrun    // reused across calls
	per      int       // query heads per task
}

// qrun is tokens [from, to) of one sequence at consecutive positions.
type qrun struct{ from, to int32 }

// qBlock is the most tokens of a run: their states and outputs (qBlock ×
// head_dim floats a head) stay in L1 beside a chunk's keys and values.
const qBlock = 32

type (
	// attnFn is one query's step over n ≤ 16 slots, any head width.
	attnFn func(q *float32, k, v *byte, stride int, n int, mask uint16, hd int, scale float32, state *[2]float32, o *float32, s *[16]float32)
	// attnStepFn is the step of a fixed head width for some queries (qs
	// floats apart; states, value sums and scratch side by side).
	attnStepFn func(q *float32, qs int, k, v *byte, stride int, n int, mask uint16, scale float32, state *[2]float32, o *float32, s *float32)
	attnSteps  struct {
		one, many attnStepFn
		queries   int // of many
	}
	attnKey struct {
		f16 bool
		hd  int
	}
)

// oneHeadPerTask, set by a benchmark, makes every task one query head
// (each reads its KV head alone), the shape before heads were grouped.
var oneHeadPerTask bool

// headsPerTask is the query heads of a task: a KV head's whole group,
// unless that leaves fewer than two tasks a thread (one sequence's decode
// over few KV heads), when the group is shared out.
func headsPerTask(runs, heads, kvHeads, workers int) int {
	g := heads / kvHeads
	if oneHeadPerTask {
		return 1
	}
	parts := min(g, max(1, (2*workers+runs*kvHeads-1)/(runs*kvHeads)))
	return (g + parts - 1) / parts
}

func (at *attend) task(worker, i int) {
	a := at.a
	hd := a.HeadDim
	g := a.Heads / a.KVHeads
	parts := (g + at.per - 1) / at.per
	perRun := a.KVHeads * parts
	// The heaviest runs (latest positions) first, so that the threads end
	// together.
	run, j := at.runs[len(at.runs)-1-i/perRun], i%perRun
	kvh, part := j/parts, j%parts
	h0 := kvh*g + part*at.per
	nh := min(at.per, g-part*at.per)
	dim, kvDim := a.Heads*hd, a.KVHeads*hd
	kvOff := kvh * hd
	elem := a.K.Type.RowBytes(1)
	s := &at.k.scratch[worker]
	nq := int(run.to - run.from)
	nQ := nq * nh
	if len(s.o) < nQ*hd {
		s.o = make([]float32, nQ*hd)
	}
	if len(s.states) < nQ {
		s.states = make([][2]float32, nQ)
	}
	o := s.o[:nQ*hd]
	clear(o)
	states := s.states[:nQ] // in scratch: locals would escape to the assembly
	for t := range states {
		states[t] = [2]float32{-1e30, 0}
	}
	first := int(run.from)
	table := at.tables[int(at.seq[first])*a.TableStride:][:a.TableStride]
	bs := a.BlockSize
	f16 := a.K.Type == quant.F16
	steps, fixed := attnChunks[attnKey{f16, hd}]
	generic := attn512F32
	if f16 {
		generic = attn512F16
	}
	// Short runs take steps across heads (one token's heads share its
	// mask), longer ones across tokens.
	acrossHeads := fixed && nq < steps.queries && nh > 1
	// Query (head hh, token t) keeps its state and value sum at index x:
	// side by side with the queries it takes steps with.
	x := func(hh, t int) int {
		if acrossHeads {
			return t*nh + hh
		}
		return hh*nq + t
	}
	kb, vb := at.kv[0], at.kv[1]
	stride := kvDim * elem
	q := func(t, hh int) *float32 { return &at.q[(first+t)*dim+(h0+hh)*hd] }
	// lo(t) is the first position token t sees: 0, or its window's start.
	// Tokens are in position order, so lo and the last position seen both
	// grow with t.
	lo := func(t int) int { return ref.WindowStart(int(at.pos[first+t]), a.Window) }
	last := int(at.pos[run.to-1]) + 1 // keys the run's last token sees
	for p0 := lo(0) / bs * bs; p0 < last; p0 += bs {
		base := int(table[p0/bs]) * bs
		for j0 := 0; j0 < min(bs, last-p0); j0 += 16 {
			c0 := p0 + j0 // the chunk's first position
			off := ((base+j0)*kvDim + kvOff) * elem
			k, v := &kb[off], &vb[off]
			full := min(16, bs-j0) // slots of the chunk a token past it sees
			// see says which slots of the chunk token t sees: n of them
			// and the mask (ok false: none, nor do the later tokens).
			see := func(t int) (nn int, mask uint16, ok bool) {
				nn = min(16, min(bs, int(at.pos[first+t])+1-p0)-j0)
				skip := max(0, lo(t)-c0) // slots before the token's window
				if skip >= nn {
					return 0, 0, false
				}
				return nn, uint16(1<<nn-1) &^ uint16(1<<skip-1), true
			}
			if acrossHeads {
				for t := 0; t < nq; t++ {
					if c0 > int(at.pos[first+t]) {
						continue // the chunk lies past this token
					}
					nn, mask, ok := see(t)
					if !ok {
						break
					}
					for hh := 0; hh < nh; {
						i := x(hh, t)
						if nh-hh >= steps.queries {
							steps.many(q(t, hh), hd, k, v, stride, nn, mask, a.Scale, &states[i], &o[i*hd], &s.s64[0])
							hh += steps.queries
							continue
						}
						steps.one(q(t, hh), dim, k, v, stride, nn, mask, a.Scale, &states[i], &o[i*hd], &s.s64[0])
						hh++
					}
				}
				continue
			}
			for hh := 0; hh < nh; hh++ {
				for t := 0; t < nq; {
					if c0 > int(at.pos[first+t]) {
						t++
						continue // the chunk lies past this token
					}
					nn, mask, ok := see(t)
					if !ok {
						break // the chunk lies before this token's window, and so the later tokens'
					}
					i := x(hh, t)
					switch {
					case !fixed:
						generic(q(t, hh), k, v, stride, nn, mask, hd, a.Scale, &states[i], &o[i*hd], (*[16]float32)(s.s64[:16]))
						t++
					case nn == full && nq-t >= steps.queries && lo(t+steps.queries-1) <= c0:
						// Tokens are in position order: from here on all see the
						// whole chunk, and the last of these sees its first slot.
						steps.many(q(t, hh), dim, k, v, stride, nn, mask, a.Scale, &states[i], &o[i*hd], &s.s64[0])
						t += steps.queries
					default:
						steps.one(q(t, hh), dim, k, v, stride, nn, mask, a.Scale, &states[i], &o[i*hd], &s.s64[0])
						t++
					}
				}
			}
		}
	}
	for hh := 0; hh < nh; hh++ {
		for t := range nq {
			i := x(hh, t)
			out := at.out[(first+t)*dim+(h0+hh)*hd:][:hd]
			scale := sinkScale(&states[i], at.sinks, h0+hh)
			for d, v := range o[i*hd : (i+1)*hd] {
				out[d] = v * scale
			}
		}
	}
}

// sinkScale is what a head's value sum is multiplied by at the end: 1/l,
// with the online softmax's state (m, l); with a sink logit s, the sink
// joins the denominator, m' = max(m, s), and the sum is rescaled to m':
// c/(l·c + e^(s-m')) with c = e^(m-m').
func sinkScale(state *[2]float32, sinks []float32, h int) float32 {
	if sinks == nil {
		return 1 / state[1]
	}
	m, s := state[0], sinks[h]
	mx := max(m, s)
	c := expf(m - mx)
	return c / (state[1]*c + expf(s-mx))
}

// splitRuns cuts the batch's tokens into runs: consecutive tokens of one
// sequence at consecutive positions, at most qBlock each.
func (at *attend) splitRuns(n int) {
	at.runs = at.runs[:0]
	for i := 0; i < n; {
		j := i + 1
		for j < n && j-i < qBlock && at.seq[j] == at.seq[i] && at.pos[j] == at.pos[j-1]+1 {
			j++
		}
		at.runs = append(at.runs, qrun{int32(i), int32(j)})
		i = j
	}
}

func (k *Kernels) Attend(a *kernels.Attention) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.isa == isaAVX512 && a.HeadDim%16 == 0 {
		at := &k.at
		*at = attend{k: k, a: a, q: kernels.HostF32(a.Q), out: kernels.HostF32(a.Out),
			kv:  [2][]byte{kernels.HostBytes(a.K), kernels.HostBytes(a.V)},
			pos: kernels.HostI32(a.Pos), seq: kernels.HostI32(a.Seq), tables: kernels.HostI32(a.Table),
			sinks: sinksOf(a), runs: at.runs}
		at.splitRuns(a.N)
		at.per = headsPerTask(len(at.runs), a.Heads, a.KVHeads, k.pool.workers)
		g := a.Heads / a.KVHeads
		tasks := len(at.runs) * a.KVHeads * ((g + at.per - 1) / at.per)
		k.pool.runSized(tasks, a.N*a.Heads*a.HeadDim*2*(a.MaxPos+1), at)
		*at = attend{runs: at.runs[:0]}
		return
	}
	if (a.K.Type != quant.F32 && a.K.Type != quant.F16) || a.Window > 0 || a.Sinks != nil {
		// NOTE: off AVX-512 only plain causal attention has its own
		// kernel; the rest is the reference's (sliding windows and sinks
		// are gpt-oss's, a model too large for such a machine).
		k.Kernels.Attend(a)
		return
	}
	ag := &k.ag
	*ag = attendGo{k: k, a: a, q: kernels.HostF32(a.Q), out: kernels.HostF32(a.Out),
		pos: kernels.HostI32(a.Pos), seq: kernels.HostI32(a.Seq), tables: kernels.HostI32(a.Table)}
	if a.K.Type == quant.F16 {
		ag.kv16 = [2][]uint16{words16(kernels.HostBytes(a.K)), words16(kernels.HostBytes(a.V))}
		ag.cvt = cvtHalvesGo
		if k.isa >= isaAVX2 && a.HeadDim%8 == 0 {
			ag.cvt = cvtHalvesAsm
		}
	} else {
		ag.kv = [2][]float32{kernels.HostF32(a.K), kernels.HostF32(a.V)}
	}
	k.pool.runSized(a.N*a.Heads, a.N*a.Heads*a.HeadDim*2*(a.MaxPos+1), ag)
	*ag = attendGo{}
}

func sinksOf(a *kernels.Attention) []float32 {
	if a.Sinks == nil {
		return nil
	}
	return kernels.HostF32(a.Sinks)
}

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
}

func (ag *attendGo) task(worker, task int) {
	a := ag.a
	i, h := task/a.Heads, task%a.Heads
	dim, kvDim := a.Heads*a.HeadDim, a.KVHeads*a.HeadDim
	q := ag.q[i*dim+h*a.HeadDim:][:a.HeadDim]
	out := ag.out[i*dim+h*a.HeadDim:][:a.HeadDim]
	kvOff := (h / (a.Heads / a.KVHeads)) * a.HeadDim
	n := int(ag.pos[i]) + 1
	table := ag.tables[int(ag.seq[i])*a.TableStride:][:a.TableStride]
	s := &ag.k.scratch[worker]
	if cap(s.scores) < n {
		s.scores = make([]float32, n+n/2)
	}
	scores := s.scores[:n]
	if ag.cvt != nil {
		if len(s.row) < a.HeadDim {
			s.row = make([]float32, a.HeadDim)
		}
		attendOneF16(out, q, scores, table, a.BlockSize, ag.kv16, kvDim, kvOff, a.Scale, s.row[:a.HeadDim], ag.cvt)
	} else if a.HeadDim == 8 {
		attend8(out, q, scores, table, a.BlockSize, ag.kv[0], ag.kv[1], kvDim, kvOff, a.Scale)
	} else {
		attendOne(out, q, scores, table, a.BlockSize, ag.kv[0], ag.kv[1], kvDim, kvOff, a.Scale)
	}
}

// attendOne is one query head over its sequence's paged K/V. Positions are
// walked block by block (no division per position); short heads use an
// inlined dot, which beats a SIMD call below 32 lanes.
func attendOne(out, q, scores []float32, table []int32, bs int, K, V []float32, kvDim, kvOff int, scale float32) {
	n := len(scores)
	hd := len(q)
	maxS := float32(math.Inf(-1))
	for p0 := 0; p0 < n; p0 += bs {
		base := int(table[p0/bs]) * bs
		for j := 0; j < bs && p0+j < n; j++ {
			k := K[(base+j)*kvDim+kvOff:][:hd]
			var sc float32
			if hd >= 32 {
				sc = quant.DotF32(q, k)
			} else {
				for d, x := range q {
					sc += x * k[d]
				}
			}
			sc *= scale
			scores[p0+j] = sc
			maxS = max(maxS, sc)
		}
	}
	sum := expScores(scores, maxS)
	clear(out)
	inv := 1 / sum
	for p0 := 0; p0 < n; p0 += bs {
		base := int(table[p0/bs]) * bs
		for j := 0; j < bs && p0+j < n; j++ {
			w := scores[p0+j] * inv
			v := V[(base+j)*kvDim+kvOff:][:hd]
			for d := range out {
				out[d] += w * v[d]
			}
		}
	}
}

// attendOneF16 is attendOne over F16 keys and values, each row converted
// to floats (row) by cvt as it is read.
func attendOneF16(out, q, scores []float32, table []int32, bs int, kv [2][]uint16, kvDim, kvOff int, scale float32, row []float32, cvt func([]float32, []uint16)) {
	n := len(scores)
	hd := len(q)
	maxS := float32(math.Inf(-1))
	for p0 := 0; p0 < n; p0 += bs {
		base := int(table[p0/bs]) * bs
		for j := 0; j < bs && p0+j < n; j++ {
			cvt(row, kv[0][(base+j)*kvDim+kvOff:][:hd])
			var sc float32
			if hd >= 32 {
				sc = quant.DotF32(q, row)
			} else {
				for d, x := range q {
					sc += x * row[d]
				}
			}
			sc *= scale
			scores[p0+j] = sc
			maxS = max(maxS, sc)
		}
	}
	sum := expScores(scores, maxS)
	clear(out)
	inv := 1 / sum
	for p0 := 0; p0 < n; p0 += bs {
		base := int(table[p0/bs]) * bs
		for j := 0; j < bs && p0+j < n; j++ {
			w := scores[p0+j] * inv
			cvt(row, kv[1][(base+j)*kvDim+kvOff:][:hd])
			for d := range out {
				out[d] += w * row[d]
			}
		}
	}
}

func cvtHalvesGo(dst []float32, src []uint16) {
	for i, h := range src {
		dst[i] = quant.F16ToF32(h)
	}
}

func cvtHalvesAsm(dst []float32, src []uint16) { cvt256F16(&dst[0], &src[0], len(src)) }

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
func attend8(out, q, scores []float32, table []int32, bs int, K, V []float32, kvDim, kvOff int, scale float32) {
	n := len(scores)
	qq := (*[8]float32)(q)
	maxS := float32(math.Inf(-1))
	for p0 := 0; p0 < n; p0 += bs {
		row := int(table[p0/bs])*bs*kvDim + kvOff
		m := min(bs, n-p0)
		sc := scores[p0 : p0+m]
		for j := range sc {
			k := (*[8]float32)(K[row+j*kvDim:])
			d := qq[0]*k[0] + qq[1]*k[1] + qq[2]*k[2] + qq[3]*k[3] + qq[4]*k[4] + qq[5]*k[5] + qq[6]*k[6] + qq[7]*k[7]
			d *= scale
			sc[j] = d
			maxS = max(maxS, d)
		}
	}
	sum := expScores(scores, maxS)
	var o [8]float32
	for p0 := 0; p0 < n; p0 += bs {
		row := int(table[p0/bs])*bs*kvDim + kvOff
		m := min(bs, n-p0)
		for j, w := range scores[p0 : p0+m] {
			v := (*[8]float32)(V[row+j*kvDim:])
			o[0] += w * v[0]
			o[1] += w * v[1]
			o[2] += w * v[2]
			o[3] += w * v[3]
			o[4] += w * v[4]
			o[5] += w * v[5]
			o[6] += w * v[6]
			o[7] += w * v[7]
		}
	}
	inv := 1 / sum
	for d := range o {
		out[d] = o[d] * inv
	}
}
