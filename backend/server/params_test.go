package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"jspark/backend/engine"
)

// TestCompletionsCheckAsChatDoes: the fields both completion APIs share are
// checked by one validator, so a bad value gets the same status and message
// from /v1/chat/completions and /v1/completions (logprobs, whose field
// differs, names each API's own).
func TestCompletionsCheckAsChatDoes(t *testing.T) {
	f := start(t, func(o *engine.Options) { o.MaxContext = 200 }, func(o *Options) { o.ServedName = "tiny" })
	cases := []struct {
		name, field string // field: the same JSON in both bodies
		chat, text  string // else each API's own
		status      int
		want        string
	}{
		{name: "model", field: `"model":"gpt-9"`, status: 404, want: `the model \"gpt-9\" does not exist`},
		{name: "n", field: `"n":3`, status: 400, want: `n must be 1 (got 3)`},
		{name: "max_tokens zero", field: `"max_tokens":0`, status: 400, want: `max_tokens must be positive, got 0`},
		{name: "max_tokens past context", field: `"max_tokens":201`, status: 400, want: `max_tokens 201 is more than this model's maximum context length of 200 tokens`},
		{name: "stop count", field: `"stop":["a","b","c","d","e"]`, status: 400, want: `at most 4 stop sequences, got 5`},
		{name: "stop type", field: `"stop":7`, status: 400, want: `stop must be a string or an array of strings`},
		{name: "temperature", field: `"temperature":2.5`, status: 400, want: `temperature 2.5 is outside [0, 2]`},
		{name: "top_p", field: `"top_p":0`, status: 400, want: `top_p 0 is outside (0, 1]`},
		{name: "top_k", field: `"top_k":-2`, status: 400, want: `top_k -2 must be -1 or 0 (off) or positive`},
		{name: "logit_bias", field: `"logit_bias":{"512":1}`, status: 400, want: `logit_bias key \"512\" is not a token id in [0, 512)`},
		{name: "logprobs", chat: `"logprobs":true,"top_logprobs":21`, text: `"logprobs":21`, status: 400, want: `must be in 0..20, got 21`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			chat, text := c.field, c.field
			if c.field == "" {
				chat, text = c.chat, c.text
			}
			var bodies []string
			for _, req := range []struct{ path, body string }{
				{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],` + chat + `}`},
				{"/v1/completions", `{"prompt":"x",` + text + `}`},
			} {
				resp, body := post(t, f.srv.URL+req.path, "", req.body)
				if resp.StatusCode != c.status || !strings.Contains(body, c.want) {
					t.Errorf("%s %s: %d %s; want %d containing %s", req.path, req.body, resp.StatusCode, body, c.status, c.want)
				}
				bodies = append(bodies, strings.Replace(body, `"param":"top_logprobs"`, `"param":"logprobs"`, 1))
			}
			if c.field != "" && bodies[0] != bodies[1] {
				t.Errorf("the APIs answer differently:\nchat        %s\ncompletions %s", bodies[0], bodies[1])
			}
		})
	}
}

// TestHooksFollowTheJobsLife: run calls accepted once before any output and
// finished exactly once, last; a request the engine refuses gets finished
// alone, with the error.
func TestHooksFollowTheJobsLife(t *testing.T) {
	f := start(t, func(o *engine.Options) { o.MaxContext = 64 }, nil)
	s := New(f.e, DefaultOptions())
	tok := f.e.Model().Tok
	newJob := func(maxTokens int) job {
		j, err := s.check(generation{maxTokens: &maxTokens, maxParam: "max_tokens", sampling: Sampling{Temperature: new(float32)}})
		if err != nil {
			t.Fatal(err)
		}
		j.req.Prompt = tok.Encode("Once upon a time", true, true)
		return j
	}
	record := func(events *[]string) hooks {
		return hooks{
			accepted: func() error { *events = append(*events, "accepted"); return nil },
			output:   func(o output) error { *events = append(*events, "output"); return nil },
			finished: func(res result, err error) error {
				*events = append(*events, fmt.Sprintf("finished %s %v", res.finish, err))
				return err
			},
		}
	}
	var got []string
	if err := s.run(context.Background(), newJob(8), record(&got)); err != nil {
		t.Fatal(err)
	}
	if len(got) < 3 || got[0] != "accepted" || got[len(got)-1] != "finished length <nil>" {
		t.Fatalf("hooks called %q", got)
	}
	for _, ev := range got[1 : len(got)-1] {
		if ev != "output" {
			t.Fatalf("hooks called %q", got)
		}
	}

	got = nil
	err := s.run(context.Background(), newJob(60), record(&got)) // the prompt and 60 tokens are past the context of 64
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusBadRequest || len(got) != 1 || !strings.HasPrefix(got[0], "finished  ") {
		t.Fatalf("refused job: error %v, hooks called %q", err, got)
	}
}
