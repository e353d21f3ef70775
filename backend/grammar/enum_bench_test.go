package grammar

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// bigEnum is the hostile schema: an enum of n short strings
// (100,000 of them are 1.3 MB).
func bigEnum(n int) []byte {
	vals := make([]string, n)
	for i := range vals {
		vals[i] = fmt.Sprintf("item%06d", i)
	}
	b, _ := json.Marshal(map[string]any{"enum": vals})
	return b
}

// BenchmarkEnumMask prices one mask of a 100,000-value enum on a 50K
// vocabulary: before the opening quote and inside a value.
func BenchmarkEnumMask(b *testing.B) {
	tok := gpt2(b)
	schema := bigEnum(100_000)
	t0 := time.Now()
	g, err := FromSchema(schema)
	if err != nil {
		b.Fatal(err)
	}
	c := g.NewConstraint(tok)
	b.Logf("schema %d bytes, compiled and started in %v", len(schema), time.Since(t0))
	b.Run("start", func(b *testing.B) {
		for b.Loop() {
			c.Allowed()
		}
	})
	for _, id := range tok.Encode(`"item0`, false, false) {
		c.Accept(id)
	}
	b.Run("inside", func(b *testing.B) {
		for b.Loop() {
			c.Allowed()
		}
	})
}
