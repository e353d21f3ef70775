package metrics

import (
	"context"
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
