package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"jspark/agent/record"
)

// collect fills each session's record from what it ran and scores it, then
// closes the sandboxes (a capped workspace's copy is complete only then) to
// record what their folders hold, then the round's summary; the error names
// every record that could not be written.
func (r *round) collect(ctx context.Context) error {
	r.payloads = make([][]byte, len(r.workers))
	var errs []error
	for i := range r.workers {
		errs = append(errs, r.collectSession(ctx, i)...)
	}
	r.close()
	for i, box := range r.boxes {
		if box != nil {
			r.res.Sessions[i].Workspace = box.Kept()
		}
	}
	r.res.Summary = record.Summarize(r.res, r.first, r.last, r.meter.Kind())
	return errors.Join(errs...)
}

// collectSession fills session i's record: its requests and end, what only
// its worker knows, its first request (written beside its trajectory, its
// hash in the record), its counts and times, and its verdict.
func (r *round) collectSession(ctx context.Context, i int) []error {
	sr := &r.res.Sessions[i]
	var errs []error
	fail := func(err error) { errs = append(errs, fmt.Errorf("session %s: %w", sr.Name, err)) }
	sr.Requests, sr.End = r.requests[i], r.ends[i]
	payload, final, err := r.workers[i].Finish(sr)
	if err != nil {
		fail(err)
	}
	r.payloads[i] = payload
	sum := sha256.Sum256(payload)
	sr.InitialPayload = hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(r.o.Out, sr.Name, "initial_request.json"), payload, 0o644); err != nil {
		fail(err)
	}
	sr.Tally()
	sr.Time = record.Times(r.walls[i], sr.Requests, r.timed())
	r.score(ctx, i, final)
	return errs
}

// timed says whether the round's backend reports the engine's timings:
// the in-process engine does, and an endpoint where some request of the
// round came back with one.
func (r *round) timed() bool {
	inProcess := len(r.o.Backends) > 0
	for _, b := range r.o.Backends {
		inProcess = inProcess && b.Handler != nil
	}
	if inProcess {
		return true
	}
	for _, reqs := range r.requests {
		for _, q := range reqs {
			if q.Timing != nil {
				return true
			}
		}
	}
	return false
}
