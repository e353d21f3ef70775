package metrics

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Prometheus reads an endpoint's /metrics with vLLM's metric names.
type Prometheus struct {
	URL    string
	APIKey string // sent as a bearer key: servers that require one for /v1 may for /metrics too
	Client *http.Client
}

// vLLM's names; a metric with several label sets (one per model) is summed.
const (
	metricGeneration  = "vllm:generation_tokens_total"
	metricRunning     = "vllm:num_requests_running"
	metricWaiting     = "vllm:num_requests_waiting"
	metricPreemptions = "vllm:num_preemptions_total"
	metricPrefixHits  = "vllm:prefix_cache_hits_total"
)

// maxPageBytes bounds one /metrics page (vLLM's is tens of KiB); a var
// so that a test can lower it.
var maxPageBytes int64 = 16 << 20

// readTimeout bounds one reading: a backend that stops answering costs the
// round a missed sample, never its end.
const readTimeout = 2 * time.Second

func (p *Prometheus) Kind() Kind { return ByPrometheus }

func (p *Prometheus) Read(ctx context.Context) (Counters, error) {
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL, nil)
	if err != nil {
		return Counters{}, err
	}
	if p.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+p.APIKey)
	}
	resp, err := p.Client.Do(req)
	if err != nil {
		return Counters{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Counters{}, fmt.Errorf("%s: %s", p.URL, resp.Status)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(http.MaxBytesReader(nil, resp.Body, maxPageBytes))
	if tooLarge := new(http.MaxBytesError); errors.As(err, &tooLarge) {
		return Counters{}, fmt.Errorf("%s is over %d bytes", p.URL, maxPageBytes)
	}
	if err != nil {
		return Counters{}, fmt.Errorf("%s: %w", p.URL, err)
	}
	if fams[metricGeneration] == nil {
		return Counters{}, fmt.Errorf("%s has no %s", p.URL, metricGeneration)
	}
	return Counters{
		Generation: sum(fams[metricGeneration]), Running: sum(fams[metricRunning]),
		Waiting: sum(fams[metricWaiting]), Preemptions: sum(fams[metricPreemptions]), PrefixHits: sum(fams[metricPrefixHits]),
	}, nil
}

func sum(f *dto.MetricFamily) float64 {
	if f == nil {
		return 0
	}
	var s float64
	for _, m := range f.Metric {
		switch {
		case m.Counter != nil:
			s += m.Counter.GetValue()
		case m.Gauge != nil:
			s += m.Gauge.GetValue()
		case m.Untyped != nil:
			s += m.Untyped.GetValue()
		}
	}
	return s
}

// URL is where an OpenAI base URL's server keeps /metrics (vLLM and
// jspark: at the root, beside /v1).
func URL(base string) string {
	return strings.TrimSuffix(strings.TrimSuffix(base, "/"), "/v1") + "/metrics"
}
