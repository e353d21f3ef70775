package model

import (
	"time"

	"jspark/backend/sample"
	"jspark/kernels"
)

// Generation is the result of Generate.
type Generation struct {
	IDs     []int
	Prefill time.Duration
	Decode  time.Duration
	// Stopped is true when an end-of-generation token ended it (that token
	// is not in IDs).
	Stopped bool
}

// PrefillChunk bounds the tokens one forward step takes in Generate.
const PrefillChunk = 512

// Generate runs one sequence alone: prefill prompt, then sample up to
// maxTokens, calling onToken for each. It is the simplest driver of the
// forward pass; the engine does the same for many sequences at once.
func (m *Model) Generate(prompt []int, maxTokens int, s *sample.Sampler, onToken func(id int)) (Generation, error) {
	const bs = 16
	total := len(prompt) + maxTokens
	pool := NewTypedPool(m.Config, (total+bs-1)/bs, bs, m.KVType)
	defer pool.Free()
	table := pool.Contiguous()
	// The KV pool and the step buffers are made before the clock starts,
	// as an engine makes them once at start (llama.cpp at context creation).
	keys, values, err := pool.Buffers(m.K)
	if err != nil {
		return Generation{}, err
	}
	for i := range keys {
		if keys[i] != nil { // a recurrent layer's are nil
			kernels.Prefault(m.K, keys[i])
			kernels.Prefault(m.K, values[i])
		}
	}
	if err := m.dev.reserve(m.K, m.Config, min(len(prompt), PrefillChunk), 1, len(table)); err != nil {
		return Generation{}, err
	}
	var g Generation
	start := time.Now()
	ctx := append([]int(nil), prompt...)
	var logits []float32
	for off := 0; off < len(prompt); off += PrefillChunk {
		end := min(off+PrefillChunk, len(prompt))
		b := &Batch{Tokens: prompt[off:end]}
		for p := off; p < end; p++ {
			b.Pos = append(b.Pos, p)
			b.Table = append(b.Table, table)
		}
		if end == len(prompt) {
			b.Logits = []int{end - off - 1}
		}
		var err error
		if logits, err = m.Forward(b, pool); err != nil {
			return g, err
		}
	}
	g.Prefill = time.Since(start)
	start = time.Now()
	for len(g.IDs) < maxTokens {
		id := s.Sample(logits, ctx, g.IDs)
		if m.Tok.EOG[id] {
			g.Stopped = true
			break
		}
		g.IDs = append(g.IDs, id)
		ctx = append(ctx, id)
		if onToken != nil {
			onToken(id)
		}
		if len(g.IDs) == maxTokens {
			break
		}
		b := &Batch{Tokens: []int{id}, Pos: []int{len(ctx) - 1}, Table: [][]int32{table}, Logits: []int{0}}
		var err error
		if logits, err = m.Forward(b, pool); err != nil {
			return g, err
		}
	}
	g.Decode = time.Since(start)
	return g, nil
}
