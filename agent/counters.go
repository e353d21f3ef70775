package agent

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Counters are a backend's serving counters at one moment.
type Counters struct {
	Generation  float64 `json:"generation_tokens"` // accepted output tokens, cumulative
	Running     float64 `json:"running"`
	Waiting     float64 `json:"waiting"`
	Preemptions float64 `json:"preemptions"` // cumulative
	PrefixHits  float64 `json:"prefix_hits"` // prompt tokens found in the prefix cache, cumulative
}

// Source reads a backend's counters.
type Source interface {
	Read(ctx context.Context) (Counters, error)
	Kind() string // "engine", "prometheus" or "stream"
}

// FuncSource reads an in-process engine.
type FuncSource func() Counters

func (f FuncSource) Read(context.Context) (Counters, error) { return f(), nil }
func (FuncSource) Kind() string                             { return "engine" }

// Prometheus reads an endpoint's /metrics with vLLM's metric names, which
// jspark serve exports too.
type Prometheus struct {
	URL    string
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

func (p *Prometheus) Kind() string { return "prometheus" }

func (p *Prometheus) Read(ctx context.Context) (Counters, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL, nil)
	if err != nil {
		return Counters{}, err
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
	fams, err := parser.TextToMetricFamilies(resp.Body)
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

// MetricsURL is where an OpenAI base URL's server keeps /metrics (vLLM and
// jspark: at the root, beside /v1).
func MetricsURL(base string) string {
	return strings.TrimSuffix(strings.TrimSuffix(base, "/"), "/v1") + "/metrics"
}
