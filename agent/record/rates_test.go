package record

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The estimators against their definitions, with binomials computed
// directly (small n), and the limits of each.
func TestPassAtKMatchesTheBinomials(t *testing.T) {
	choose := func(n, k int) float64 {
		if k < 0 || k > n {
			return 0
		}
		r := 1.0
		for i := 1; i <= k; i++ {
			r = r * float64(n-k+i) / float64(i)
		}
		return r
	}
	for n := 1; n <= 12; n++ {
		for c := 0; c <= n; c++ {
			for k := 1; k <= n; k++ {
				at, hat := 1-choose(n-c, k)/choose(n, k), choose(c, k)/choose(n, k)
				if got := PassAtK(n, c, k); math.Abs(got-at) > 1e-12 {
					t.Errorf("pass@%d of %d/%d: %v, want %v", k, c, n, got, at)
				}
				if got := PassHatK(n, c, k); math.Abs(got-hat) > 1e-12 {
					t.Errorf("pass^%d of %d/%d: %v, want %v", k, c, n, got, hat)
				}
			}
		}
	}
	// Worked: 2 of 5 passed. pass@2 = 1 − C(3,2)/C(5,2) = 0.7, pass^2 =
	// C(2,2)/C(5,2) = 0.1; pass@1 is the fraction itself.
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-15 }
	if !near(PassAtK(5, 2, 2), 0.7) || !near(PassHatK(5, 2, 2), 0.1) || !near(PassAtK(5, 2, 1), 0.4) {
		t.Errorf("worked example: %v %v %v", PassAtK(5, 2, 2), PassHatK(5, 2, 2), PassAtK(5, 2, 1))
	}
	// No overflow where C(n, k) has no float64.
	if p := PassAtK(2000, 1, 1000); math.Abs(p-0.5) > 1e-9 {
		t.Errorf("pass@1000 of 1/2000: %v", p)
	}
}

func passed(b bool) *bool { return &b }

// Rates: a task's row from its sessions over the trials, unscored sessions
// apart; the round's row the mean over its tasks with the error over them.
func TestRatesPerTaskAndRound(t *testing.T) {
	session := func(task string, p *bool) Session { return Session{Task: task, Passed: p} }
	w := &Work{Trials: 2, Rounds: []*Round{
		{Name: "c3", Trial: 1, Sessions: []Session{session("a", passed(true)), session("b", passed(false)), session("c", nil)}},
		{Name: "c3", Trial: 2, Sessions: []Session{session("a", passed(true)), session("b", passed(true)), session("c", nil)}},
		{Name: "solo", Trial: 1, Sessions: []Session{session("a", passed(false))}},
		{Name: "solo", Trial: 2, Sessions: []Session{{Task: "a", Infra: "backend unreachable"}}},
	}}
	f := func(x float64) *float64 { return &x }
	want := []PassRate{
		{Round: "c3", Task: "a", Tasks: 1, Attempts: 2, Passed: 2, K: 2, Pass1: f(1), Pass1Stderr: f(0), PassK: f(1), PassHatK: f(1)},
		{Round: "c3", Task: "b", Tasks: 1, Attempts: 2, Passed: 1, K: 2, Pass1: f(0.5), Pass1Stderr: f(0.5), PassK: f(1), PassHatK: f(0)},
		{Round: "c3", Task: "c", Unscored: 2, K: 2},
		// Tasks a and b: pass@1 1 and 0.5, mean 0.75, sample sd √0.125
		// over √2 = 0.25.
		{Round: "c3", Tasks: 2, Attempts: 4, Passed: 3, Unscored: 2, K: 2, Pass1: f(0.75), Pass1Stderr: f(0.25), PassK: f(1), PassHatK: f(0.5)},
		// One scored session of two trials: pass@1 0 with no error, and
		// too few for pass@2.
		{Round: "solo", Task: "a", Tasks: 1, Attempts: 1, Unscored: 1, K: 2, Pass1: f(0)},
		{Round: "solo", Tasks: 1, Attempts: 1, Unscored: 1, K: 2, Pass1: f(0)},
	}
	if d := cmp.Diff(want, Rates(w), cmpopts.EquateApprox(0, 1e-12)); d != "" {
		t.Errorf("rates (-want +got):\n%s", d)
	}
}
