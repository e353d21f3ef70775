package record

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"

	"jspark/backend/usage"
)

// TestUnmeasuredTTFTIsNull: a request with no first output writes "ttft":
// null in results.json and trajectories, never -1, and reads back as
// unmeasured; a measured one keeps its value.
func TestUnmeasuredTTFTIsNull(t *testing.T) {
	for _, c := range []struct {
		q    Request
		want string
	}{
		{Request{Turn: 5, TTFT: -1, Cut: true}, `"ttft":null`},
		{Request{Turn: 1, TTFT: 0.25}, `"ttft":0.25`},
	} {
		b, err := json.Marshal(c.q)
		if err != nil || !strings.Contains(string(b), c.want) || strings.Count(string(b), `"ttft"`) != 1 {
			t.Fatalf("%+v: %s %v; want %s", c.q, b, err, c.want)
		}
		var back Request
		if err := json.Unmarshal(b, &back); err != nil || back.TTFT != c.q.TTFT || back.Turn != c.q.Turn || back.Cut != c.q.Cut {
			t.Errorf("%s read back as %+v (%v)", b, back, err)
		}
	}
}

func TestClipKeepsHeadAndTail(t *testing.T) {
	s := strings.Repeat("é", Limit) // two bytes a rune: cuts land inside runes
	c := Clip(s)
	if !strings.HasPrefix(c, "éé") || !strings.HasSuffix(c, "éé") || !strings.Contains(c, fmt.Sprintf(" of %d bytes left out", len(s))) || !json.Valid(mustJSON(c)) {
		t.Errorf("clip: %d bytes: %.40q … %.40q", len(c), c, c[len(c)-40:])
	}
	if !utf8.ValidString(c) || len(c) > Limit+100 {
		t.Errorf("clip cut a rune or kept too much (%d bytes)", len(c))
	}
	if Clip("short") != "short" {
		t.Error("a short text is clipped")
	}
}

func mustJSON(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

// A session's working time is its wall time less its requests' engine
// queueing; without any timing from its backend it is not knowable, and a
// request cut before its usage came is counted, its queueing not.
func TestTimesTakeQueueingOut(t *testing.T) {
	reqs := []Request{{Timing: &usage.Timing{QueuedSec: 30, PrefillSec: 2}}, {Timing: &usage.Timing{QueuedSec: 12.5}}, {Cut: true}}
	got := Times(180, reqs, false)
	if got.WallSec != 180 || got.QueuedSec == nil || *got.QueuedSec != 42.5 || *got.WorkingSec != 137.5 || got.Unreported != 1 {
		t.Errorf("times %+v", got)
	}
	if got := Times(180, []Request{{}, {Cut: true}}, false); got.QueuedSec != nil || got.WorkingSec != nil || got.Unreported != 2 {
		t.Errorf("an endpoint without timing: %+v", got)
	}
	// Its one request cut before any usage, on a backend that reports
	// timings: working time is the wall time, an upper bound.
	if got := Times(20, []Request{{Cut: true}}, true); got.QueuedSec == nil || *got.QueuedSec != 0 || *got.WorkingSec != 20 || got.Unreported != 1 {
		t.Errorf("a session cut in its only request: %+v", got)
	}
}
