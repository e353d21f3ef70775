package cpu

import (
	"jspark/kernels"
	"jspark/kernels/quant"
	"jspark/kernels/ref"
)

// attend is one fused attention call in flight: each query token of a
// head walks its sequence's blocks in order with an online softmax
// (attn512* on AVX-512, attn256* on AVX2: scores, running max and sum,
// and the value sum for up to 16 slots per call), so no score row is
// materialised. A token's result
// depends only on its own sequence's keys and values, in position order.
//
// Positions fall in segments of segLen: a query's softmax runs over each
// segment from a fresh state, and the segments' states are folded into
// the result in position order (foldSeg). The boundaries are positions,
// not threads, so a query's bits are the same whether one task walks all
// its segments (a prefill run, folding as it crosses each boundary) or
// each segment is a task of its own whose state is folded after the pool
// has run (a decode, split by positions: flash-decoding).
//
// A task is a run of up to qBlock consecutive tokens of one sequence, the
// query heads of some KV heads (one KV head's group or a share of it, or
// several whole groups), and all the positions the run sees or one
// segment of them. Chunk by chunk of 16 keys, every (token, head) of the
// task that sees the chunk takes its step while the chunk's keys and
// values are in L1. So a KV head's keys and values are read once per
// task, not once per query head (grouped-query attention shares them),
// and not once per token (at 4,000 tokens of prefill attention was 64% of
// the time, at 0.5 instructions a cycle, when each token streamed the
// context from L3). A decode's task reads whole slots, every KV head, of
// one segment: each page once, front to back, by one thread (a task per
// KV head read the 1B shape's 32K-token F16 context at 4 GB/s, 128 bytes
// of every 1 KB slot at a time, on 8 tasks for the threads).
//
// Several queries take one step together (the fixed-width steps'
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
	path     attnPath
	seg      int    // segLen(a.BlockSize)
	runs     []qrun // reused across calls, as are tasks and the partials
	tasks    []atask
	// The split runs' segment states and value sums: query (token t, head
	// h) of run r keeps segment s's at r.part + (t·heads + h)·r.segs +
	// s - r.seg0.
	pst []([2]float32)
	po  []float32
}

// qrun is tokens [from, to) of one sequence at consecutive positions; a
// split run's tasks are its segments seg0.. seg0+segs-1 (segs 0: not split).
type qrun struct {
	from, to         int32
	seg0, segs, part int32
}

// atask is query heads [h0, h0+nh) of a run, over all the positions its
// tokens see (seg < 0) or over segment seg.
type atask struct{ run, h0, nh, seg int32 }

// qBlock is the most tokens of a run: their states and outputs (qBlock ×
// head_dim floats a head) stay in L1 beside a chunk's keys and values.
const qBlock = 32

// splitTokens is the most tokens of a run that is split by segments:
// shorter runs (decode, speculative drafts) read more keys than they do
// work on them, longer ones share each chunk among their tokens.
const splitTokens = 4

// attnSegment is the positions of a segment (a multiple of the block size
// near it); tests make it short to cross many boundaries.
var attnSegment = 1024

func segLen(bs int) int { return max(1, attnSegment/bs) * bs }

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
	// attnPath is the steps of one attention call: fixed-width ones
	// (fixed) or the any-width one, and stage, if set, which writes each
	// chunk's strips as floats for the steps to read (the AVX2 steps take
	// F32 alone).
	attnPath struct {
		steps   attnSteps
		fixed   bool
		generic attnFn
		stage   func(dst, k, v *byte, stride, rows, hd int)
	}
)

// oneHeadPerTask, set by a benchmark, makes every task one query head
// (each reads its KV head alone), the shape before heads were grouped;
// noSplit, likewise, keeps decode runs whole (a task per KV head), and
// noPrefetch leaves the next chunk to the hardware's prefetchers.
var oneHeadPerTask, noSplit, noPrefetch bool

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

