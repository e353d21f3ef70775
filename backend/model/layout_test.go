package model

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"jspark/kernels/cpu"
	"jspark/kernels/quant"
)

// TestPagedLayout: the attention layers split by kind and window into
// groups of the greatest size that divides every kind's count, full ones
// first; recurrent layers in none.
func TestPagedLayout(t *testing.T) {
	F, S, R := LayerState{Kind: FullAttention}, LayerState{Kind: SlidingWindow, Window: 8}, LayerState{Kind: Recurrent, StateFloats: 4}
	W := LayerState{Kind: SlidingWindow, Window: 4}
	gemma := func(n int) []LayerState {
		var s []LayerState
		for i := range n {
			if (i+1)%6 == 0 {
				s = append(s, F)
			} else {
				s = append(s, S)
			}
		}
		return s
	}
	type group struct {
		Kind   LayerKind
		Window int
		Layers []int
	}
	for _, tc := range []struct {
		name    string
		states  []LayerState
		tensors int
		groups  []group
	}{
		{"llama", []LayerState{F, F, F}, 3, []group{{FullAttention, 0, []int{0, 1, 2}}}},
		{"gemma3-6", gemma(6), 1, []group{{FullAttention, 0, []int{5}},
			{SlidingWindow, 8, []int{0}}, {SlidingWindow, 8, []int{1}}, {SlidingWindow, 8, []int{2}}, {SlidingWindow, 8, []int{3}}, {SlidingWindow, 8, []int{4}}}},
		{"gemma3-12", gemma(12), 2, []group{{FullAttention, 0, []int{5, 11}},
			{SlidingWindow, 8, []int{0, 1}}, {SlidingWindow, 8, []int{2, 3}}, {SlidingWindow, 8, []int{4, 6}}, {SlidingWindow, 8, []int{7, 8}}, {SlidingWindow, 8, []int{9, 10}}}},
		{"qwen35", []LayerState{R, R, R, F, R, R, R, F}, 2, []group{{FullAttention, 0, []int{3, 7}}}},
		{"two windows", []LayerState{W, S, F, W, S, F}, 2, []group{{FullAttention, 0, []int{2, 5}},
			{SlidingWindow, 4, []int{0, 3}}, {SlidingWindow, 8, []int{1, 4}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Config{Layers: len(tc.states)}
			c.States = tc.states
			lay := c.PagedLayout()
			if lay.Tensors != tc.tensors {
				t.Errorf("%d layers per group, want %d", lay.Tensors, tc.tensors)
			}
			var got []group
			for g, grp := range lay.Groups {
				got = append(got, group{grp.Kind, grp.Window, grp.Layers})
				for j, l := range grp.Layers {
					if lay.Group[l] != g || lay.Tensor[l] != j {
						t.Errorf("layer %d: group %d buffer %d, want %d, %d", l, lay.Group[l], lay.Tensor[l], g, j)
					}
				}
			}
			if d := cmp.Diff(tc.groups, got); d != "" {
				t.Errorf("groups (-want +got):\n%s", d)
			}
			for l, s := range tc.states {
				if s.Kind == Recurrent && (lay.Group[l] != -1 || lay.Tensor[l] != -1) {
					t.Errorf("recurrent layer %d in group %d", l, lay.Group[l])
				}
			}
		})
	}
}

// TestPagedPoolBits: gemma3 over a paged store, each group's blocks on
// pages of their own and the sliding groups' blocks behind every window
// freed (-1) as a sequence decodes, gives the bits of a plain store, step
// by step; a freed block inside a window is the batch's error.
func TestPagedPoolBits(t *testing.T) {
	m := synthModel(t, tinyHybrid("gemma3", quant.F32), cpu.New(2))
	const bs, prefill = 16, 20
	ids := hybridPrompt
	run := func(kv KVStore, table func(g, pos int) []int32, groups int) [][]float32 {
		var out [][]float32
		for start := 0; start < len(ids); {
			end := len(ids)
			if start == 0 {
				end = prefill
			} else if start >= prefill {
				end = start + 1
			}
			b := &Batch{Groups: make([][][]int32, groups)}
			for p := start; p < end; p++ {
				b.Tokens, b.Pos, b.Table = append(b.Tokens, ids[p]), append(b.Pos, p), append(b.Table, table(0, start))
				for g := range groups {
					b.Groups[g] = append(b.Groups[g], table(g+1, start))
				}
			}
			b.Logits = []int{len(b.Tokens) - 1}
			logits, err := m.Forward(b, kv)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, slices.Clone(logits))
			start = end
		}
		return out
	}
	plain := NewStatePool(m.Config, 3, bs, quant.F32, 1)
	defer plain.Free()
	want := run(plain, func(int, int) []int32 { return plain.Contiguous() }, 0)

	paged := NewPagedPool(m.Config, 40, bs, quant.F32, 1)
	defer paged.Free()
	lay := paged.Layout()
	if len(lay.Groups) != 6 || lay.Groups[1].Kind != SlidingWindow {
		t.Fatalf("gemma3's layout: %+v", lay.Groups)
	}
	tables := make([][]int32, len(lay.Groups))
	for g := range tables {
		for blk := range 3 {
			tables[g] = append(tables[g], int32(39-7*blk-g)) // every group's pages apart
		}
	}
	// freed marks the sliding groups' blocks before the window of the
	// step's first token -1, as the engine frees them.
	freed := func(g, pos int) []int32 {
		t := slices.Clone(tables[g])
		if grp := lay.Groups[g]; grp.Kind == SlidingWindow {
			for blk := 0; blk < max(0, pos-grp.Window+1)/bs; blk++ {
				t[blk] = -1
			}
		}
		return t
	}
	got := run(paged, freed, len(lay.Groups)-1)
	for i := range want {
		if !slices.Equal(want[i], got[i]) {
			t.Fatalf("step %d: the paged store's logits differ from the plain store's", i)
		}
	}

	step := &Batch{Tokens: []int{5}, Pos: []int{39}, Table: [][]int32{freed(0, 39)}, Logits: []int{0}}
	for g := 1; g < len(lay.Groups); g++ {
		step.Groups = append(step.Groups, [][]int32{freed(g, 39)})
	}
	if n := testing.AllocsPerRun(10, func() { m.Forward(step, paged) }); n != 0 {
		t.Errorf("%v allocations per decode step over a paged store", n)
	}

	b := &Batch{Tokens: []int{5}, Pos: []int{33}, Table: [][]int32{tables[0]}, Logits: []int{0}}
	for g := 1; g < len(lay.Groups); g++ {
		tab := slices.Clone(tables[g])
		tab[2] = -1 // position 33's own block
		b.Groups = append(b.Groups, [][]int32{tab})
	}
	if _, err := m.Forward(b, paged); err == nil || !strings.Contains(err.Error(), "is freed") {
		t.Errorf("a freed block inside the window: %v", err)
	}
	b.Groups = b.Groups[:2]
	if _, err := m.Forward(b, paged); err == nil || !strings.Contains(err.Error(), "extra block tables") {
		t.Errorf("too few tables: %v", err)
	}
}

