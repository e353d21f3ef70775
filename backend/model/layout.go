package model

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"jspark/kernels"
	"jspark/kernels/quant"
)

// KVLayout is how a store keeps the attention layers' keys and values: in
// KV-cache groups of Tensors layers each, all layers of a group of one
// kind (full attention, or one sliding window), each group with a block
// table of its own (Batch.Table is group 0's, Batch.Groups the others'),
// as vLLM v1's hybrid allocator keeps them.
//
// The store holds Tensors key buffers and as many value buffers, each of
// Blocks pages of BlockSize() positions, and layer j of every group uses
// buffer j: so a page id is one block of one group, whichever group holds
// it, and all groups draw on one pool of pages. A sliding-window group's
// block that lies wholly before a sequence's window is never read again,
// and its page can go to another group.
type KVLayout struct {
	Groups  []KVGroup
	Tensors int   // layers per group
	Group   []int // each layer's group, -1 for a recurrent layer
	Tensor  []int // each layer's buffer, -1 for a recurrent layer
}

// KVGroup is one KV-cache group: Tensors layers of one kind.
type KVGroup struct {
	Kind   LayerKind // FullAttention or SlidingWindow
	Window int       // SlidingWindow: the positions a token sees, itself included
	Layers []int
}

// PagedLayout is the layout of a paged store (NewPagedPool): the
// attention layers split by kind and window into groups of equal size,
// the greatest that divides every kind's count (full-attention groups
// first, then sliding ones by window, each group's layers in order). A
// model of one kind has one group of all its attention layers.
func (c Config) PagedLayout() KVLayout {
	kinds := map[[2]int][]int{} // (kind, window) → layers
	for l, s := range c.states() {
		switch s.Kind {
		case FullAttention:
			kinds[[2]int{0, 0}] = append(kinds[[2]int{0, 0}], l)
		case SlidingWindow:
			kinds[[2]int{1, s.Window}] = append(kinds[[2]int{1, s.Window}], l)
		}
	}
	keys := slices.SortedFunc(maps.Keys(kinds), func(a, b [2]int) int { return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1])) })
	size := 0
	for _, k := range keys {
		size = gcd(size, len(kinds[k]))
	}
	lay := c.emptyLayout(size)
	for _, k := range keys {
		kind := FullAttention
		if k[0] == 1 {
			kind = SlidingWindow
		}
		ls := kinds[k]
		for i := 0; i < len(ls); i += size {
			lay.add(KVGroup{Kind: kind, Window: k[1], Layers: ls[i : i+size]})
		}
	}
	return lay
}

// singleLayout is the layout of a plain store: one group of every
// attention layer, each with a buffer of its own (a sliding layer reads
// the whole table, within its window).
func (c Config) singleLayout() KVLayout {
	var ls []int
	for l, s := range c.states() {
		if s.Kind != Recurrent {
			ls = append(ls, l)
		}
	}
	lay := c.emptyLayout(len(ls))
	if len(ls) > 0 {
		lay.add(KVGroup{Kind: FullAttention, Layers: ls})
	}
	return lay
}

func (c Config) emptyLayout(size int) KVLayout {
	lay := KVLayout{Tensors: size, Group: make([]int, c.Layers), Tensor: make([]int, c.Layers)}
	for l := range lay.Group {
		lay.Group[l], lay.Tensor[l] = -1, -1
	}
	return lay
}

func (lay *KVLayout) add(g KVGroup) {
	for j, l := range g.Layers {
		lay.Group[l], lay.Tensor[l] = len(lay.Groups), j
	}
	lay.Groups = append(lay.Groups, g)
}