// plan cuts the batch into runs and tasks. A short run whose tokens see
// more than one segment is split: a task per segment and share of the KV
// heads, enough tasks for two a thread. The heaviest runs (latest
// positions) come first, so that the threads end together.
func (at *attend) plan(workers int) {
	a := at.a
	at.splitRuns(a.N)
	g := a.Heads / a.KVHeads
	whole, segs, part := 0, 0, 0
	for i := range at.runs {
		r := &at.runs[i]
		nq := int(r.to - r.from)
		s0 := ref.WindowStart(int(at.pos[r.from]), a.Window) / at.seg
		s1 := int(at.pos[r.to-1]) / at.seg
		if noSplit || oneHeadPerTask || nq > splitTokens || s1 == s0 {
			whole++
			continue
		}
		r.seg0, r.segs, r.part = int32(s0), int32(s1-s0+1), int32(part)
		part += nq * a.Heads * (s1 - s0 + 1)
		segs += s1 - s0 + 1
	}
	if cap(at.pst) < part {
		at.pst = make([][2]float32, part+part/2)
	}
	if cap(at.po) < part*a.HeadDim {
		at.po = make([]float32, (part+part/2)*a.HeadDim)
	}
	at.pst, at.po = at.pst[:part], at.po[:part*a.HeadDim]
	per := headsPerTask(max(1, whole), a.Heads, a.KVHeads, workers)
	kvPer := a.KVHeads
	if segs > 0 {
		parts := min(a.KVHeads, (2*workers+segs-1)/segs)
		kvPer = (a.KVHeads + parts - 1) / parts
	}
	for i := len(at.runs) - 1; i >= 0; i-- {
		r := at.runs[i]
		if r.segs == 0 {
			for kvh := 0; kvh < a.KVHeads; kvh++ {
				for h := 0; h < g; h += per {
					at.tasks = append(at.tasks, atask{int32(i), int32(kvh*g + h), int32(min(per, g-h)), -1})
				}
			}
			continue
		}
		for s := r.seg0 + r.segs - 1; s >= r.seg0; s-- {
			for kvh := 0; kvh < a.KVHeads; kvh += kvPer {
				at.tasks = append(at.tasks, atask{int32(i), int32(kvh * g), int32(min(kvPer, a.KVHeads-kvh) * g), s})
			}
		}
	}
}

