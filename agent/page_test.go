package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"jspark/recipes"
)

// browser is a headless Chromium's command ("" when none is installed).
func browser() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// headless runs Chromium on url with args (--dump-dom, --screenshot=…)
// and returns its stdout.
func headless(t *testing.T, bin, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--user-data-dir=" + t.TempDir(),
		"--hide-scrollbars"}, append(args, url)...)
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errs strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: %v\n%s", bin, err, errs.String())
	}
	return out.String()
}

// report.html of a run with passed and failed sessions, opened in headless
// Chromium at a failed session's link, as a reader clicks it from the
// per-task table: the table renders with each task's pass rate and error
// bar, and the page's script opens that session's trajectory, its turns
// and tool calls inside. JSPARK_REPORT_PNG=FILE saves a screenshot there.
func TestReportOpensAFailedSessionInChromium(t *testing.T) {
	bin := browser()
	if bin == "" {
		t.Skip("no chromium on PATH (Debian: apt-get install -y chromium): report.html is not rendered")
	}
	r, err := recipes.Load("work")
	if err != nil {
		t.Fatal(err)
	}
	// interval_rooms passes in trial 1 only; structured_log_summary never.
	a := &actor{idle: func(prompt string, seed int) bool {
		return prompt == r.Task("structured_log_summary").Prompt || prompt == r.Task("interval_rooms").Prompt && seed != 7
	}}
	res, out := builtinWork(t, a, "c3-first", 2)
	page := filepath.Join(out, "report.html")

	var failed string
	for _, rd := range res.Rounds {
		for _, s := range rd.Sessions {
			if s.Task == "interval_rooms" && s.Passed != nil && !*s.Passed {
				failed = "s-c3-first-t" + string(rune('0'+rd.Trial)) + "-" + s.Name
			}
		}
	}
	if failed == "" {
		t.Fatal("no failed interval_rooms session")
	}
	dom := headless(t, bin, "file://"+page+"#"+failed, "--dump-dom", "--virtual-time-budget=2000")

	table := regexp.MustCompile(`(?s)<table class="tasks">.*?</table>`).FindString(dom)
	// Each row: the task, passed/attempted, the error bar (an SVG) and
	// pass@1 ± its standard error, pass@2.
	for _, want := range []string{
		`<td>ttl_lru_cache</td><td>2/2</td><td class="rate"><svg class="bar"[^>]*>.*?</svg> 1.00 ± 0.00</td><td>1.00</td>`,
		`<td>interval_rooms</td><td>1/2</td><td class="rate"><svg class="bar"[^>]*>.*?</svg> 0.50 ± 0.50</td><td>1.00</td>`,
		`<td>structured_log_summary</td><td>0/2</td><td class="rate"><svg class="bar"[^>]*>.*?</svg> 0.00 ± 0.00</td><td>0.00</td>`,
		`<a class="failed" href="#` + failed + `"`,
	} {
		if !regexp.MustCompile(want).MatchString(table) {
			t.Errorf("the per-task table has no %s:\n%s", want, table)
		}
	}
	open := regexp.MustCompile(`<details class="session (\w+)" id="([^"]+)" open="">`).FindAllStringSubmatch(dom, -1)
	if len(open) != 1 || open[0][1] != "failed" || open[0][2] != failed {
		t.Fatalf("opened trajectories %v, want %s alone", open, failed)
	}
	traj := dom[strings.Index(dom, `id="`+failed+`"`):]
	traj = traj[:strings.Index(traj, `<details class="session`)]
	if !strings.Contains(traj, "</b>: FAILED (check exit 1)") || !strings.Contains(traj, "<li><details><summary>turn 0: sent") ||
		!strings.Contains(traj, "check: failed after") || !strings.Contains(traj, "<b>reply</b><pre>done</pre>") {
		t.Errorf("the failed session's trajectory:\n%s", traj)
	}
	passed := regexp.MustCompile(`(?s)<details class="session passed" id="s-c3-first-t1-s0-ttl_lru_cache">.*?</details></li></ol>`).FindString(dom)
	if !strings.Contains(passed, "<code>write</code>") || !strings.Contains(passed, "<b>result</b>") {
		t.Errorf("the passed session's trajectory shows no write call and its result:\n%s", passed)
	}
	if png := os.Getenv("JSPARK_REPORT_PNG"); png != "" {
		abs, err := filepath.Abs(png)
		if err != nil {
			t.Fatal(err)
		}
		headless(t, bin, "file://"+page+"#"+failed, "--screenshot="+abs, "--window-size=1280,5200", "--virtual-time-budget=2000")
		t.Logf("screenshot: %s", abs)
	}
}
