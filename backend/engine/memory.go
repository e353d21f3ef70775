package engine

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"jspark/backend/model"
	"jspark/kernels"
)

// memoryPlan is how New divides the KV memory: the recurrent layers'
// state slots, one per running sequence, then pages of the store's
// layout (model.KVLayout), which every KV group and the state
// checkpoints share.
type memoryPlan struct {
	layout    model.KVLayout
	pageBytes int64
	pages     int
	slots     int // recurrent state slots: sequences that run at once (1, unused, for a model without them)
	stateMem  int64
	budget    int64 // KVMemory, Auto resolved
	capacity  int   // tokens of the longest sequence the pages hold alone
}

func planMemory(m *model.Model, opt Options) (memoryPlan, error) {
	lay := m.Config.PagedLayout()
	groups := len(lay.Groups)
	if groups == 0 {
		return memoryPlan{}, fmt.Errorf("engine: %s has no attention layer to page", m.Arch)
	}
	p := memoryPlan{layout: lay, slots: 1, budget: opt.KVMemory,
		pageBytes: int64(2 * lay.Tensors * opt.BlockSize * m.KVType.RowBytes(m.KVDim()))}
	if opt.KVBlocks == 0 && p.budget == Auto {
		p.budget = min(availableMemory()/5, 4<<30)
	}
	if state := int64(m.StateBytes()); state > 0 {
		p.slots = opt.MaxSeqs
		if opt.KVBlocks == 0 {
			// NOTE: the states take at most half the memory: a model of
			// large states runs fewer sequences at once rather than none.
			p.slots = int(min(int64(opt.MaxSeqs), max(1, p.budget/2/state)))
		}
		p.stateMem = state * int64(p.slots)
	}
	p.pages = opt.KVBlocks * groups // KVBlocks: blocks of every group
	if p.pages == 0 {
		p.pages = int((p.budget - p.stateMem) / p.pageBytes)
	}
	if p.pages < 2*groups {
		return p, fmt.Errorf("engine: KV memory holds %d blocks of %d tokens after %d recurrent states (%.1f MiB); need at least 2",
			p.pages/groups, opt.BlockSize, p.slots, float64(p.stateMem)/(1<<20))
	}
	p.capacity = capacityTokens(p.pages, opt.BlockSize, lay.Groups, opt.MaxContext)
	return p, nil
}

// running is how many sequences may run at once: MaxSeqs, or fewer when
// the recurrent states that fit are fewer.
func (p memoryPlan) running(opt Options) int {
	if p.stateMem > 0 {
		return min(opt.MaxSeqs, p.slots)
	}
	return opt.MaxSeqs
}

// capacityTokens is the longest sequence that pages hold alone: a page
// per full-attention group per block; a sliding group's only over its
// window and the block being written.
func capacityTokens(pages, bs int, groups []model.KVGroup, maxContext int) int {
	full, fixed := 0, 0
	for _, g := range groups {
		if g.Kind == model.FullAttention {
			full++
		} else {
			fixed += windowBlocks(g.Window, bs) + 1
		}
	}
	if full == 0 {
		return maxContext
	}
	return max(0, pages-fixed) / full * bs
}

// reportContext writes the context, and whether it runs beyond the model's.
func reportContext(w io.Writer, m *model.Model, opt Options) {
	fmt.Fprintf(w, ", context %d", opt.MaxContext)
	if opt.MaxContext > m.Context {
		fmt.Fprintf(w, " (the model states %d; running beyond it)", m.Context)
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// windowTokens is the most tokens a sequence keeps between steps in a
// sliding group: the blocks the widest window spans (0 without one).
func (p memoryPlan) windowTokens(bs int) int {
	most := 0
	for _, g := range p.layout.Groups {
		if g.Kind == model.SlidingWindow {
			most = max(most, windowBlocks(g.Window, bs)*bs)
		}
	}
	return most
}

// windowBlocks is the most blocks a window of w positions spans.
func windowBlocks(w, bs int) int { return (w+bs-2)/bs + 1 }

// report writes the start-up facts: the cache's memory and capacity by
// layer kind.
func (p memoryPlan) report(w io.Writer, m *model.Model, opt Options) {
	bs := opt.BlockSize
	mib := func(b int64) float64 { return float64(b) / (1 << 20) }
	groups := len(p.layout.Groups)
	if groups == 1 && p.stateMem == 0 {
		fmt.Fprintf(w, "jspark engine: %s, KV cache %d tokens (%d blocks of %d, %.1f MiB)",
			m.Arch, p.pages*bs, p.pages, bs, mib(int64(p.pages)*p.pageBytes))
		reportContext(w, m, opt)
	} else {
		fmt.Fprintf(w, "jspark engine: %s, KV cache %d pages of %d tokens × %s (%.1f MiB), %d groups",
			m.Arch, p.pages, bs, plural(p.layout.Tensors, "layer"), mib(int64(p.pages)*p.pageBytes), groups)
		reportContext(w, m, opt)
		type kind struct {
			kind   model.LayerKind
			window int
		}
		byKind := map[kind]int{}
		var kinds []kind
		for _, g := range p.layout.Groups {
			k := kind{g.Kind, g.Window}
			if byKind[k] == 0 {
				kinds = append(kinds, k)
			}
			byKind[k]++
		}
		for _, k := range kinds {
			layers := plural(byKind[k]*p.layout.Tensors, "layer")
			if k.kind == model.FullAttention {
				fmt.Fprintf(w, "; full attention: %s, up to %d tokens a sequence", layers, p.capacity)
			} else {
				fmt.Fprintf(w, "; sliding window %d: %s, %d tokens a sequence", k.window, layers, windowBlocks(k.window, bs)*bs)
			}
		}
		if p.stateMem > 0 {
			fmt.Fprintf(w, "; recurrent: %s, %d state slots (%.1f MiB: at most %d sequences at once), checkpoints of %s",
				plural(m.RecurrentLayers(), "layer"), p.slots, mib(p.stateMem), p.slots, plural((m.StateBytes()+int(p.pageBytes)-1)/int(p.pageBytes), "page"))
		}
	}
	fmt.Fprintln(w)
}

// copyBlock copies the keys and values of the first n slots of page src
// into page dst, in every buffer.
func (e *Engine) copyBlock(dst, src BlockID, n int) {
	keys, values, err := e.kv.Tensors(e.m.K)
	if err != nil {
		panic("engine: a cached block without a KV store: " + err.Error())
	}
	width, bs := e.m.KVDim(), e.opt.BlockSize
	buf := make([]byte, e.kv.Type.RowBytes(width)*n)
	for j := range keys {
		for _, b := range []*kernels.Buffer{keys[j], values[j]} {
			e.m.K.Read(buf, b, int(src)*bs*width)
			e.m.K.Write(b, int(dst)*bs*width, buf)
		}
	}
}

// saveState and loadState move a recurrent state between a slot and the
// pages of a checkpoint.
func (e *Engine) saveState(slot int, pages []BlockID) error { return e.kv.SaveState(slot, pages) }
func (e *Engine) loadState(pages []BlockID, slot int) error { return e.kv.LoadState(pages, slot) }

// availableMemory reads MemAvailable from /proc/meminfo (1 GiB if unknown).
func availableMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
				f := strings.Fields(rest)
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 1 << 30
}
