package cpu

import (
	"sync"
	"sync/atomic"
)

// pool runs index ranges on a fixed set of goroutines. The caller takes part,
// so a pool of n uses n-1 background goroutines.
type pool struct {
	workers int
	jobs    chan *job
}

type job struct {
	fn    func(worker, i int)
	total int64
	next  atomic.Int64
	wg    sync.WaitGroup
}

func newPool(workers int) *pool {
	p := &pool{workers: workers, jobs: make(chan *job, workers)}
	for w := 1; w < workers; w++ {
		go func() {
			for j := range p.jobs {
				j.drain(w)
				j.wg.Done()
			}
		}()
	}
	return p
}

func (j *job) drain(worker int) {
	for {
		i := j.next.Add(1) - 1
		if i >= j.total {
			return
		}
		j.fn(worker, int(i))
	}
}

// run calls fn(worker, i) for i in [0, total), spread over the workers;
// worker is in [0, workers) and no two concurrent calls share one.
func (p *pool) run(total int, fn func(worker, i int)) {
	p.runSized(total, 1<<30, fn)
}

// minParallelWork is the work (multiply-adds) below which a kernel runs on
// the calling goroutine: handing tiny matrices to other cores costs more
// than it saves.
const minParallelWork = 1 << 15

// runSized is run for a job whose total work is known: small jobs stay on
// the caller.
func (p *pool) runSized(total, work int, fn func(worker, i int)) {
	if total <= 0 {
		return
	}
	if total == 1 || p.workers == 1 || work < minParallelWork {
		for i := 0; i < total; i++ {
			fn(0, i)
		}
		return
	}
	j := &job{fn: fn, total: int64(total)}
	helpers := min(p.workers-1, total-1)
	j.wg.Add(helpers)
	for h := 0; h < helpers; h++ {
		p.jobs <- j
	}
	j.drain(0)
	j.wg.Wait()
}
