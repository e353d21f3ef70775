package metrics

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestPrometheusSource(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{model_name="a"} 100
vllm:generation_tokens_total{model_name="b"} 23
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="a"} 2
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="a"} 1
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{model_name="a"} 4
`)
	}))
	defer srv.Close()
	p := &Prometheus{URL: URL(srv.URL + "/v1"), Client: srv.Client()}
	c, err := p.Read(context.Background())
	if err != nil || c != (Counters{Generation: 123, Running: 2, Waiting: 1, Preemptions: 4}) {
		t.Errorf("%+v %v", c, err)
	}
	if !strings.HasSuffix(p.URL, "/metrics") || strings.Contains(p.URL, "/v1") {
		t.Errorf("metrics URL %s", p.URL)
	}
}

// A Meter sums its sources' readings (a failed one left out); with a
// backend that has no counters it counts the streamed tokens it is told
// of, reads zero while the round runs, and closes with that count.
func TestMeter(t *testing.T) {
	engine := func(c Counters) Source { return Engine(func() Counters { return c }) }
	down := &Prometheus{URL: "http://127.0.0.1:1/metrics", Client: http.DefaultClient}
	m := NewMeter([]Source{engine(Counters{Generation: 10, Running: 1}), down, engine(Counters{Generation: 5, Waiting: 2})})
	m.Streamed(100)
	atCut := m.Read(context.Background())
	if atCut != (Counters{Generation: 15, Running: 1, Waiting: 2}) || m.Final(atCut) != atCut {
		t.Errorf("counters %+v, final %+v", atCut, m.Final(atCut))
	}
	s := NewMeter([]Source{engine(Counters{Generation: 10}), nil})
	s.Streamed(7)
	s.Streamed(4)
	if c := s.Read(context.Background()); c != (Counters{}) || s.Kind() != ByStream {
		t.Errorf("stream meter reads %+v, kind %s", c, s.Kind())
	}
	if c := s.Final(Counters{Running: 1}); c != (Counters{Generation: 11, Running: 1}) {
		t.Errorf("stream meter's closing count %+v", c)
	}
	if NewMeter(nil).Kind() != ByStream || m.Kind() != ByEngine {
		t.Errorf("kinds %s %s", NewMeter(nil).Kind(), m.Kind())
	}
}

// A /metrics page past its bound is an error naming it, not a reading.
func TestPrometheusPageOverItsBound(t *testing.T) {
	// 16 MiB takes seconds to parse under -race on a loaded machine: the
	// bound is lowered to what the test page is over.
	defer func(n int64) { maxPageBytes = n }(maxPageBytes)
	maxPageBytes = 4 << 10
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "vllm:generation_tokens_total 1\n")
		for range maxPageBytes / 16 { // 30 bytes a line: twice the bound
			io.WriteString(w, "# padding padding padding pad\n")
		}
	}))
	defer srv.Close()
	p := &Prometheus{URL: srv.URL + "/metrics", Client: srv.Client()}
	if _, err := p.Read(context.Background()); err == nil || err.Error() != fmt.Sprintf("%s is over %d bytes", p.URL, maxPageBytes) {
		t.Errorf("%v", err)
	}
}
