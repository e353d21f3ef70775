package grammar

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"jspark/backend/embedded"
	"jspark/backend/tokenizer"
)

// validator compiles schema with an independent JSON Schema implementation
// (santhosh-tekuri/jsonschema, exact numbers, Go regexp patterns).
func validator(t testing.TB, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("schema.json")
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	return sch
}

// validate checks that text is one JSON value that sch accepts.
func validate(sch *jsonschema.Schema, text string) error {
	v, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	return sch.Validate(v)
}

var storiesTok = sync.OnceValues(func() (*tokenizer.Tokenizer, error) {
	f, err := embedded.Open()
	if err != nil {
		return nil, err
	}
	return tokenizer.FromGGUF(f)
})

func stories(t testing.TB) *tokenizer.Tokenizer {
	tok, err := storiesTok()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// randomWalk decodes g under random logits: each step draws a logit per
// token (tokens that close something get a random boost now and then, so
// walks also end strings and arrays early), masks them, and takes the
// best. It returns the output once the constraint is done or an
// end-of-generation token wins.
func randomWalk(t testing.TB, g *Grammar, tok *tokenizer.Tokenizer, r *rand.Rand) string {
	t.Helper()
	c := g.NewConstraint(tok)
	closers := make([]bool, tok.VocabSize())
	for id := range closers {
		p := tok.AppendPiece(nil, id, false)
		closers[id] = tok.EOG[id] || strings.ContainsAny(string(p), `"]},`)
	}
	logits := make([]float32, tok.VocabSize())
	for step := 0; step < 20000; step++ {
		boost := float32(0)
		if r.IntN(3) == 0 {
			boost = 2
		}
		for id := range logits {
			logits[id] = r.Float32()
			if closers[id] {
				logits[id] += boost
			}
		}
		c.Mask(logits)
		best := 0
		for id, l := range logits {
			if l > logits[best] {
				best = id
			}
		}
		if math.IsInf(float64(logits[best]), -1) {
			t.Fatalf("dead end after %q", c.Text())
		}
		if tok.EOG[best] {
			return c.Text()
		}
		if c.Accept(best) {
			return c.Text()
		}
	}
	t.Fatalf("no end after 20000 tokens: %q", c.Text())
	return ""
}

// boundsSchemas exercise every keyword the compiler enforces.
var boundsSchemas = []string{
	`{"type":"integer","minimum":1,"maximum":7}`,
	`{"type":"number","exclusiveMinimum":-2.5,"exclusiveMaximum":-2.25}`,
	`{"type":"object","properties":{
		"n":{"type":"integer","minimum":1,"maximum":7},
		"days":{"type":"integer","minimum":1},
		"neg":{"type":"integer","minimum":-1000000,"maximum":-999990},
		"big":{"type":"integer","minimum":100000000000000000000},
		"ratio":{"type":"number","minimum":0,"exclusiveMaximum":1},
		"temp":{"type":"number","minimum":-40.5,"maximum":-39.75},
		"name":{"type":"string","minLength":3,"maxLength":8},
		"code":{"type":"string","pattern":"^[A-Z]{2}-\\d{2,4}$"},
		"tags":{"type":"array","items":{"type":"string","maxLength":4},"minItems":2,"maxItems":3},
		"mode":{"enum":["fast","slow",1,null,{"k":[1,2]},true]},
		"kind":{"const":"call"},
		"opt":{"anyOf":[{"type":"integer","maximum":-5},{"type":"string","pattern":"x$","maxLength":5},{"type":"null"}]}
	},"required":["n","days","neg","big","ratio","temp","name","code","tags","mode","kind"],"additionalProperties":false}`,
	`{"type":"array","items":{"type":"number","minimum":0.001,"maximum":0.002},"minItems":1,"maxItems":4}`,
	`{"type":"string","pattern":"^\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])$"}`,
	`{"type":"string","pattern":"[aeiou]{2}","minLength":4,"maxLength":6}`,
	`{"type":"string","pattern":"^(é|ß|€|日本)+$","maxLength":5}`,
	`{"type":"object","additionalProperties":{"type":"integer","exclusiveMinimum":0,"maximum":3},"minProperties":1,"maxProperties":3}`,
	`{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer","minimum":-3,"maximum":3},"kids":{"type":"array","items":{"$ref":"#/$defs/node"},"maxItems":2}},"required":["v","kids"]}},"$ref":"#/$defs/node"}`,
	`{"type":["string","integer","null"],"minLength":2,"maxLength":3,"minimum":10,"maximum":12}`,
	`{"enum":[[1,2],{"b":1,"a":"x"},"a\"b\\c","tab\there",-0.5,12e3]}`,
	`{"type":"object","properties":{"s":{"type":"string","pattern":"^[^\\s\\d]+\\s?[\\w.-]*$","maxLength":10},"u":{"type":"string","format":"uuid","pattern":"^[0-9a-f]{8}-[0-9a-f]{4}$"}},"required":["s","u"]}`,
}

// For many seeds, random walks of each schema's constraint produce outputs
// that the independent validator accepts.
func TestRandomWalksValidate(t *testing.T) {
	tok := stories(t)
	seeds := 30
	if testing.Short() {
		seeds = 5
	}
	for i, schema := range boundsSchemas {
		g, err := FromSchema([]byte(schema))
		if err != nil {
			t.Fatalf("schema %d: %v", i, err)
		}
		sch := validator(t, schema)
		for seed := range seeds {
			r := rand.New(rand.NewPCG(uint64(seed), uint64(i)))
			out := randomWalk(t, g, tok, r)
			if err := validate(sch, out); err != nil {
				t.Fatalf("schema %d seed %d: %q does not validate: %v", i, seed, out, err)
			}
		}
	}
}

// The same on a 50K byte-level BPE vocabulary, whose tokens span
// structure, escapes and multi-byte characters.
func TestRandomWalksValidateBPE(t *testing.T) {
	tok := gpt2(t)
	for _, i := range []int{2, 6, 10, 11} {
		schema := boundsSchemas[i]
		g, err := FromSchema([]byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		sch := validator(t, schema)
		for seed := range 3 {
			out := randomWalk(t, g, tok, rand.New(rand.NewPCG(uint64(seed), 99)))
			if err := validate(sch, out); err != nil {
				t.Fatalf("schema %d seed %d: %q does not validate: %v", i, seed, out, err)
			}
		}
	}
}
