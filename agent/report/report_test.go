package report

import (
	"encoding/json"
	"jspark/agent/metrics"
	"jspark/agent/record"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A round whose sessions never saw a first output has no TTFT to report: the
// summary says null and the table "–", never a mean of 0 over nothing.
func TestSummaryWithoutFirstOutputSaysSo(t *testing.T) {
	r := &record.Round{Name: "c3-first", Window: 10, Samples: []record.Sample{{}, {T: 10}},
		Sessions: []record.Session{{FirstOutputPending: true, Requests: []record.Request{{TTFT: -1, Cut: true}}}, {FirstOutputPending: true}}}
	r.Summary = record.Summarize(r, r.Samples[0], r.Samples[1], metrics.ByEngine)
	if r.Summary.InitialTTFT != nil || r.Summary.LaterMedianTTFT != nil || r.Summary.PendingAtCut != 2 {
		t.Fatalf("summary %+v", r.Summary)
	}
	b, _ := json.Marshal(r.Summary)
	if !strings.Contains(string(b), `"initial_ttft":null,"later_median_ttft":null`) {
		t.Errorf("JSON %s", b)
	}
	var table strings.Builder
	Work(&table, &record.Work{Window: 10, Rounds: []*record.Round{r}})
	if !strings.Contains(table.String(), "c3-first           0.00                –                     –      0") {
		t.Errorf("table:\n%s", table.String())
	}
	if html := WorkHTML(&record.Work{Window: 10, Rounds: []*record.Round{r}}, t.TempDir()); !strings.Contains(html, "<td>c3-first</td><td>0.00</td><td>–</td><td>–</td>") {
		t.Errorf("report row missing")
	}
}

func TestTableWriteParse(t *testing.T) {
	tb := Table{Title: "L5-P concurrency · C1–C6", Columns: []string{"Offered streams", "A aggregate tok/s"}, Note: "Aggregate tokens / window."}
	tb.Add("C1", "49.05")
	tb.Add("C2", "73.55")
	var b strings.Builder
	tb.Write(&b)
	got, ok := ParseTable("noise\n"+b.String(), "L5-P concurrency")
	if !ok {
		t.Fatalf("not found in\n%s", b.String())
	}
	if d := cmp.Diff(&tb, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	if c, _ := got.Cell("C2", "A aggregate tok/s"); c != "73.55" {
		t.Errorf("cell %q", c)
	}
}
