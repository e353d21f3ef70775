package engine

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the engine's counters, exported under vLLM's metric names so
// that dashboards and the work runner read jspark and vLLM alike. Counters
// move as tokens are accepted, including tokens of unfinished requests.
type Metrics struct {
	Registry *prometheus.Registry

	running      prometheus.Gauge
	waiting      gaugeCount
	preemptions  counter
	prompt       counter
	generation   counter
	cacheQueries counter
	cacheHits    counter
	kvUsage      prometheus.Gauge
	ttft         prometheus.Histogram
	itl          prometheus.Histogram
	specDrafted  counter
	specAccepted counter
	// sessionKeptHits: prompt tokens found in blocks kept for an active
	// session (see BlockPool).
	sessionKeptHits counter
	// checkpointsStored and checkpointsTaken: recurrent state checkpoints
	// kept, and requests that resumed from one.
	checkpointsStored, checkpointsTaken counter
	pagesInUse                          [pageKinds]prometheus.Gauge // by what the pages hold
	success                             *prometheus.CounterVec
	runningNow                          atomic.Int64
	freeBlocks                          atomic.Int64
}

// counter is a Prometheus counter the engine can also read back exactly.
type counter struct {
	prometheus.Counter
	n atomic.Int64
}

func (c *counter) Inc()          { c.Counter.Inc(); c.n.Add(1) }
func (c *counter) Add(v float64) { c.Counter.Add(v); c.n.Add(int64(v)) }

type gaugeCount struct {
	prometheus.Gauge
	n atomic.Int64
}

func (g *gaugeCount) Inc() { g.Gauge.Inc(); g.n.Add(1) }
func (g *gaugeCount) Dec() { g.Gauge.Dec(); g.n.Add(-1) }

// newMetrics is the metric set of an engine whose memory is planned as mem
// (blocks of bs tokens).
func newMetrics(modelName string, mem memoryPlan, bs int) *Metrics {
	reg := prometheus.NewRegistry()
	labels := prometheus.Labels{"model_name": modelName}
	f := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels})
	}
	g := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: labels})
	}
	latency := []float64{0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640}
	m := &Metrics{
		Registry:     reg,
		running:      g("vllm:num_requests_running", "Requests in the running batch."),
		waiting:      gaugeCount{Gauge: g("vllm:num_requests_waiting", "Requests waiting to be scheduled.")},
		preemptions:  counter{Counter: f("vllm:num_preemptions_total", "Preemptions (blocks freed, recomputed later).")},
		prompt:       counter{Counter: f("vllm:prompt_tokens_total", "Prompt tokens admitted.")},
		generation:   counter{Counter: f("vllm:generation_tokens_total", "Accepted output tokens, unfinished requests included.")},
		cacheQueries: counter{Counter: f("vllm:prefix_cache_queries_total", "Prompt tokens looked up in the prefix cache.")},
		cacheHits:    counter{Counter: f("vllm:prefix_cache_hits_total", "Prompt tokens found in the prefix cache.")},
		kvUsage:      g("vllm:kv_cache_usage_perc", "Fraction of KV blocks referenced by requests (0..1)."),
		ttft: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vllm:time_to_first_token_seconds",
			Help: "Submit to first output token.", Buckets: latency, ConstLabels: labels}),
		itl: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "vllm:inter_token_latency_seconds",
			Help: "Time between output tokens of one request.", Buckets: latency, ConstLabels: labels}),
		specDrafted:  counter{Counter: f("vllm:spec_decode_num_draft_tokens_total", "Draft tokens proposed.")},
		specAccepted: counter{Counter: f("vllm:spec_decode_num_accepted_tokens_total", "Draft tokens accepted.")},
		sessionKeptHits: counter{Counter: f("jspark_session_kept_hits_total",
			"Prompt tokens found in blocks kept for an active session (an upper bound on the hits session retention saved).")},
		checkpointsStored: counter{Counter: f("jspark_state_checkpoints_stored_total", "Recurrent state checkpoints kept at block boundaries.")},
		checkpointsTaken:  counter{Counter: f("jspark_state_checkpoints_taken_total", "Requests that resumed from a recurrent state checkpoint.")},
		success: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "vllm:request_success_total",
			Help: "Finished requests by reason.", ConstLabels: labels}, []string{"finished_reason"}),
	}
	capGauge := g("jspark_kv_capacity_tokens", "KV cache capacity in tokens (the longest sequence it holds alone), computed at start.")
	capGauge.Set(float64(mem.capacity))
	pagesGauge := g("jspark_kv_pages", "KV cache pages: blocks of one KV group (layers of one kind) or parts of recurrent state checkpoints.")
	pagesGauge.Set(float64(mem.pages))
	windowGauge := g("jspark_kv_window_tokens", "Tokens a sequence keeps between steps in each sliding-window layer (the blocks its window spans), computed at start; 0 without such layers.")
	windowGauge.Set(float64(mem.windowTokens(bs)))
	slotsGauge := g("jspark_state_slots", "Recurrent state slots: sequences that run at once; 0 without recurrent layers.")
	if mem.stateMem > 0 {
		slotsGauge.Set(float64(mem.slots))
	}
	inUse := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "jspark_kv_pages_in_use", ConstLabels: labels,
		Help: "KV cache pages referenced, by what they hold: full (attention), sliding (window) or state (a checkpoint being copied)."}, []string{"kind"})
	for k := range pageKinds {
		m.pagesInUse[k] = inUse.WithLabelValues(k.String())
	}
	reg.MustRegister(m.running, m.waiting.Gauge, m.preemptions.Counter, m.prompt.Counter, m.generation.Counter, m.cacheQueries.Counter, m.cacheHits.Counter,
		m.kvUsage, m.ttft, m.itl, m.specDrafted.Counter, m.specAccepted.Counter, m.sessionKeptHits.Counter,
		m.checkpointsStored.Counter, m.checkpointsTaken.Counter, m.success, capGauge, pagesGauge, windowGauge, slotsGauge, inUse)
	return m
}

