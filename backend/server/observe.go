package server

import (
	"context"
	"time"

	"jspark/backend/chat"
)

// Observation is what the server saw of one generation request (chat,
// completions or responses, streamed or not): what a harness that cannot
// instrument its client (an external coding agent) records from the server
// side.
type Observation struct {
	Accepted    time.Time // the engine took the request; zero: it never did
	FirstOutput time.Time // the first reasoning, content or tool-call output; zero: none
	End         time.Time
	Usage       Usage           // as the response carries it (usage.jspark included)
	Finish      string          // stop, length or tool_calls; empty after an error
	Calls       []chat.ToolCall // the tool calls of the output, arguments as far as they went
	Err         error
}

// Observer receives one Observation per generation request, when it ends.
type Observer func(Observation)

type observerKey struct{}

// observer is a request's Observer and whether it has been told yet: a
// request refused before it reached the engine is still reported, once.
type observer struct {
	fn   Observer
	told bool
}

// WithObserver makes the server report the generation request that carries
// ctx to o (a handler in front of the server's sets it per request).
func WithObserver(ctx context.Context, o Observer) context.Context {
	return context.WithValue(ctx, observerKey{}, &observer{fn: o})
}

// refused reports a request that ended in err before any job ran.
func refused(ctx context.Context, err error) {
	if ob, _ := ctx.Value(observerKey{}).(*observer); ob != nil && !ob.told {
		ob.told = true
		ob.fn(Observation{End: time.Now(), Err: err})
	}
}

// observe wraps h's hooks to note the job's times and calls, and to tell
// the observer when it finishes (before the handler's own finish runs).
// Without an observer in ctx it returns h as it is.
func observe(ctx context.Context, h hooks) hooks {
	state, _ := ctx.Value(observerKey{}).(*observer)
	if state == nil {
		return h
	}
	state.told = true
	var ob Observation
	wrapped := hooks{
		accepted: func() error {
			ob.Accepted = time.Now()
			if h.accepted == nil {
				return nil
			}
			return h.accepted()
		},
		prompt: h.prompt,
		output: func(out output) error {
			if d := out.delta; ob.FirstOutput.IsZero() && (d.Reasoning != "" || d.Content != "" || len(d.Calls) > 0) {
				ob.FirstOutput = time.Now()
			}
			ob.Calls = appendCalls(ob.Calls, out.delta.Calls)
			if h.output == nil {
				return nil
			}
			return h.output(out)
		},
		finished: func(res result, err error) error {
			ob.End, ob.Usage, ob.Err = time.Now(), *usageOf(res.usage), err
			if err == nil {
				ob.Finish = res.finish
			}
			state.fn(ob)
			return h.finished(res, err)
		},
	}
	return wrapped
}
