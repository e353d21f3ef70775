package engine

import "testing"

// TestNewFillsDefaults: an engine built from zero options runs with
// DefaultOptions, and a field that is set is kept.
func TestNewFillsDefaults(t *testing.T) {
	got := Options{PrefillMixed: 512}.withDefaults()
	want := DefaultOptions()
	want.PrefillMixed = 512
	if got.BlockSize != want.BlockSize || got.PrefillSolo != want.PrefillSolo || got.PrefillMixed != want.PrefillMixed ||
		got.MaxSeqs != want.MaxSeqs || got.MaxWaiting != want.MaxWaiting || got.SpecNgram != want.SpecNgram {
		t.Fatalf("withDefaults = %+v, want %+v", got, want)
	}
	if want.BlockSize == 0 || want.PrefillSolo == 0 || want.MaxSeqs == 0 {
		t.Fatalf("DefaultOptions has zero fields: %+v", want)
	}
}