// TestStateCheckpointPages: a recurrent state saved into pages of a paged
// store comes back bit for bit, after the slot has run on, and pages of
// the wrong count or outside the store are errors.
func TestStateCheckpointPages(t *testing.T) {
	m := synthModel(t, tinyHybrid("qwen35", quant.F32), cpu.New(2))
	pool := NewPagedPool(m.Config, 64, 16, quant.F16, 1)
	defer pool.Free()
	table := []int32{0, 1, 2}
	step := func(from int, ids []int) {
		b := &Batch{}
		for i, id := range ids {
			b.Tokens, b.Pos, b.Table, b.Slot = append(b.Tokens, id), append(b.Pos, from+i), append(b.Table, table), append(b.Slot, 0)
		}
		if _, err := m.Forward(b, pool); err != nil {
			t.Fatal(err)
		}
	}
	step(0, hybridPrompt[:32])
	want := stateOf(t, m, pool)
	n := pool.StatePages()
	if n == 0 || n*pool.PageBytes() < m.StateBytes() {
		t.Fatalf("%d pages of %d bytes for a state of %d", n, pool.PageBytes(), m.StateBytes())
	}
	pages := make([]int32, n)
	for i := range pages {
		pages[i] = int32(63 - 2*i)
	}
	if err := pool.SaveState(0, pages); err != nil {
		t.Fatal(err)
	}
	step(32, hybridPrompt[32:])
	if d := cmp.Diff(want, stateOf(t, m, pool)); d == "" {
		t.Fatal("the slot did not run on")
	}
	if err := pool.LoadState(pages, 0); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, stateOf(t, m, pool)); d != "" {
		t.Fatalf("the state back from its pages (-saved +loaded):\n%s", d)
	}
	if err := pool.SaveState(0, pages[1:]); err == nil {
		t.Error("a state saved into too few pages")
	}
	pages[0] = 64
	if err := pool.LoadState(pages, 0); err == nil {
		t.Error("a state loaded from a page outside the store")
	}
}
