package cpu

import "sync/atomic"

// runner is a parallel kernel: task(worker, i) computes piece i on worker.
type runner interface{ task(worker, i int) }

// funcRunner adapts a function.
type funcRunner func(worker, i int)

func (f funcRunner) task(worker, i int) { f(worker, i) }

// pool runs index ranges on a fixed set of goroutines that live as long as
// the kernels. The caller takes part, so a pool of n uses n-1 helpers. A
// call hands out pieces from one shared counter, so a core that another
// process slows simply takes fewer; nothing is allocated per call.
type pool struct {
	workers int
	wake    []chan struct{} // one per helper
	done    chan struct{}
	r       runner
	total   int64
	next    atomic.Int64
}

func newPool(workers int) *pool {
	p := &pool{workers: workers, done: make(chan struct{}, workers)}
	for w := 1; w < workers; w++ {
		c := make(chan struct{}, 1)
		p.wake = append(p.wake, c)
		go func() {
			for range c {
				p.drain(w)
				p.done <- struct{}{}
			}
		}()
	}
	return p
}

func (p *pool) drain(worker int) {
	for {
		i := p.next.Add(1) - 1
		if i >= p.total {
			return
		}
		p.r.task(worker, int(i))
	}
}

// minParallelWork is the work (multiply-adds) below which a kernel runs on
// the calling goroutine: handing tiny matrices to other cores costs more
// than it saves.
const minParallelWork = 1 << 15

// runSized calls r.task(worker, i) for i in [0, total), spread over the
// workers when the job's work is worth it; worker is in [0, workers) and
// no two concurrent calls share one.
func (p *pool) runSized(total, work int, r runner) {
	if total <= 0 {
		return
	}
	if total == 1 || p.workers == 1 || work < minParallelWork {
		for i := 0; i < total; i++ {
			r.task(0, i)
		}
		return
	}
	p.r, p.total = r, int64(total)
	p.next.Store(0)
	helpers := min(p.workers-1, total-1)
	for h := 0; h < helpers; h++ {
		p.wake[h] <- struct{}{}
	}
	p.drain(0)
	for h := 0; h < helpers; h++ {
		<-p.done
	}
	p.r = nil
}
