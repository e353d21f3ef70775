package grammar

import (
	"errors"
	"fmt"
	"time"
)

// Limits bound what compiling one schema (or one request's tools) may
// cost. The compiled grammar is linear in the schema's size, and these
// turn a hostile size into an error before it costs the server anything.
type Limits struct {
	Nodes         int           // schema objects and object members compiled
	LiteralBytes  int           // bytes of enum and const values
	PatternStates int           // automaton states of all patterns together
	LengthCells   int           // pattern states × maxLength, for the length tables
	Time          time.Duration // wall time of the compile
}

// DefaultLimits admits an enum of half a million short values and
// patterns of thousands of states, compiled in well under the time limit.
func DefaultLimits() Limits {
	return Limits{Nodes: 1 << 18, LiteralBytes: 8 << 20, PatternStates: 1 << 14, LengthCells: 1 << 24, Time: 2 * time.Second}
}

// ErrBudget is what every *BudgetError wraps: the schema is refused for
// its size or compile time, not for what it says (errors.Is(err,
// grammar.ErrBudget); the server answers 400).
var ErrBudget = errors.New("grammar: schema exceeds the compile budget")

// BudgetError says which limit a schema passed, and where compiling it was.
type BudgetError struct {
	Path  string // JSON pointer of the schema being compiled, "#" the root
	What  string // "nodes", "enum and const bytes", "pattern states", "pattern length cells", "compile time"
	Limit int64
}

func (e *BudgetError) Error() string {
	if e.What == "compile time" {
		return fmt.Sprintf("schema %s: too large to compile: more than %v of compile time", e.Path, time.Duration(e.Limit))
	}
	return fmt.Sprintf("schema %s: too large to compile: more than %d %s", e.Path, e.Limit, e.What)
}

func (e *BudgetError) Unwrap() error { return ErrBudget }

// SchemaError is a schema the compiler refuses: a keyword it does not
// support, or one whose value it cannot use. Path is the JSON pointer of
// the schema object holding Keyword ("#" is the root).
type SchemaError struct {
	Path    string
	Keyword string
	Msg     string
}

func (e *SchemaError) Error() string {
	if e.Keyword == "" {
		return fmt.Sprintf("schema %s: %s", e.Path, e.Msg)
	}
	return fmt.Sprintf("schema %s/%s: %s", e.Path, e.Keyword, e.Msg)
}

// Internal limits hit below the compiler, which adds the path.
var (
	errPatternStates = errors.New("pattern states")
	errLengthCells   = errors.New("pattern length cells")
)

// budget counts one compile against its limits.
type budget struct {
	lim                          Limits
	nNodes, nLiteral, nDFAStates int
	calls                        int
	deadline                     time.Time
}

func newBudget(lim Limits) *budget {
	return &budget{lim: lim, deadline: time.Now().Add(lim.Time)}
}

// node charges n nodes, and checks the clock.
func (b *budget) node(path string, n int) error {
	b.nNodes += n
	if b.nNodes > b.lim.Nodes {
		return &BudgetError{Path: path, What: "nodes", Limit: int64(b.lim.Nodes)}
	}
	return b.tick(path)
}

// tick checks the clock now and then.
func (b *budget) tick(path string) error {
	b.calls++
	if b.calls%256 == 0 && time.Now().After(b.deadline) {
		return &BudgetError{Path: path, What: "compile time", Limit: int64(b.lim.Time)}
	}
	return nil
}

func (b *budget) literal(path string, n int) error {
	b.nLiteral += n
	if b.nLiteral > b.lim.LiteralBytes {
		return &BudgetError{Path: path, What: "enum and const bytes", Limit: int64(b.lim.LiteralBytes)}
	}
	return b.tick(path)
}

// patternLimit is how many states the next pattern may build.
func (b *budget) patternLimit() int { return max(0, b.lim.PatternStates-b.nDFAStates) }

// wrap turns a pattern's internal limit error into a *BudgetError at path.
func (b *budget) wrap(path string, err error) error {
	switch {
	case errors.Is(err, errPatternStates):
		return &BudgetError{Path: path, What: "pattern states", Limit: int64(b.lim.PatternStates)}
	case errors.Is(err, errLengthCells):
		return &BudgetError{Path: path, What: "pattern length cells", Limit: int64(b.lim.LengthCells)}
	}
	return err
}
