//go:build race

package server

// The race detector slows byte loops twenty-fold: tests leave out the
// variants that only repeat a big input (the pass without it runs them).
func init() { underRace = true }
