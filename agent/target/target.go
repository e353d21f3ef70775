// Package target is a server the runner and the bench drive: an
// OpenAI-compatible base URL with its key and model, the counters it is
// measured by and, for the in-process engine, its HTTP handler (external
// agents reach it through their sandbox's door).
package target

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync/atomic"

	"jspark/agent/metrics"
)

// Backend is one OpenAI-compatible server.
type Backend struct {
	URL     string // base URL, ending in /v1
	APIKey  string
	Model   string
	Counter metrics.Source // nil: count streamed tokens
	// Handler is the in-process engine's HTTP server (nil for an endpoint).
	Handler http.Handler
	Context int // the engine's context window in tokens (0: unknown)
}

// Endpoint checks an external endpoint, picks its model (modelID, else its
// first /v1/models entry) and finds whether it exports vLLM-named
// Prometheus metrics; log hears when it does not.
func Endpoint(ctx context.Context, base, key, modelID string, log io.Writer) (Backend, error) {
	b := Backend{URL: base, APIKey: key, Model: modelID}
	if b.Model == "" {
		id, err := firstModel(ctx, base, key)
		if err != nil {
			return b, err
		}
		b.Model = id
	}
	p := &metrics.Prometheus{URL: metrics.URL(base), APIKey: key, Client: http.DefaultClient}
	if _, err := p.Read(ctx); err != nil {
		fmt.Fprintf(log, "jspark work: %s: no usable /metrics (%v): counting streamed tokens instead\n", base, err)
	} else {
		b.Counter = p
	}
	return b, nil
}

// firstModel is the first model /models lists.
func firstModel(ctx context.Context, base, key string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/models", nil)
	if err != nil {
		return "", fmt.Errorf("endpoint %s: %w", base, err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("endpoint %s: %w", base, err)
	}
	defer resp.Body.Close()
	var models struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&models); err != nil || len(models.Data) == 0 {
		return "", fmt.Errorf("endpoint %s: /models lists no model (%v); pass --served-model", base, errors.Join(err, fmt.Errorf("status %s", resp.Status)))
	}
	return models.Data[0].ID, nil
}

var keySeq atomic.Uint64

// IdempotencyKey is a key unique within the process for one request, as
// OpenAI's SDKs send with each request they may retry. NOTE: it makes a
// POST replayable, so that Go resends it when the reused keep-alive
// connection it went out on had been closed by the server before any
// answer (llama-server closes one after 5 requests: the runner counted an
// API error, the bench lost the request); the server saw nothing of it.
func IdempotencyKey() string { return fmt.Sprintf("jspark-%d-%d", os.Getpid(), keySeq.Add(1)) }
