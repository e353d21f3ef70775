package model

import (
	"math/rand/v2"
	"runtime"
	"sync"

	"jspark/kernels/quant"
)

// stream is a synthetic model's tensors' values, drawn in turn from one
// random stream of the seed: tensor i's values are what the stream gives
// after tensors 0 … i−1 took theirs, element after element. The writer
// asks for the tensors in order; each is drawn a chunk of rows at a time,
// the next chunk drawn while the CPUs encode the last (the stream is the
// one part that cannot be split), so writing holds two chunks of floats
// and one tensor's encoding, whatever the model's size.
type stream struct {
	seed  uint64
	draws []draw
	chunk int // about how many values a chunk holds (whole rows)

	mu   sync.Mutex
	r    *rand.Rand
	next int // the tensor whose values r stands before
}

// draw is one tensor's share of the stream: n values, rows of cols, that
// set draws in order, each from the values before it only (so any split of
// them into consecutive slices draws the same values).
type draw struct {
	n, cols int
	set     func(r *rand.Rand, v []float32)
}

func newStream(seed uint64) *stream {
	s := &stream{seed: seed, chunk: 1 << 20}
	s.r = s.rng()
	return s
}

func (s *stream) rng() *rand.Rand { return rand.New(rand.NewPCG(s.seed, 0x5eed)) }

// add appends a tensor of n values, rows of cols, and returns its index.
func (s *stream) add(n, cols int, set func(r *rand.Rand, v []float32)) int {
	s.draws = append(s.draws, draw{n, cols, set})
	return len(s.draws) - 1
}

// encode draws tensor i's values and returns them encoded as t. Asked out
// of order (a second write of the same model) it replays the stream from
// the seed.
func (s *stream) encode(i int, t quant.Type) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next > i {
		s.r, s.next = s.rng(), 0
	}
	cols := s.draws[i].cols
	rows := max(s.chunk/cols, 1) * cols // values a chunk of tensor i holds
	var bufs [2][]float32
	buf := func(k, n int) []float32 {
		if cap(bufs[k%2]) < n {
			bufs[k%2] = make([]float32, n)
		}
		return bufs[k%2][:n]
	}
	for ; s.next < i; s.next++ {
		d := s.draws[s.next]
		for off := 0; off < d.n; off += s.chunk {
			d.set(s.r, buf(0, min(s.chunk, d.n-off)))
		}
	}
	d := s.draws[i]
	s.next = i + 1
	if d.n <= rows {
		v := make([]float32, d.n)
		d.set(s.r, v)
		return quantizeRows(t, v, cols)
	}
	out := make([]byte, t.RowBytes(cols)*(d.n/cols))
	perRow := t.RowBytes(cols)
	var done chan struct{}
	for k, off := 0, 0; off < d.n; k, off = k+1, off+rows {
		v := buf(k, min(rows, d.n-off))
		d.set(s.r, v) // while chunk k−1 is encoded
		if done != nil {
			<-done
		}
		done = make(chan struct{})
		go func(dst []byte, v []float32, done chan struct{}) {
			defer close(done)
			quantizeInto(dst, t, v, cols)
		}(out[off/cols*perRow:(off+len(v))/cols*perRow], v, done)
	}
	<-done
	return out
}

// quantizeRows encodes v, rows of cols, as t.
func quantizeRows(t quant.Type, v []float32, cols int) []byte {
	out := make([]byte, t.RowBytes(cols)*(len(v)/cols))
	quantizeInto(out, t, v, cols)
	return out
}

// quantizeInto encodes v, rows of cols, as t into out: blocks never cross
// a row, so the rows are split among the CPUs.
func quantizeInto(out []byte, t quant.Type, v []float32, cols int) {
	workers := runtime.GOMAXPROCS(0)
	if workers == 1 || len(v) < 1<<16 {
		copy(out, quant.Quantize(t, v))
		return
	}
	rows, perRow := len(v)/cols, t.RowBytes(cols)
	step := max((rows+workers-1)/workers, 1)
	var wg sync.WaitGroup
	for r0 := 0; r0 < rows; r0 += step {
		r1 := min(r0+step, rows)
		wg.Go(func() { copy(out[r0*perRow:r1*perRow], quant.Quantize(t, v[r0*cols:r1*cols])) })
	}
	wg.Wait()
}
