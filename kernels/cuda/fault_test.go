//go:build cudaemu && !cuda

package cuda

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"jspark/backend/engine"
	"jspark/backend/server"
	"jspark/kernels"
	"jspark/kernels/quant"
)

// faultDevice is an emulator device of the test's own, so that an injected
// fault reaches no other test.
func faultDevice(t *testing.T) *Device {
	t.Helper()
	d, err := New(0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// TestDeviceFaultIsAnError: a refused launch, a kernel's fault and memory
// that runs out are errors the device reports once, naming itself, with no
// panic; calls after a failure do nothing until it is reported, and the
// device works again after.
func TestDeviceFaultIsAnError(t *testing.T) {
	d := faultDevice(t)
	x, y := up(t, d, []float32{1, 2, 3}), up(t, d, []float32{10, 20, 30})
	for _, c := range []struct {
		op, want string
	}{
		{"launch", "launching add (grid 1×1, block 256): CUDA_ERROR_LAUNCH_FAILED"},
		{"kernel", "Read of 12 bytes: add: CUDA_ERROR_ILLEGAL_ADDRESS"},
	} {
		t.Run(c.op, func(t *testing.T) {
			InjectFault(d, Fault{Op: c.op, Times: 1})
			d.Add(x, y, 3) // fails
			d.Add(x, y, 3) // skipped: a failure is pending
			got := []float32{-1, -1, -1}
			d.Read(kernels.F32Bytes(got), x, 0)
			err := d.Err()
			if err == nil || !strings.Contains(err.Error(), "cuda: cudaemu (host emulator): "+c.want) {
				t.Fatalf("Err() = %v, want it to say %q", err, c.want)
			}
			if got[0] != -1 || d.Err() != nil {
				t.Fatalf("after the failure: read %v, Err %v", got, d.Err())
			}
			d.Write(x, 0, kernels.F32Bytes([]float32{1, 2, 3})) // recovered: calls run
			d.Add(x, y, 3)
			if got := down(d, x, 3); got[0] != 11 || d.Err() != nil {
				t.Fatalf("after recovery x = %v, Err %v", got, d.Err())
			}
		})
	}
	InjectFault(d, Fault{Op: "alloc", Times: 1})
	if _, err := d.Alloc(quant.F32, 16); err == nil || !strings.Contains(err.Error(), "CUDA_ERROR_OUT_OF_MEMORY") {
		t.Fatalf("Alloc under an injected out-of-memory: %v", err)
	}
	if b, err := d.Alloc(quant.F32, 16); err != nil {
		t.Fatalf("Alloc after it: %v", err)
	} else {
		d.Free(b)
	}
}

// TestDeviceFaultAnswersOverHTTP: a device fault in a step fails that
// step's request with a 500 that names the device, the server and the
// engine go on, a recovered device serves the next request as before, and
// one that stays broken fails each request clearly, streamed or not.
func TestDeviceFaultAnswersOverHTTP(t *testing.T) {
	d := faultDevice(t)
	m := stories(t, d)
	eopt := engine.DefaultOptions()
	eopt.Log, eopt.KVBlocks = io.Discard, 256
	e, err := engine.New(m, eopt)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(server.New(e, server.DefaultOptions()).Handler())
	t.Cleanup(func() { srv.Close(); e.Close() })
	post := func(stream bool) (int, string) {
		t.Helper()
		body := `{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":4,"temperature":0`
		if stream {
			body += `,"stream":true`
		}
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body+"}"))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	content := func(body string) string {
		var r struct {
			Choices []struct{ Message struct{ Content string } }
		}
		if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Choices) != 1 {
			t.Fatalf("not a chat completion: %s", body)
		}
		return r.Choices[0].Message.Content
	}
	failed := func(what, body string, fault string) {
		t.Helper()
		var r struct{ Error server.APIError }
		if err := json.Unmarshal([]byte(body), &r); err != nil || r.Error.Code == nil || *r.Error.Code != "step_failed" ||
			!strings.Contains(r.Error.Message, "cuda: cudaemu (host emulator)") || !strings.Contains(r.Error.Message, fault) {
			t.Fatalf("%s: %s", what, body)
		}
	}

	code, body := post(false)
	if code != 200 {
		t.Fatalf("before any fault: %d %s", code, body)
	}
	want := content(body)

	InjectFault(d, Fault{Op: "kernel", Times: 1})
	code, body = post(false)
	if code != http.StatusInternalServerError {
		t.Fatalf("a kernel fault answered %d %s", code, body)
	}
	failed("a kernel fault", body, "CUDA_ERROR_ILLEGAL_ADDRESS")
	if code, body = post(false); code != 200 || content(body) != want {
		t.Fatalf("after the device recovered: %d %s; want %q", code, body, want)
	}

	InjectFault(d, Fault{Op: "launch"}) // every launch from now on
	for i := range 2 {
		code, body = post(false)
		if code != http.StatusInternalServerError {
			t.Fatalf("request %d to a broken device answered %d %s", i, code, body)
		}
		failed("a broken device", body, "CUDA_ERROR_LAUNCH_FAILED")
	}
	code, body = post(true) // the stream starts when the engine accepts it, before the step
	if code != 200 || !strings.Contains(body, `"role":"assistant"`) || strings.Contains(body, `"finish_reason":"`) {
		t.Fatalf("a stream on a broken device: %d %s", code, body)
	}
	_, event, _ := strings.Cut(body, "data: {\"error\"")
	event, _, _ = strings.Cut(event, "\n")
	failed("a stream's error event", `{"error"`+event, "CUDA_ERROR_LAUNCH_FAILED")

	InjectFault(d, Fault{})
	if code, body = post(false); code != 200 || content(body) != want {
		t.Fatalf("after the device was mended: %d %s; want %q", code, body, want)
	}
	if s := e.Metrics().Snapshot(); s.Running != 0 || s.Waiting != 0 {
		t.Fatalf("requests left in the engine: %+v", s)
	}
}