func (at *attend) task(worker, i int) {
	a := at.a
	hd := a.HeadDim
	g := a.Heads / a.KVHeads
	tk := at.tasks[i]
	run := at.runs[tk.run]
	h0, nh := int(tk.h0), int(tk.nh)
	dim, kvDim := a.Heads*hd, a.KVHeads*hd
	elem := a.K.Type.RowBytes(1)
	s := &at.k.scratch[worker]
	nq := int(run.to - run.from)
	nQ := nq * nh
	// A query's segment state and value sum come first, then (a whole
	// run's) what the segments before have folded into.
	if len(s.o) < 2*nQ*hd {
		s.o = make([]float32, 2*nQ*hd)
	}
	if len(s.states) < 2*nQ {
		s.states = make([][2]float32, 2*nQ)
	}
	o, sumO := s.o[:nQ*hd], s.o[nQ*hd:2*nQ*hd]
	states, sumStates := s.states[:nQ], s.states[nQ:2*nQ] // in scratch: locals would escape to the assembly
	resetStates(states, o)
	resetStates(sumStates, sumO)
	first := int(run.from)
	table := at.tables[int(at.seq[first])*a.TableStride:][:a.TableStride]
	bs := a.BlockSize
	steps, fixed, generic, stage := at.path.steps, at.path.fixed, at.path.generic, at.path.stage
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
	rs := stride // the steps' row stride
	if stage != nil {
		if len(s.kv) < 2*16*hd*4 {
			s.kv = make([]byte, 2*16*hd*4)
		}
		rs = hd * 4
	}
	q := func(t, hh int) *float32 { return &at.q[(first+t)*dim+(h0+hh)*hd] }
	// lo(t) is the first position token t sees: 0, or its window's start.
	// Tokens are in position order, so lo and the last position seen both
	// grow with t.
	lo := func(t int) int { return ref.WindowStart(int(at.pos[first+t]), a.Window) }
	last := int(at.pos[run.to-1]) + 1 // keys the run's last token sees
	from, to := lo(0)/bs*bs, last
	if tk.seg >= 0 {
		from, to = max(from, int(tk.seg)*at.seg), min(to, int(tk.seg+1)*at.seg)
	}
	for p0 := from; p0 < to; p0 += bs {
		if p0%at.seg == 0 && tk.seg < 0 {
			foldSegs(sumStates, sumO, states, o, hd)
		}
		base := int(table[p0/bs]) * bs
		for j0 := 0; j0 < min(bs, last-p0); j0 += 16 {
			c0 := p0 + j0          // the chunk's first position
			full := min(16, bs-j0) // slots of the chunk a token past it sees
			// The next chunk's slots, prefetched strip by strip beside
			// this chunk's steps (pf < 0: none).
			pf, pn := -1, 0
			if pq := c0 + full; pq < to {
				pf, pn = int(table[pq/bs])*bs+pq%bs, min(16, bs-pq%bs, to-pq)
			}
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
			// The task's heads of each KV head, whose keys and values are
			// one strip of the chunk's slots.
			for kvh := h0 / g; kvh*g < h0+nh; kvh++ {
				off := ((base+j0)*kvDim + kvh*hd) * elem
				k, v := &kb[off], &vb[off]
				if pf >= 0 && !noPrefetch {
					off := (pf*kvDim + kvh*hd) * elem
					attnPrefetch512(&kb[off], &vb[off], stride, pn, hd*elem/64)
				}
				if stage != nil {
					stage(&s.kv[0], k, v, stride, min(full, last-c0), hd)
					k, v = &s.kv[0], &s.kv[16*hd*4]
				}
				ha, hb := max(h0, kvh*g)-h0, min(h0+nh, (kvh+1)*g)-h0
				if acrossHeads {
					for t := 0; t < nq; t++ {
						if c0 > int(at.pos[first+t]) {
							continue // the chunk lies past this token
						}
						nn, mask, ok := see(t)
						if !ok {
							break
						}
						for hh := ha; hh < hb; {
							i := x(hh, t)
							if hb-hh >= steps.queries {
								steps.many(q(t, hh), hd, k, v, rs, nn, mask, a.Scale, &states[i], &o[i*hd], &s.s64[0])
								hh += steps.queries
								continue
							}
							steps.one(q(t, hh), dim, k, v, rs, nn, mask, a.Scale, &states[i], &o[i*hd], &s.s64[0])
							hh++
						}
					}
					continue
				}
				for hh := ha; hh < hb; hh++ {
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
							generic(q(t, hh), k, v, rs, nn, mask, hd, a.Scale, &states[i], &o[i*hd], (*[16]float32)(s.s64[:16]))
							t++
						case nn == full && nq-t >= steps.queries && lo(t+steps.queries-1) <= c0:
							// Tokens are in position order: from here on all see the
							// whole chunk, and the last of these sees its first slot.
							steps.many(q(t, hh), dim, k, v, rs, nn, mask, a.Scale, &states[i], &o[i*hd], &s.s64[0])
							t += steps.queries
						default:
							steps.one(q(t, hh), dim, k, v, rs, nn, mask, a.Scale, &states[i], &o[i*hd], &s.s64[0])
							t++
						}
					}
				}
			}
		}
	}
	if tk.seg >= 0 {
		// A segment's states wait for the others (fold).
		ns := int(run.segs)
		for t := range nq {
			for hh := range nh {
				i := x(hh, t)
				pi := int(run.part) + (t*a.Heads+h0+hh)*ns + int(tk.seg-run.seg0)
				at.pst[pi] = states[i]
				copy(at.po[pi*hd:(pi+1)*hd], o[i*hd:(i+1)*hd])
			}
		}
		return
	}
	foldSegs(sumStates, sumO, states, o, hd)
	for hh := 0; hh < nh; hh++ {
		for t := range nq {
			i := x(hh, t)
			at.finish(first+t, h0+hh, &sumStates[i], sumO[i*hd:(i+1)*hd])
		}
	}
}

// fold merges the split runs' segment states, in segment order, into
// their outputs.
func (at *attend) fold() {
	a := at.a
	hd := a.HeadDim
	s := &at.k.scratch[0]
	if len(s.o) < hd {
		s.o = make([]float32, hd)
	}
	if len(s.states) < 1 {
		s.states = make([][2]float32, 1)
	}
	sumO, st := s.o[:hd], &s.states[0]
	for _, r := range at.runs {
		ns := int(r.segs)
		if ns == 0 {
			continue
		}
		for t := r.from; t < r.to; t++ {
			for h := range a.Heads {
				*st = [2]float32{-1e30, 0}
				clear(sumO)
				pi := int(r.part) + (int(t-r.from)*a.Heads+h)*ns
				for j := pi; j < pi+ns; j++ {
					foldSeg(st, sumO, &at.pst[j], at.po[j*hd:(j+1)*hd])
				}
				at.finish(int(t), h, st, sumO)
			}
		}
	}
}

// finish writes token i's head h: its value sum o, scaled by its state.
func (at *attend) finish(i, h int, state *[2]float32, o []float32) {
	hd := len(o)
	out := at.out[i*at.a.Heads*hd+h*hd:][:hd]
	scale := sinkScale(state, at.sinks, h)
	for d, v := range o {
		out[d] = v * scale
	}
}

