package model

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"

	"jspark/kernels/quant"
)

// stream is a synthetic model's tensors' values, drawn in turn from one
// random stream of the seed: tensor i's values are what the stream gives
// after tensors 0 … i−1 took theirs. The writer asks for them in order;
// while it encodes one tensor, the next is drawn (the stream is the one
// part that cannot be split among CPUs).
type stream struct {
	seed  uint64
	draws []draw

	mu    sync.Mutex
	r     *rand.Rand
	next  int           // the tensor whose values r stands before
	ready int           // the tensor drawn ahead, or −1
	done  chan struct{} // closed when the draw ahead is done; nil when none runs
	bufs  [2][]float32  // tensor i's values are drawn into bufs[i%2]
}

// draw is one tensor's share of the stream: n values that set draws.
type draw struct {
	n   int
	set func(r *rand.Rand, v []float32)
}

func newStream(seed uint64) *stream {
	s := &stream{seed: seed, ready: -1}
	s.r = s.rng()
	return s
}

func (s *stream) rng() *rand.Rand { return rand.New(rand.NewPCG(s.seed, 0x5eed)) }

// add appends a tensor of n values and returns its index.
func (s *stream) add(n int, set func(r *rand.Rand, v []float32)) int {
	s.draws = append(s.draws, draw{n, set})
	return len(s.draws) - 1
}

// buf is the buffer tensor i's values are drawn into.
func (s *stream) buf(i int) []float32 {
	b := &s.bufs[i%2]
	if cap(*b) < s.draws[i].n {
		*b = make([]float32, s.draws[i].n)
	}
	return (*b)[:s.draws[i].n]
}

// floats returns tensor i's values, valid until the call after next. Asked
// out of order (a second write of the same model) it replays the stream
// from the seed.
func (s *stream) floats(i int) []float32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.done != nil {
		<-s.done
		s.done = nil
	}
	var v []float32
	if s.ready == i {
		v = s.buf(i)
	} else {
		if s.next > i {
			s.r, s.next = s.rng(), 0
		}
		for ; s.next < i; s.next++ {
			s.draws[s.next].set(s.r, s.buf(s.next))
		}
		v = s.buf(i)
		s.draws[i].set(s.r, v)
		s.next = i + 1
	}
	s.ready = -1
	if j := i + 1; j < len(s.draws) {
		done := make(chan struct{})
		s.done, s.ready = done, j
		b := s.buf(j)
		go func() {
			defer close(done)
			s.draws[j].set(s.r, b)
			s.next = j + 1
		}()
	} else {
		s.bufs = [2][]float32{} // the last tensor: the caller holds its values
	}
	return v
}

// quantizeRows encodes v, rows of cols, as t: blocks never cross a row, so
// the rows are split among the CPUs.
func quantizeRows(t quant.Type, v []float32, cols int) []byte {
	const chunk = 1 << 18 // elements a task encodes
	workers := runtime.GOMAXPROCS(0)
	if workers == 1 || len(v) <= chunk || cols <= 0 {
		return quant.Quantize(t, v)
	}
	rows, rowBytes, step := len(v)/cols, t.RowBytes(cols), max(chunk/cols, 1)
	out := make([]byte, rows*rowBytes)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				r1 := int(next.Add(int64(step)))
				r0 := r1 - step
				if r0 >= rows {
					return
				}
				r1 = min(r1, rows)
				copy(out[r0*rowBytes:r1*rowBytes], quant.Quantize(t, v[r0*cols:r1*cols]))
			}
		})
	}
	wg.Wait()
	return out
}
