package server

import (
	"encoding/json"
	"testing"

	"jspark/backend/engine"
)

// TestUsageCarriesTiming: chat, completions and Responses report where the
// request's time went in usage.jspark.timing.
func TestUsageCarriesTiming(t *testing.T) {
	f := start(t, engine.Options{}, Options{})
	for path, body := range map[string]string{
		"/v1/chat/completions": `{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":8,"temperature":0}`,
		"/v1/completions":      `{"prompt":"Once upon a time","max_tokens":8,"temperature":0}`,
		"/v1/responses":        `{"input":"Once upon a time","max_output_tokens":8,"temperature":0}`,
	} {
		_, got := post(t, f.srv.URL+path, "", body)
		var r struct {
			Usage struct {
				Jspark *JsparkDetails `json:"jspark"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(got), &r); err != nil || r.Usage.Jspark == nil {
			t.Fatalf("%s: no usage.jspark in %s (%v)", path, got, err)
		}
		j := r.Usage.Jspark
		if j.Timing.PrefillSec <= 0 || j.Timing.DecodeSec <= 0 || j.ComputedTokens+j.ReusedTokens == 0 {
			t.Fatalf("%s: usage.jspark %+v", path, j)
		}
	}
}
