package sample

import (
	"math"
	"testing"
)

func TestGreedy(t *testing.T) {
	s := New(Params{})
	if got := s.Sample([]float32{1, 5, 5, 2}, nil, nil); got != 1 {
		t.Fatalf("greedy picked %d, want the first maximum 1", got)
	}
}

func TestSeededDrawsRepeat(t *testing.T) {
	logits := []float32{1, 2, 3, 4, 5, 6, 7, 8}
	p := Params{Temperature: 1.5, TopK: 6, TopP: 0.95, Seed: 42}
	a, b := New(p), New(p)
	counts := map[int]int{}
	for i := 0; i < 2000; i++ {
		x := a.Sample(append([]float32(nil), logits...), nil, nil)
		if y := b.Sample(append([]float32(nil), logits...), nil, nil); x != y {
			t.Fatalf("draw %d: %d vs %d with the same seed", i, x, y)
		}
		counts[x]++
	}
	if counts[0] != 0 || counts[1] != 0 {
		t.Fatalf("top-k 6 let ids 0/1 through: %v", counts)
	}
	if counts[7] <= counts[2] {
		t.Fatalf("draws not ordered by probability: %v", counts)
	}
}

func TestMinPAndPenalty(t *testing.T) {
	s := New(Params{Temperature: 1, MinP: 0.5, Seed: 1})
	for i := 0; i < 200; i++ {
		if got := s.Sample([]float32{0, 10, 9.9, 0}, nil, nil); got != 1 && got != 2 {
			t.Fatalf("min-p kept %d", got)
		}
	}
	g := New(Params{RepeatPenalty: 10})
	if got := g.Sample([]float32{5, 4.9, 0}, []int{0}, nil); got != 1 {
		t.Fatalf("penalty did not push id 0 below id 1: %d", got)
	}
}

func TestLogSoftmax(t *testing.T) {
	lp := LogSoftmax([]float32{0, float32(math.Log(3))})
	if math.Abs(lp[0]-math.Log(0.25)) > 1e-6 || math.Abs(lp[1]-math.Log(0.75)) > 1e-6 {
		t.Fatalf("log-softmax %v", lp)
	}
}

// TestPenaltiesAndBias pins the exact logits after OpenAI's presence and
// frequency penalties (output tokens only) and a logit bias.
func TestPenaltiesAndBias(t *testing.T) {
	logits := []float32{1, 2, 3, 4, 0}
	s := New(Params{PresencePenalty: 0.5, FrequencyPenalty: 1, LogitBias: map[int]float32{4: 2.25, 99: 5}})
	history := []int{0, 0, 0, 3, 3, 1} // the prompt's 0s are not output
	got := s.Sample(logits, history, history[3:])
	want := []float32{1, 2 - 0.5 - 1, 3, 4 - 0.5 - 2, 2.25}
	for i := range want {
		if logits[i] != want[i] {
			t.Fatalf("logits %v, want %v", logits, want)
		}
	}
	if got != 2 {
		t.Fatalf("greedy after penalties picked %d, want 2", got)
	}
	// A large bias makes greedy decoding pick the token every time.
	b := New(Params{LogitBias: map[int]float32{0: 100}})
	if got := b.Sample([]float32{0, 50, 60}, nil, nil); got != 0 {
		t.Fatalf("logit bias +100 did not win: %d", got)
	}
}
