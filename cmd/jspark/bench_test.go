package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"jspark/agent/bench"
	"jspark/agent/report"
)

// benchRun runs `jspark bench` and returns its printed tables' text and
// results.json.
func benchRun(t *testing.T, args ...string) (string, *bench.Result) {
	t.Helper()
	out := t.TempDir()
	stdout, stderr, code := jspark(t, append(append([]string{"bench"}, args...), "--out", out)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var res bench.Result
	if err := json.Unmarshal(b, &res); err != nil {
		t.Fatal(err)
	}
	if h, err := os.ReadFile(filepath.Join(out, "report.html")); err != nil || !strings.Contains(string(h), "<table>") {
		t.Errorf("report.html: %v", err)
	}
	return stdout, &res
}

func table(t *testing.T, stdout, title string, columns ...string) *report.Table {
	t.Helper()
	tb, ok := report.ParseTable(stdout, title)
	if !ok {
		t.Fatalf("no table %q in\n%s", title, stdout)
	}
	if d := cmp.Diff(columns, tb.Columns); d != "" {
		t.Fatalf("%s columns (-want +got):\n%s", title, d)
	}
	return tb
}

func cell(t *testing.T, tb *report.Table, row, col string) string {
	t.Helper()
	c, ok := tb.Cell(row, col)
	if !ok {
		t.Fatalf("%s: no cell %q / %q in %v", tb.Title, row, col, tb.Rows)
	}
	return c
}

func rowNames(tb *report.Table) []string {
	var out []string
	for _, r := range tb.Rows {
		out = append(out, r[0])
	}
	return out
}

func records(res *bench.Result, target, screen, c string) []bench.Record {
	var out []bench.Record
	for _, r := range res.Records {
		if r.Target == target && r.Screen == screen && r.Case == c {
			out = append(out, r)
		}
	}
	return out
}

// med is the median, recomputed here rather than borrowed from the bench.
func med(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

func secs(v float64) string { return fmt.Sprintf("%.3f s", v) }

func TestBenchCache(t *testing.T) {
	stdout, res := benchRun(t, "cache", "--lengths", "128,256", "--trials", "3", "--kv-memory", "64")
	tb := table(t, stdout, "Solo/cache screen", "Measurement", "jspark")
	want := []string{"128 first-use", "128 uncached", "128 exact repeat", "128 changed suffix", "128 reused tokens, repeat / suffix",
		"256 first-use", "256 uncached", "256 exact repeat", "256 changed suffix", "256 reused tokens, repeat / suffix"}
	if d := cmp.Diff(want, rowNames(tb)); d != "" {
		t.Fatalf("rows (-want +got):\n%s", d)
	}
	// The cell is the median TTFT of the three salted trials.
	var ttft []float64
	salts := map[string]bool{}
	for _, r := range records(res, "jspark", "cache", "256 uncached") {
		ttft = append(ttft, r.TTFT)
		salts[r.Salt] = true
		if r.CachedTokens > 16 {
			t.Errorf("salted trial %d reused %d tokens", r.Trial, r.CachedTokens)
		}
	}
	if len(ttft) != 3 || len(salts) != 3 {
		t.Fatalf("trials %v, salts %v", ttft, salts)
	}
	if got := cell(t, tb, "256 uncached", "jspark"); got != secs(med(ttft)) {
		t.Errorf("256 uncached %s, recomputed %s", got, secs(med(ttft)))
	}
	// A repeat resends its trial's salt and is served from the cache.
	for _, r := range records(res, "jspark", "cache", "256 exact repeat") {
		if !salts[r.Salt] || r.CachedTokens < r.PromptTokens-16 || r.PromptTokens < 200 {
			t.Errorf("repeat trial %d: salt %s, cached %d of %d", r.Trial, r.Salt, r.CachedTokens, r.PromptTokens)
		}
	}
	if run := res.Runs[0]; run.Before == nil || run.After.PrefixHits <= run.Before.PrefixHits {
		t.Errorf("no prefix-cache hits counted: %+v", run)
	}
}

func TestBenchCacheTwoServes(t *testing.T) {
	a := startServe(t, "--kv-memory", "32", "--prefill-solo", "64")
	b := startServe(t, "--kv-memory", "32", "--prefill-solo", "4096")
	stdout, res := benchRun(t, "cache", "--endpoint", "A="+a, "--endpoint", "B="+b, "--lengths", "256", "--trials", "1")
	tb := table(t, stdout, "Solo/cache screen", "Measurement", "A", "B")
	if len(res.Targets) != 2 || res.Targets[0].URL != a || res.Targets[1].URL != b || res.Targets[1].Metrics != "vllm" {
		t.Fatalf("targets %+v", res.Targets)
	}
	for _, name := range []string{"A", "B"} {
		r := records(res, name, "cache", "256 exact repeat")
		if len(r) != 1 {
			t.Fatalf("%s: %d repeats", name, len(r))
		}
		if got := cell(t, tb, "256 exact repeat", name); got != secs(r[0].TTFT) {
			t.Errorf("%s repeat %s, recorded %s", name, got, secs(r[0].TTFT))
		}
	}
}

func TestBenchBootsAndBadBoot(t *testing.T) {
	stdout, stderr, code := jspark(t, "bench", "ids", "--kv-memory", "16", "--boot", "B16=", "--boot", "B32='--kv-block' 32", "--out", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	// Each boot's engine started with its own flags and the command's.
	if !strings.Contains(stderr, "blocks of 16, 16.0 MiB") || !strings.Contains(stderr, "blocks of 32, 16.0 MiB") {
		t.Errorf("engines:\n%s", stderr)
	}
	tb := table(t, stdout, "Native ID screen", "Check", "B16", "B32")
	// Greedy outputs do not depend on the block size.
	if got := cell(t, tb, "Greedy ids match B16", "B32"); got != "12/12" {
		t.Errorf("B32 against B16: %s", got)
	}
	_, stderr, code = jspark(t, "bench", "cache", "--boot", "X=--prefill-solo lots")
	if code != 1 || !strings.Contains(stderr, `--boot X: invalid argument "lots" for "--prefill-solo" flag`) {
		t.Errorf("bad boot: %d %q", code, stderr)
	}
	_, stderr, code = jspark(t, "bench", "speeds")
	if code != 1 || !strings.Contains(stderr, `unknown screen "speeds" (screens: cache, mixed, arrival, speed, concurrency, ids, or all)`) {
		t.Errorf("bad screen: %d %q", code, stderr)
	}
}

func TestBenchMixed(t *testing.T) {
	stdout, res := benchRun(t, "mixed", "--arrive-lengths", "256", "--arrive-at", "2,3", "--trials", "2", "--kv-memory", "64")
	tb := table(t, stdout, "Warmed mixed traffic · repeat 2", "Case", "jspark pause", "jspark new-request TTFT")
	if d := cmp.Diff([]string{"256 arrives / C2", "256 arrives / C3"}, rowNames(tb)); d != "" {
		t.Fatal(d)
	}
	recs := records(res, "jspark", "mixed", "256 arrives / C3")
	var arr bench.Record
	var incumbents []bench.Record
	for _, r := range recs {
		switch {
		case r.Trial == 2 && r.Role == "arrival":
			arr = r
		case r.Trial == 2 && r.Role == "incumbent":
			incumbents = append(incumbents, r)
		}
	}
	if len(recs) != 6 || len(incumbents) != 2 || !arr.OK() {
		t.Fatalf("%d records, %d incumbents, arrival %+v", len(recs), len(incumbents), arr)
	}
	if got := cell(t, tb, "256 arrives / C3", "jspark new-request TTFT"); got != secs(arr.TTFT) {
		t.Errorf("new-request TTFT %s, recorded %s", got, secs(arr.TTFT))
	}
	// The pause, recomputed: each incumbent's largest gap between output
	// events that overlaps the arrival's admission, the worst incumbent.
	worst := 0.0
	for _, inc := range incumbents {
		if !inc.Cut || inc.TTFT < 0 || inc.Sent > arr.Sent {
			t.Errorf("incumbent %+v: not decoding before the arrival, or not cut", inc)
		}
		ev := inc.Events()
		if ev[len(ev)-1] < arr.Sent+arr.TTFT {
			ev = append(ev, inc.End)
		}
		for i := 1; i < len(ev); i++ {
			if ev[i] > arr.Sent && ev[i-1] < arr.Sent+arr.TTFT {
				worst = math.Max(worst, ev[i]-ev[i-1])
			}
		}
	}
	if got := cell(t, tb, "256 arrives / C3", "jspark pause"); got != secs(worst) {
		t.Errorf("pause %s, recomputed %s", got, secs(worst))
	}
}

func TestBenchArrivalOnSynthModel(t *testing.T) {
	m := filepath.Join(t.TempDir(), "m.gguf")
	if _, stderr, code := jspark(t, "model", "synth", "--arch", "llama", "--layers", "2", "--dim", "128", "--heads", "4", "--kv-heads", "2",
		"--ff", "256", "--vocab-bytes", "--ctx", "4096", "--type", "f32", "--seed", "1", "--out", m); code != 0 {
		t.Fatalf("synth: %s", stderr)
	}
	stdout, res := benchRun(t, "arrival", "--model", m, "--long", "1k", "--trials", "2", "--kv-memory", "64")
	tb := table(t, stdout, "Long tool reuse and reverse arrival", "Check", "jspark")
	want := []string{"Stable-tool 1K continuation", "1K cold TTFT, alone", "Short prompt arrives during the 1K prefill", "Short TTFT / 1K cold TTFT", "1K TTFT with the arrival"}
	if d := cmp.Diff(want, rowNames(tb)); d != "" {
		t.Fatal(d)
	}
	var cold, short []float64
	for _, r := range records(res, "jspark", "arrival", "1K cold") {
		cold = append(cold, r.TTFT)
	}
	var longSent []float64
	for _, r := range records(res, "jspark", "arrival", "1K arrival") {
		if r.Role == "short" {
			short = append(short, r.TTFT)
		} else {
			longSent = append(longSent, r.Sent)
		}
	}
	if len(cold) != 2 || len(short) != 2 || len(longSent) != 2 {
		t.Fatalf("cold %v short %v", cold, short)
	}
	if got, want := cell(t, tb, "Short TTFT / 1K cold TTFT", "jspark"), fmt.Sprintf("%.2f", med(short)/med(cold)); got != want {
		t.Errorf("ratio %s, recomputed %s", got, want)
	}
	if !strings.Contains(tb.Note, "here: jspark "+fmt.Sprintf("%.2f", med(short)/med(cold))) {
		t.Errorf("note %q", tb.Note)
	}
	// The continuation reused the long first turn, and never more than it
	// committed.
	st := records(res, "jspark", "arrival", "1K stable-tool")
	if len(st) != 2 || st[0].Role != "first" || len(st[0].Calls) == 0 || st[1].CachedTokens < 1024 || st[1].CachedTokens > st[0].PromptTokens+st[0].CompletionTokens {
		t.Fatalf("stable-tool %+v", st)
	}
	if got := cell(t, tb, "Stable-tool 1K continuation", "jspark"); !strings.HasPrefix(got, fmt.Sprintf("%s; ", secs(st[1].TTFT))) {
		t.Errorf("stable-tool cell %q", got)
	}
}

func TestBenchSpeed(t *testing.T) {
	stdout, res := benchRun(t, "speed", "--max-tokens", "24", "--kv-memory", "64")
	tb := table(t, stdout, "jspark streamed full-answer speed", "Task", "Output tokens", "TTFT", "Whole-request tok/s", "After-first-output tok/s estimate")
	want := []string{"prose-explanation", "prose-memo", "prose-story", "ttl_lru_cache", "interval_rooms", "structured_log_summary", "dependency_waves"}
	if d := cmp.Diff(want, rowNames(tb)); d != "" {
		t.Fatal(d)
	}
	r := records(res, "jspark", "speed", "interval_rooms")[0]
	if r.CompletionTokens < 2 || r.CompletionTokens > 24 {
		t.Fatalf("record %+v", r)
	}
	if got, want := cell(t, tb, "interval_rooms", "Whole-request tok/s"), fmt.Sprintf("%.2f", float64(r.CompletionTokens)/(r.End-r.Sent)); got != want {
		t.Errorf("whole-request %s, recomputed %s", got, want)
	}
	if got, want := cell(t, tb, "interval_rooms", "After-first-output tok/s estimate"), fmt.Sprintf("%.2f", float64(r.CompletionTokens-1)/(r.End-r.Sent-r.TTFT)); got != want {
		t.Errorf("after-first %s, recomputed %s", got, want)
	}
	table(t, stdout, "Measured single-stream output rates by target", "Target", "Prose tok/s", "Code tok/s", "Inter-event gap p50 / p90 / p99 / max", "Finish")
}

func TestBenchConcurrency(t *testing.T) {
	prof := filepath.Join(t.TempDir(), "cpu.prof")
	stdout, res := benchRun(t, "concurrency", "--concurrency", "1-3", "--max-tokens", "16", "--kv-memory", "64", "--cpuprofile", prof)
	// --cpuprofile was accepted and ignored here once
	if b, err := os.ReadFile(prof); err != nil || len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("profile %s: %v, %d bytes", prof, err, len(b))
	}
	tb := table(t, stdout, "Concurrency · C1–C3", "Offered streams", "jspark aggregate tok/s", "jspark mean TTFT")
	recs := records(res, "jspark", "concurrency", "C3")
	if len(recs) != 3 {
		t.Fatalf("%d C3 streams", len(recs))
	}
	first, last, tokens, ttft := math.Inf(1), math.Inf(-1), 0, 0.0
	for _, r := range recs {
		first, last = math.Min(first, r.Sent), math.Max(last, r.End)
		tokens += r.CompletionTokens
		ttft += r.TTFT / 3
	}
	if got, want := cell(t, tb, "C3", "jspark aggregate tok/s"), fmt.Sprintf("%.2f", float64(tokens)/(last-first)); got != want {
		t.Errorf("aggregate %s, recomputed %s", got, want)
	}
	if got := cell(t, tb, "C3", "jspark mean TTFT"); got != secs(ttft) {
		t.Errorf("mean TTFT %s, recomputed %s", got, secs(ttft))
	}
	if !slices.Equal(rowNames(tb), []string{"C1", "C2", "C3"}) {
		t.Errorf("rows %v", rowNames(tb))
	}
}

func TestBenchIDsAgainstLlamaCpp(t *testing.T) {
	stdout, res := benchRun(t, "ids", "--ids-ref", "../../testdata/refs/stories260K-greedy.jsonl", "--kv-memory", "16")
	tb := table(t, stdout, "Native ID screen", "Check", "jspark")
	firsts := 0
	for _, r := range res.Records {
		if r.Screen == "ids" && r.Role == "first" {
			firsts++
		}
	}
	want := fmt.Sprintf("%d/%d", firsts, firsts)
	if got := cell(t, tb, "Greedy ids match the reference file", "jspark"); firsts < 5 || got != want {
		t.Errorf("match %s, want %s", got, want)
	}
	if got := cell(t, tb, "Repeat pairs exact", "jspark"); got != "5/5" {
		t.Errorf("repeat pairs %s", got)
	}
}
