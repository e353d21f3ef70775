package engine

import (
	"context"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// TestFinishCountedAsTheConsumerSaw: the engine runs past a stop string its
// consumer has not read yet and finishes as length; the consumer then stops
// the request (ErrStopped) on an early token. The request counts as a stop
// in vllm:request_success_total, as the client saw it, and a consumer that
// just reads to the end counts as the engine finished.
func TestFinishCountedAsTheConsumerSaw(t *testing.T) {
	e := newEngine(t, storiesModel(t), nil)
	count := func(r FinishReason) float64 {
		var m dto.Metric
		if err := e.Metrics().success.WithLabelValues(string(r)).Write(&m); err != nil {
			t.Fatal(err)
		}
		return m.GetCounter().GetValue()
	}
	for _, stopEarly := range []bool{true, false} {
		stop0, length0 := count(FinishStop), count(FinishLength)
		ctx, cancel := context.WithCancelCause(context.Background())
		ch, err := e.Submit(ctx, Request{Prompt: []int{1, 403}, MaxTokens: 8, IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		first := <-ch
		// Let the engine finish all eight tokens before the consumer reacts.
		deadline := time.Now().Add(10 * time.Second)
		for e.Metrics().Snapshot().Running+e.Metrics().Snapshot().Waiting > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if stopEarly {
			cancel(ErrStopped)
		}
		r := collect(ch)
		cancel(nil)
		if first.Finish != "" || r.finish.Finish != FinishLength || len(r.ids) != 7 {
			t.Fatalf("stopEarly %v: first %+v, then %d tokens and finish %q; want 8 tokens and length", stopEarly, first, len(r.ids), r.finish.Finish)
		}
		wantStop, wantLength := 0.0, 1.0
		if stopEarly {
			wantStop, wantLength = 1, 0
		}
		if d := count(FinishStop) - stop0; d != wantStop {
			t.Errorf("stopEarly %v: stop moved %v, want %v", stopEarly, d, wantStop)
		}
		if d := count(FinishLength) - length0; d != wantLength {
			t.Errorf("stopEarly %v: length moved %v, want %v", stopEarly, d, wantLength)
		}
	}
}