// resetStates makes every query's state fresh: nothing seen.
func resetStates(states [][2]float32, o []float32) {
	for i := range states {
		states[i] = [2]float32{-1e30, 0}
	}
	clear(o)
}

// foldSegs folds each query's segment state into its sum (foldSeg) and
// starts the next segment fresh.
func foldSegs(sums [][2]float32, sumO []float32, states [][2]float32, o []float32, hd int) {
	for i := range states {
		foldSeg(&sums[i], sumO[i*hd:(i+1)*hd], &states[i], o[i*hd:(i+1)*hd])
	}
	resetStates(states, o)
}

// foldSeg merges one segment's online-softmax state (m, l) and value sum
// o into the sum of the segments before: both rescaled to the larger
// maximum. A segment that saw nothing (m -1e30, l and o 0) leaves the sum
// as it was, bit for bit, and a first segment becomes the sum as it is
// (its factor is e^0 = 1, the empty sum's e^-1e30 = 0): short contexts
// give the bits of one softmax over all.
//
//go:noinline
func foldSeg(sum *[2]float32, sumO []float32, st *[2]float32, o []float32) {
	m := max(sum[0], st[0])
	a, b := expf(sum[0]-m), expf(st[0]-m)
	sum[0], sum[1] = m, sum[1]*a+st[1]*b
	o = o[:len(sumO)]
	for d, v := range o {
		sumO[d] = sumO[d]*a + v*b
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
		at.runs = append(at.runs, qrun{from: int32(i), to: int32(j)})
		i = j
	}
}

// fusedPath is the fused attention's steps for a on this instruction
// set: AVX-512's for head widths that are a multiple of 16, else AVX2's
// for multiples of 8 (on AVX-512 machines too); ok false: neither (the
// portable path).
func (k *Kernels) fusedPath(a *kernels.Attention) (p attnPath, ok bool) {
	f16 := a.K.Type == quant.F16
	if !f16 && a.K.Type != quant.F32 {
		return p, false
	}
	hd := a.HeadDim
	switch {
	case k.isa == isaAVX512 && hd%16 == 0:
		p.steps, p.fixed = attnChunks[attnKey{f16, hd}]
		p.generic = attn512F32
		if f16 {
			p.generic = attn512F16
		}
	case k.isa >= isaAVX2 && hd%8 == 0:
		p.steps, p.fixed = attnChunks256[hd]
		p.generic, p.stage = attn256F32, attnStage256F32
		if f16 {
			p.stage = attnStage256F16
		}
	default:
		return p, false
	}
	return p, true
}

func (k *Kernels) Attend(a *kernels.Attention) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if path, ok := k.fusedPath(a); ok {
		at := &k.at
		*at = attend{k: k, a: a, q: kernels.HostF32(a.Q), out: kernels.HostF32(a.Out),
			kv:  [2][]byte{kernels.HostBytes(a.K), kernels.HostBytes(a.V)},
			pos: kernels.HostI32(a.Pos), seq: kernels.HostI32(a.Seq), tables: kernels.HostI32(a.Table),
			sinks: sinksOf(a), path: path, seg: segLen(a.BlockSize),
			runs: at.runs, tasks: at.tasks[:0], pst: at.pst, po: at.po}
		at.plan(k.pool.workers)
		k.pool.runSized(len(at.tasks), a.N*a.Heads*a.HeadDim*2*(a.MaxPos+1), at)
		at.fold()
		*at = attend{runs: at.runs[:0], tasks: at.tasks[:0], pst: at.pst[:0], po: at.po[:0]}
		return
	}
	if a.K.Type != quant.F32 && a.K.Type != quant.F16 {
		k.Kernels.Attend(a) // the reference's: no kernel reads other pools
		return
	}
	ag := &k.ag
	*ag = attendGo{k: k, a: a, q: kernels.HostF32(a.Q), out: kernels.HostF32(a.Out),
		pos: kernels.HostI32(a.Pos), seq: kernels.HostI32(a.Seq), tables: kernels.HostI32(a.Table), sinks: sinksOf(a)}
	if a.K.Type == quant.F16 {
		ag.kv16 = [2][]uint16{words16(kernels.HostBytes(a.K)), words16(kernels.HostBytes(a.V))}
		ag.cvt = cvtHalvesGo
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
