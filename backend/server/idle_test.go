package server

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"jspark/backend/engine"
)

// heldHeap is the heap the process holds from the system: in use, or free
// but not handed back (what its resident size keeps of a past burst).
func heldHeap() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapSys - m.HeapReleased
}

// dropStreams opens n streams at once, each with a prompt of random length,
// reads a random part of each and hangs up.
func dropStreams(t *testing.T, addr string, n int) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			body := fmt.Sprintf(`{"messages":[{"role":"user","content":"%s"}],"max_tokens":600,"ignore_eos":true,"stream":true}`,
				strings.Repeat("Once upon a time ", 1+rng.IntN(100)))
			fmt.Fprintf(conn, "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
			r := bufio.NewReader(conn)
			for range rng.IntN(600) {
				if _, err := r.ReadString('\n'); err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestDroppedStreamsMemoryReturnedWhenIdle: after a burst of 200
// concurrent streams dropped at random, the server hands the heap they
// freed back to the system once it is idle: it then holds no more than a
// forced collection leaves. (The Go runtime keeps freed heap for reuse,
// and an idle server runs no collection: without this the heap stayed
// twice its live size, and a process of 79 MiB at 580 MiB.)
func TestDroppedStreamsMemoryReturnedWhenIdle(t *testing.T) {
	f := start(t, func(o *engine.Options) { o.MaxSeqs, o.MaxWaiting = 256, 1024 }, nil)
	s := New(f.e, serverOptions(func(o *Options) { o.IdleFree = 100 * time.Millisecond }))
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	before := heldHeap()
	dropStreams(t, srv.Listener.Addr().String(), 200)
	burst := heldHeap()
	guard := time.Now().Add(60 * time.Second) // a hang guard, not a timing
	for s.idle.frees.Load() == 0 && time.Now().Before(guard) {
		time.Sleep(20 * time.Millisecond)
	}
	for freeing.Load() && time.Now().Before(guard) { // the release itself runs on its own goroutine
		time.Sleep(20 * time.Millisecond)
	}
	idle := heldHeap()
	debug.FreeOSMemory()
	floor := heldHeap()
	t.Logf("heap held: %d MiB before, %d MiB after the burst, %d MiB idle, %d MiB after a forced collection", before>>20, burst>>20, idle>>20, floor>>20)
	if s.idle.frees.Load() == 0 || idle > floor+16<<20 {
		t.Fatalf("the idle server holds %d MiB of heap, %d MiB more than it needs (%d releases)", idle>>20, (idle-floor)>>20, s.idle.frees.Load())
	}
}
