package server

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
)

// DefaultIdleFree is how long a server waits with no request in progress
// before it hands the memory its requests freed back to the system.
const DefaultIdleFree = 5 * time.Second

// idle hands freed heap back to the operating system once no request has
// been in progress for a while: the Go runtime keeps what a burst freed for
// its reuse (200 streams dropped at random left a process that started at
// 79 MiB at 580 MiB for good), and an idle server has no use for it. Only
// requests with a body count: a health probe every second must not keep a
// server that serves nothing from ever being idle.
type idle struct {
	after    time.Duration // 0 or negative: never
	mu       sync.Mutex
	inflight int
	epoch    uint64 // requests begun: a timer armed in another epoch is stale
	timer    *time.Timer
	frees    atomic.Int64 // times the heap was handed back
}

func (d *idle) begin() {
	d.mu.Lock()
	d.inflight++
	d.epoch++
	d.mu.Unlock()
}

// end arms the timer when the last request in progress ends.
func (d *idle) end() {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.inflight--; d.inflight > 0 || d.after <= 0 {
		return
	}
	if d.timer != nil {
		d.timer.Stop()
	}
	epoch := d.epoch
	d.timer = time.AfterFunc(d.after, func() {
		d.mu.Lock()
		quiet := d.inflight == 0 && d.epoch == epoch
		d.mu.Unlock()
		if quiet {
			d.frees.Add(1)
			freeMemory()
		}
	})
}

// trackIdle counts the requests in progress for idle.
func (s *Server) trackIdle(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		if r := c.Request(); r.Body == nil || r.Body == http.NoBody {
			return next(c)
		}
		s.idle.begin()
		defer s.idle.end()
		return next(c)
	}
}