func (m *Metrics) setLoad(running int, pool *BlockPool) {
	free := pool.Free()
	kvUsage := 1 - float64(free)/float64(pool.Capacity())
	for k, g := range m.pagesInUse {
		g.Set(float64(pool.InUse(pageKind(k))))
	}
	m.freeBlocks.Store(int64(free))
	m.running.Set(float64(running))
	m.runningNow.Store(int64(running))
	m.kvUsage.Set(kvUsage)
}

func (m *Metrics) finished(r FinishReason) { m.success.WithLabelValues(string(r)).Inc() }

// Stats is a point-in-time copy of the engine's counters.
type Stats struct {
	GenerationTokens  int64 `json:"generation_tokens"`
	PromptTokens      int64 `json:"prompt_tokens"`
	CacheQueries      int64 `json:"prefix_cache_queries"`
	CacheHits         int64 `json:"prefix_cache_hits"`
	Preemptions       int64 `json:"preemptions"`
	Running           int64 `json:"running"`
	Waiting           int64 `json:"waiting"`
	DraftTokens       int64 `json:"draft_tokens"`
	AcceptedDrafts    int64 `json:"accepted_draft_tokens"`
	FreeBlocks        int64 `json:"free_blocks"`
	SessionKeptHits   int64 `json:"session_kept_hits"`
	CheckpointsStored int64 `json:"checkpoints_stored"`
	CheckpointsTaken  int64 `json:"checkpoints_taken"`
}

// Snapshot reads the counters; safe from any goroutine.
func (m *Metrics) Snapshot() Stats {
	return Stats{
		GenerationTokens: m.generation.n.Load(), PromptTokens: m.prompt.n.Load(),
		CacheQueries: m.cacheQueries.n.Load(), CacheHits: m.cacheHits.n.Load(),
		Preemptions: m.preemptions.n.Load(), Running: m.runningNow.Load(), Waiting: m.waiting.n.Load(),
		DraftTokens: m.specDrafted.n.Load(), AcceptedDrafts: m.specAccepted.n.Load(),
		FreeBlocks: m.freeBlocks.Load(), SessionKeptHits: m.sessionKeptHits.n.Load(),
		CheckpointsStored: m.checkpointsStored.n.Load(), CheckpointsTaken: m.checkpointsTaken.n.Load(),
	}
}
