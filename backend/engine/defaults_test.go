package engine

import (
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNewTakesOptionsAsGiven: New fills nothing in. DefaultOptions runs as
// it is, with only Auto resolved (the 200 ms step bound included); options
// that cannot run are refused naming the field, not patched.
func TestNewTakesOptionsAsGiven(t *testing.T) {
	m := tinyModel(t, 16, 1)
	opt := DefaultOptions()
	// 1 MiB of cache: Auto would take a fifth of the machine's memory.
	opt.Log, opt.KVMemory = io.Discard, 1<<20
	e, err := New(m, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	got := e.Options()
	if got.MaxContext != max(m.Context, 32768) {
		t.Errorf("MaxContext Auto became %d", got.MaxContext)
	}
	if perToken := m.KVBytesPerToken(m.KVType); e.CapacityTokens() != 1<<20/perToken/16*16 {
		t.Errorf("a cache of 1 MiB holds %d tokens of %d bytes", e.CapacityTokens(), perToken)
	}
	got.MaxContext, got.ModelName = opt.MaxContext, opt.ModelName
	if got.Log != opt.Log || got.OnStep != nil || got.Trace != nil {
		t.Errorf("writers changed: %+v", got)
	}
	got.Log = nil
	want := Options{BlockSize: 16, KVMemory: 1 << 20, PrefillSolo: 4096, PrefillMixed: 2048, MaxSeqs: 64, MaxWaiting: 1024, MaxContext: Auto,
		SpecNgram: 3, MaxStepMs: 200, SessionRetain: opt.SessionRetain}
	if d := cmp.Diff(want, got); d != "" || opt.SessionRetain <= 0 {
		t.Errorf("in effect (-want +got):\n%s", d)
	}

	for _, c := range []struct {
		name string
		set  func(*Options)
		want string
	}{
		{"zero", func(o *Options) { *o = Options{} }, "Options.BlockSize is 0"},
		{"no mixed budget", func(o *Options) { o.PrefillMixed = 0 }, "Options.PrefillMixed is 0"},
		{"no KV memory", func(o *Options) { o.KVMemory = 0 }, "Options.KVMemory is 0; want bytes or Auto"},
		{"no context", func(o *Options) { o.MaxContext = 0 }, "Options.MaxContext is 0"},
		{"speculate without n-grams", func(o *Options) { o.Speculate, o.SpecNgram = 2, 0 }, "Options.SpecNgram is 0"},
		{"negative step bound", func(o *Options) { o.MaxStepMs = -1 }, "MaxStepMs -1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := DefaultOptions()
			c.set(&o)
			e, err := New(m, o)
			if err == nil {
				e.Close()
				t.Fatalf("New took %+v", o)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q, want it to say %q", err, c.want)
			}
		})
	}
}
