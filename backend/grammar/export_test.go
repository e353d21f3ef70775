package grammar

// For the external tests (format_test.go), which parse what the grammar
// writes with package chat, which imports this package.
var (
	RandomWalk = randomWalk
	Stories    = stories
	GPT2       = gpt2
	Validator  = validator
	Validate   = validate
)
