package record

import "math"

// PassRate is one row of a run's pass rates: one task of a round over all
// its sessions of every trial, or (Task empty) the round's tasks together.
//
// A task's row estimates from n scored sessions, c of them passed, as
// Inspect's epoch reducers and τ-bench do: pass@1 = c/n with its standard
// error √(p(1−p)/(n−1)) (the sample standard deviation of the sessions'
// scores over √n); pass@k = 1 − C(n−c, k)/C(n, k), the unbiased estimator of
// Chen et al. 2021 (the chance that at least one of k sessions passes); and
// pass^k = C(c, k)/C(n, k), τ-bench's (the chance that all k pass). k is
// the run's trials. A round's row is the mean of its tasks' rows, the
// standard error taken over the tasks' pass@1 (Inspect's: scores reduced
// over epochs per sample, then the error over samples).
type PassRate struct {
	Round    string `json:"round"`
	Task     string `json:"task,omitempty"` // empty: the round's tasks together
	Tasks    int    `json:"tasks"`          // tasks with a scored session
	Attempts int    `json:"attempts"`       // scored sessions
	Passed   int    `json:"passed"`
	// Unscored are the sessions not scored: infrastructure failures, and
	// tasks with neither a check nor an expected text.
	Unscored int `json:"unscored"`
	// The estimates; nil where there is nothing to estimate from (no
	// scored session; one, for the error; fewer than k, for pass@k and
	// pass^k).
	Pass1       *float64 `json:"pass_at_1"`
	Pass1Stderr *float64 `json:"pass_at_1_stderr"`
	K           int      `json:"k"`
	PassK       *float64 `json:"pass_at_k"`
	PassHatK    *float64 `json:"pass_hat_k"`
}

// Rates are the pass rates of w's rounds, each round's tasks in the order
// its sessions first name them, then the round's row; k is w's trials.
func Rates(w *Work) []PassRate {
	k := max(w.Trials, 1)
	type key struct{ round, task string }
	var order []key
	rows := map[key]*PassRate{}
	var rounds []string
	for _, r := range w.Rounds {
		if _, ok := rows[key{r.Name, ""}]; !ok {
			rows[key{r.Name, ""}] = &PassRate{Round: r.Name, K: k}
			rounds = append(rounds, r.Name)
		}
		for _, s := range r.Sessions {
			kk := key{r.Name, s.Task}
			p := rows[kk]
			if p == nil {
				p = &PassRate{Round: r.Name, Task: s.Task, K: k}
				rows[kk] = p
				order = append(order, kk)
			}
			switch {
			case s.Passed == nil:
				p.Unscored++
			case *s.Passed:
				p.Passed++
				fallthrough
			default:
				p.Attempts++
			}
		}
	}
	var out []PassRate
	for _, name := range rounds {
		var tasks []PassRate
		for _, kk := range order {
			if kk.round == name {
				p := rows[kk]
				p.estimate()
				tasks = append(tasks, *p)
			}
		}
		out = append(out, tasks...)
		out = append(out, roundRate(rows[key{name, ""}], tasks))
	}
	return out
}

// estimate fills a task's estimates from its counts.
func (p *PassRate) estimate() {
	n, c, k := p.Attempts, p.Passed, p.K
	if n == 0 {
		return
	}
	p.Tasks = 1
	p1 := float64(c) / float64(n)
	p.Pass1 = &p1
	if n > 1 {
		se := math.Sqrt(p1 * (1 - p1) / float64(n-1))
		p.Pass1Stderr = &se
	}
	if n >= k {
		pk, hat := PassAtK(n, c, k), PassHatK(n, c, k)
		p.PassK, p.PassHatK = &pk, &hat
	}
}

// roundRate is a round's row: the sums of its tasks' counts and the means
// of their estimates.
func roundRate(p *PassRate, tasks []PassRate) PassRate {
	var p1, pk, hat []float64
	for _, t := range tasks {
		p.Attempts += t.Attempts
		p.Passed += t.Passed
		p.Unscored += t.Unscored
		if t.Pass1 == nil {
			continue
		}
		p.Tasks++
		p1 = append(p1, *t.Pass1)
		if t.PassK != nil {
			pk, hat = append(pk, *t.PassK), append(hat, *t.PassHatK)
		}
	}
	p.Pass1 = mean(p1)
	if len(p1) > 1 {
		m, ss := *p.Pass1, 0.0
		for _, x := range p1 {
			ss += (x - m) * (x - m)
		}
		se := math.Sqrt(ss / float64(len(p1)-1) / float64(len(p1)))
		p.Pass1Stderr = &se
	}
	// Over every task or none: a mean over the tasks that had k sessions
	// would be another round's.
	if len(pk) == len(p1) {
		p.PassK, p.PassHatK = mean(pk), mean(hat)
	}
	return *p
}

// PassAtK is 1 − C(n−c, k)/C(n, k): of n sessions c passed; the chance
// that some of k drawn from them passed. It is computed as a product, as
// Chen et al.'s numpy code does, so large n do not overflow.
func PassAtK(n, c, k int) float64 {
	if n-c < k {
		return 1
	}
	fail := 1.0
	for i := n - c + 1; i <= n; i++ {
		fail *= 1 - float64(k)/float64(i)
	}
	return 1 - fail
}

// PassHatK is C(c, k)/C(n, k): the chance that all of k sessions drawn from
// the n passed (τ-bench's pass^k).
func PassHatK(n, c, k int) float64 {
	if c < k {
		return 0
	}
	all := 1.0
	for i := 0; i < k; i++ {
		all *= float64(c-i) / float64(n-i)
	}
	return all
}
