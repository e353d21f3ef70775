package engine

import (
	"math"
	"time"

	"jspark/backend/model"
)

// stepClock predicts how long a batch takes and learns the device's speed
// from the steps it times, so that prefill chunks can be sized in time
// rather than in tokens: a token budget that is fine for a small model on a
// GPU is tens of seconds for a large one on a CPU.
//
// A batch's work is counted in floating-point operations from the model's
// shape: every token pays the weights (linear), and every token pays
// attention over the positions before it (attend per position), which is
// why a chunk late in a long prompt costs more than an early one.
type stepClock struct {
	linear     float64 // flops per token outside attention
	attend     float64 // flops per token per earlier position
	secPerFlop float64 // EWMA over timed steps; 0 until the first
}

// stepClockAlpha weighs the newest step in the EWMA: a few steps follow a
// change of load, one odd step moves the estimate by a third.
const stepClockAlpha = 0.3

func newStepClock(c model.Config) *stepClock {
	q, kv := c.Heads*c.HeadDim, c.KVDim()
	perLayer := 2 * float64(c.Dim*q+2*c.Dim*kv+q*c.Dim+3*c.Dim*c.FF)
	return &stepClock{
		linear: float64(c.Layers) * perLayer,
		attend: float64(c.Layers) * 4 * float64(q), // q·k and p·v over each position
	}
}

// work is the flops of n tokens at positions ctx, ctx+1, …, ctx+n-1.
func (c *stepClock) work(ctx, n int) float64 {
	fn := float64(n)
	return fn*c.linear + c.attend*(fn*float64(ctx)+fn*(fn-1)/2)
}

// known reports whether a step has been timed yet.
func (c *stepClock) known() bool { return c.secPerFlop > 0 }

// seconds predicts the duration of the given work.
func (c *stepClock) seconds(work float64) float64 { return work * c.secPerFlop }

// observe learns from one timed step.
func (c *stepClock) observe(work float64, d time.Duration) {
	if work <= 0 || d <= 0 {
		return
	}
	r := d.Seconds() / work
	if c.secPerFlop == 0 {
		c.secPerFlop = r
		return
	}
	c.secPerFlop += stepClockAlpha * (r - c.secPerFlop)
}

// fit is the largest n whose tokens, starting at position ctx, are
// predicted to take at most sec seconds.
func (c *stepClock) fit(ctx int, sec float64) int {
	if sec <= 0 {
		return 0
	}
	w := sec / c.secPerFlop
	// work(n) = a/2·n² + b·n with a = attend, b = linear + attend·(ctx − ½).
	a, b := c.attend, c.linear+c.attend*(float64(ctx)-0.5)
	var n float64
	if a == 0 {
		n = w / b
	} else {
		n = (-b + math.Sqrt(b*b+2*a*w)) / a
	}
	if n > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(n)
}
