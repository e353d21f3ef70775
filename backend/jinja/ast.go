package jinja

// Statements.
type (
	node interface{}

	textNode   struct{ s string }
	outputNode struct {
		x    expr
		line int
	}
	ifNode struct {
		conds  []expr
		bodies [][]node
		els    []node
	}
	forNode struct {
		targets []string
		iter    expr
		cond    expr
		body    []node
		els     []node
		line    int
	}
	setNode struct {
		targets []string // one name, or several to unpack
		attr    string   // set ns.attr = …: targets[0] is ns
		x       expr
		body    []node // set name %}…{% endset
		filters []*filterExpr
		line    int
	}
	macroNode struct {
		name     string
		params   []string
		defaults []expr // per param; nil where none
		body     []node
	}
	// callBlock is {% call(params) m(args) %}body{% endcall %}: m is
	// called with a caller() that renders body.
	callBlock struct {
		call   *callExpr
		caller *macroNode
	}
	filterBlock struct {
		filters []*filterExpr
		body    []node
	}
	breakNode    struct{}
	continueNode struct{}
)

// Expressions.
type (
	expr interface{}

	literal  struct{ v Value }
	nameExpr struct {
		name string
		line int
	}
	attrExpr struct {
		x    expr
		name string
		line int
	}
	indexExpr struct {
		x, i expr
		line int
	}
	sliceExpr struct {
		x, lo, hi, step expr
		line            int
	}
	callExpr struct {
		fn     expr
		args   []expr
		kwargs []kwarg
		line   int
	}
	kwarg struct {
		name string
		x    expr
	}
	filterExpr struct {
		x      expr // nil inside a filter block or set block
		name   string
		args   []expr
		kwargs []kwarg
		line   int
	}
	testExpr struct {
		x      expr
		name   string
		args   []expr
		negate bool
		line   int
	}
	unaryExpr struct {
		op   string
		x    expr
		line int
	}
	binaryExpr struct {
		op   string
		l, r expr
		line int
	}
	condExpr struct {
		cond, a, b expr // b nil: undefined
	}
	listExpr  struct{ items []expr }
	tupleExpr struct{ items []expr }
	dictExpr  struct{ keys, vals []expr }
)
