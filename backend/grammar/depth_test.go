package grammar

import (
	"errors"
	"strings"
	"testing"
)

// TestDeepConstIsRefusedBeforeDecoding: a schema whose JSON nests past
// maxJSONDepth (a const of 200 nested arrays, or five million '[') is a
// SchemaError before anything decodes or walks it; one at the bound
// compiles.
func TestDeepConstIsRefusedBeforeDecoding(t *testing.T) {
	nested := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, c := range []struct {
		name, schema string
		ok           bool
	}{
		{"const 200 deep", `{"const":` + nested(200) + `}`, false},
		{"5M open", `{"const":` + strings.Repeat("[", 5_000_000) + `}`, false},
		{"strings do not count", `{"const":"` + strings.Repeat("[", 1000) + `"}`, true},
		{"at the bound", `{"const":` + nested(maxJSONDepth-1) + `}`, true},
	} {
		_, err := FromSchema([]byte(c.schema))
		var se *SchemaError
		switch {
		case c.ok && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case !c.ok && (!errors.As(err, &se) || !strings.Contains(err.Error(), "JSON nested more than 128 deep")):
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