// states is each layer's state; a Config not read from a file has
// attention only.
func (c Config) states() []LayerState {
	if len(c.States) != c.Layers {
		return make([]LayerState, c.Layers)
	}
	return c.States
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// table is group g's block table of token i.
func (b *Batch) table(g, i int) []int32 {
	if g == 0 {
		return b.Table[i]
	}
	return b.Groups[g-1][i]
}

// checkGroups validates the batch's tables against the layout: one per
// group and token, each covering the token's position, and a sliding
// group's entries within each token's window set (not -1). It checks a
// run of one sequence's tokens once.
func (b *Batch) checkGroups(lay *KVLayout, bs int) error {
	n := len(b.Tokens)
	if len(b.Groups) != max(0, len(lay.Groups)-1) {
		return fmt.Errorf("batch: %d extra block tables for %d KV groups", len(b.Groups), len(lay.Groups))
	}
	for g, grp := range lay.Groups {
		if g > 0 && len(b.Groups[g-1]) != n {
			return fmt.Errorf("batch: %d tokens, %d tables of KV group %d", n, len(b.Groups[g-1]), g)
		}
		for i := 0; i < n; {
			t := b.table(g, i)
			j := i + 1
			for j < n && sameTable(b.table(g, j), t) && b.Pos[j] == b.Pos[j-1]+1 {
				j++
			}
			hi := b.Pos[j-1] / bs
			if hi >= len(t) {
				return fmt.Errorf("batch: token %d at position %d has %d blocks of %d in KV group %d", j-1, b.Pos[j-1], len(t), bs, g)
			}
			if grp.Kind == SlidingWindow {
				for e := max(0, b.Pos[i]-grp.Window+1) / bs; e <= hi; e++ {
					if t[e] < 0 {
						return fmt.Errorf("batch: token %d at position %d: block %d of KV group %d (window %d) is freed", i, b.Pos[i], e, g, grp.Window)
					}
				}
			}
			i = j
		}
	}
	return nil
}

// groupBufs are a KV group's step inputs besides group 0's (the device's
// table, slots and att): its sequences' block tables, in the order stage
// gave them, and each token's slot.
type groupBufs struct {
	table, slots     *kernels.Buffer // I32 (tableLen), (tokens)
	tableLen, tokens int
	att              kernels.Attention
	hTable, hSlots   []int32
}

// layoutOf is kv's layout, or one group of every attention layer for a
// store that states none.
func (d *device) layoutOf(kv KVStore, c Config) *KVLayout {
	if s, ok := kv.(interface{ Layout() *KVLayout }); ok {
		return s.Layout()
	}
	if d.single == nil {
		l := c.singleLayout()
		d.single = &l
	}
	return d.single
}

// stageGroups writes the block tables and slots of groups 1, 2, … to the
// device, and sets up their attention as d.att over their tables.
func (d *device) stageGroups(k kernels.Kernels, b *Batch, lay *KVLayout, bs int) error {
	for len(d.groups) < len(lay.Groups)-1 {
		d.groups = append(d.groups, groupBufs{})
	}
	n := len(b.Tokens)
	for g := 1; g < len(lay.Groups); g++ {
		gb, tabs := &d.groups[g-1], b.Groups[g-1]
		stride := 0
		for _, i := range d.seqFirst {
			stride = max(stride, len(tabs[i]))
		}
		if n > gb.tokens {
			gb.tokens = max(n, 2*gb.tokens)
			if err := allocI32(k, &gb.slots, gb.tokens); err != nil {
				return err
			}
		}
		if need := len(d.seqFirst) * stride; need > gb.tableLen {
			gb.tableLen = max(need, 2*gb.tableLen)
			if err := allocI32(k, &gb.table, gb.tableLen); err != nil {
				return err
			}
		}
		gb.hSlots = gb.hSlots[:0]
		for i, p := range b.Pos {
			gb.hSlots = append(gb.hSlots, tabs[i][p/bs]*int32(bs)+int32(p%bs))
		}
		gb.hTable = gb.hTable[:0]
		for _, i := range d.seqFirst {
			gb.hTable = append(gb.hTable, tabs[i]...)
			for j := len(tabs[i]); j < stride; j++ {
				gb.hTable = append(gb.hTable, 0)
			}
		}
		k.Write(gb.slots, 0, kernels.I32Bytes(gb.hSlots))
		k.Write(gb.table, 0, kernels.I32Bytes(gb.hTable))
		gb.att = d.att
		gb.att.Table, gb.att.TableStride = gb.table, stride
	}
	return nil
}

// allocI32 replaces *b with n zeroed I32 elements, mapped now.
func allocI32(k kernels.Kernels, b **kernels.Buffer, n int) error {
	if *b != nil {
		k.Free(*b)
	}
	var err error
	if *b, err = k.Alloc(quant.I32, n); err != nil {
		return err
	}
	kernels.Prefault(k, *b)
	return nil
}
