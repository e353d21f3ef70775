package server

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	jmodel "jspark/backend/model"
	"jspark/kernels/cpu"
)

// faultyDevice is the CPU device reporting a device failure at the next
// fail forward steps (-1: every one), as a GPU whose kernel faulted would
// (kernels/cuda's emulator test injects real ones).
type faultyDevice struct {
	*cpu.Kernels
	mu   sync.Mutex
	fail int
}

func (d *faultyDevice) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.fail == 0 {
		return nil
	}
	if d.fail > 0 {
		d.fail--
	}
	return errors.New("fakegpu:0: CUDA_ERROR_ILLEGAL_ADDRESS: an illegal memory access was encountered")
}

func (d *faultyDevice) set(fail int) { d.mu.Lock(); d.fail = fail; d.mu.Unlock() }

// TestDeviceErrorFailsTheStep: a device failure fails its step's request
// with a 500 naming the device, never a crash; the next request is served
// as before once the device recovers, and each one fails clearly while it
// stays broken, streamed or not.
func TestDeviceErrorFailsTheStep(t *testing.T) {
	dev := &faultyDevice{Kernels: cpu.New(2)}
	m, _, err := jmodel.Open("", dev)
	if err != nil {
		t.Fatal(err)
	}
	f := startModel(t, m, nil, nil)
	url := f.srv.URL + "/v1/chat/completions"
	body := `{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":8,"temperature":0`
	failed := func(what, got string) {
		t.Helper()
		if !strings.Contains(got, `"code":"step_failed"`) || !strings.Contains(got, `"type":"server_error"`) ||
			!strings.Contains(got, "the model's step failed: engine: step ") || !strings.Contains(got, "fakegpu:0: CUDA_ERROR_ILLEGAL_ADDRESS") {
			t.Fatalf("%s: %s", what, got)
		}
	}
	resp, want := post(t, url, "", body+"}")
	if resp.StatusCode != 200 {
		t.Fatalf("before any failure: %d %s", resp.StatusCode, want)
	}
	dev.set(1)
	resp, got := post(t, url, "", body+"}")
	if resp.StatusCode != 500 {
		t.Fatalf("a failed step answered %d %s", resp.StatusCode, got)
	}
	failed("a failed step", got)
	sameText := func(a, b string) bool { // the ids and times of two completions differ
		_, a, _ = strings.Cut(a, `"choices"`)
		_, b, _ = strings.Cut(b, `"choices"`)
		a, _, _ = strings.Cut(a, `"usage"`)
		b, _, _ = strings.Cut(b, `"usage"`)
		return a == b && a != ""
	}
	if resp, got = post(t, url, "", body+"}"); resp.StatusCode != 200 || !sameText(got, want) {
		t.Fatalf("after the device recovered: %d %s; want %s", resp.StatusCode, got, want)
	}

	dev.set(-1)
	for range 2 {
		resp, got = post(t, url, "", body+"}")
		if resp.StatusCode != 500 {
			t.Fatalf("a broken device answered %d %s", resp.StatusCode, got)
		}
		failed("a broken device", got)
	}
	resp, got = post(t, url, "", body+`,"stream":true}`)
	if resp.StatusCode != 200 || !strings.Contains(got, `"role":"assistant"`) || strings.Contains(got, `"finish_reason":"`) {
		t.Fatalf("a stream on a broken device: %d %s", resp.StatusCode, got)
	}
	failed("a stream's error event", got)

	dev.set(0)
	if resp, got = post(t, url, "", body+"}"); resp.StatusCode != 200 || !sameText(got, want) {
		t.Fatalf("after the device was mended: %d %s; want %s", resp.StatusCode, got, want)
	}
	// The reply is written when the last token is out; the engine frees the
	// sequence on its own loop just after: wait for that (a hang guard).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		s := f.e.Metrics().Snapshot()
		if s.Running == 0 && s.Waiting == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("requests left in the engine: %+v", s)
		}
	}
}
