package jinja

import (
	"slices"
	"strconv"
)

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

type parser struct {
	toks []token
	pos  int
}

func parse(toks []token) ([]node, error) {
	p := &parser{toks: toks}
	body, end, err := p.block()
	if err != nil {
		return nil, err
	}
	if end != "" {
		return nil, errorf(p.cur().line, "unexpected {%% %s %%}", end)
	}
	return body, nil
}

func (p *parser) cur() token { return p.toks[p.pos] }
func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tEOF {
		p.pos++
	}
	return t
}

func (p *parser) isOp(v string) bool {
	t := p.cur()
	return t.kind == tOp && t.val == v
}

func (p *parser) isName(v string) bool {
	t := p.cur()
	return t.kind == tName && t.val == v
}

func (p *parser) expectOp(v string) error {
	if !p.isOp(v) {
		return errorf(p.cur().line, "expected '%s', found %s", v, p.cur())
	}
	p.pos++
	return nil
}

func (p *parser) expectName() (string, error) {
	t := p.cur()
	if t.kind != tName {
		return "", errorf(t.line, "expected a name, found %s", t)
	}
	p.pos++
	return t.val, nil
}

func (p *parser) expectBlockEnd() error {
	if p.cur().kind != tBlockEnd {
		return errorf(p.cur().line, "expected '%%}', found %s", p.cur())
	}
	p.pos++
	return nil
}

// peek is the token after the current one (EOF at the end).
func (p *parser) peek() token {
	if p.pos+1 < len(p.toks) {
		return p.toks[p.pos+1]
	}
	return p.toks[len(p.toks)-1]
}

// block parses nodes until an end-like tag ({% endX %}, else, elif) or
// EOF; it returns the tag's keyword, consumed up to its first token.
func (p *parser) block() ([]node, string, error) {
	var out []node
	for {
		t := p.cur()
		switch t.kind {
		case tEOF:
			return out, "", nil
		case tText:
			p.pos++
			out = append(out, &textNode{t.val})
		case tVarBegin:
			p.pos++
			x, err := p.tuple(true)
			if err != nil {
				return nil, "", err
			}
			if p.cur().kind != tVarEnd {
				return nil, "", errorf(p.cur().line, "expected '}}', found %s", p.cur())
			}
			p.pos++
			out = append(out, &outputNode{x: x, line: t.line})
		case tBlockBegin:
			p.pos++
			kw := p.cur()
			if kw.kind != tName {
				return nil, "", errorf(kw.line, "expected a statement, found %s", kw)
			}
			switch kw.val {
			case "endif", "endfor", "endset", "endmacro", "endfilter", "endgeneration", "else", "elif":
				p.pos++
				return out, kw.val, nil
			}
			n, err := p.statement()
			if err != nil {
				return nil, "", err
			}
			out = append(out, n)
		default:
			return nil, "", errorf(t.line, "unexpected %s", t)
		}
	}
}

// body parses a block that must end with one of ends.
func (p *parser) body(ends ...string) ([]node, string, error) {
	line := p.cur().line
	b, end, err := p.block()
	if err != nil {
		return nil, "", err
	}
	if !slices.Contains(ends, end) {
		if end == "" {
			return nil, "", errorf(line, "block is not closed: expected {%% %s %%}", ends[len(ends)-1])
		}
		return nil, "", errorf(p.toks[p.pos-1].line, "unexpected {%% %s %%}, expected {%% %s %%}", end, ends[len(ends)-1])
	}
	return b, end, nil
}

func (p *parser) statement() (node, error) {
	kw := p.next()
	switch kw.val {
	case "if":
		return p.ifStmt()
	case "for":
		return p.forStmt(kw.line)
	case "set":
		return p.setStmt(kw.line)
	case "macro":
		return p.macroStmt()
	case "filter":
		f, err := p.filterChain(nil)
		if err != nil {
			return nil, err
		}
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		b, _, err := p.body("endfilter")
		if err != nil {
			return nil, err
		}
		return &filterBlock{filters: f, body: b}, p.expectBlockEnd()
	case "generation":
		// Hugging Face's assistant-mask marker: renders its body.
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		b, _, err := p.body("endgeneration")
		if err != nil {
			return nil, err
		}
		return &filterBlock{body: b}, p.expectBlockEnd()
	case "break":
		return &breakNode{}, p.expectBlockEnd()
	case "continue":
		return &continueNode{}, p.expectBlockEnd()
	}
	return nil, errorf(kw.line, "unsupported statement {%% %s %%}", kw.val)
}

func (p *parser) ifStmt() (node, error) {
	n := &ifNode{}
	for {
		c, err := p.expression(true)
		if err != nil {
			return nil, err
		}
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		b, end, err := p.body("elif", "else", "endif")
		if err != nil {
			return nil, err
		}
		n.conds, n.bodies = append(n.conds, c), append(n.bodies, b)
		switch end {
		case "elif":
			continue
		case "else":
			if err := p.expectBlockEnd(); err != nil {
				return nil, err
			}
			if n.els, _, err = p.body("endif"); err != nil {
				return nil, err
			}
		}
		return n, p.expectBlockEnd()
	}
}

func (p *parser) forStmt(line int) (node, error) {
	n := &forNode{line: line}
	paren := p.isOp("(")
	if paren {
		p.pos++
	}
	for {
		name, err := p.expectName()
		if err != nil {
			return nil, err
		}
		n.targets = append(n.targets, name)
		if !p.isOp(",") {
			break
		}
		p.pos++
	}
	if paren {
		if err := p.expectOp(")"); err != nil {
			return nil, err
		}
	}
	if !p.isName("in") {
		return nil, errorf(p.cur().line, "expected 'in' in for loop, found %s", p.cur())
	}
	p.pos++
	var err error
	if n.iter, err = p.tuple(false); err != nil {
		return nil, err
	}
	if p.isName("if") {
		p.pos++
		if n.cond, err = p.expression(true); err != nil {
			return nil, err
		}
	}
	if p.isName("recursive") {
		return nil, errorf(p.cur().line, "recursive loops are not supported")
	}
	if err := p.expectBlockEnd(); err != nil {
		return nil, err
	}
	b, end, err := p.body("else", "endfor")
	if err != nil {
		return nil, err
	}
	n.body = b
	if end == "else" {
		if err := p.expectBlockEnd(); err != nil {
			return nil, err
		}
		if n.els, _, err = p.body("endfor"); err != nil {
			return nil, err
		}
	}
	return n, p.expectBlockEnd()
}

func (p *parser) setStmt(line int) (node, error) {
	n := &setNode{line: line}
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	n.targets = []string{name}
	switch {
	case p.isOp("."):
		p.pos++
		if n.attr, err = p.expectName(); err != nil {
			return nil, err
		}
	case p.isOp(","):
		for p.isOp(",") {
			p.pos++
			name, err := p.expectName()
			if err != nil {
				return nil, err
			}
			n.targets = append(n.targets, name)
		}
	}
	if p.isOp("=") {
		p.pos++
		if n.x, err = p.tuple(true); err != nil {
			return nil, err
		}
		return n, p.expectBlockEnd()
	}
	if n.attr != "" || len(n.targets) > 1 {
		return nil, errorf(p.cur().line, "expected '=' in set, found %s", p.cur())
	}
	if p.isOp("|") {
		if n.filters, err = p.filterChain(nil); err != nil {
			return nil, err
		}
	}
	if err := p.expectBlockEnd(); err != nil {
		return nil, err
	}
	if n.body, _, err = p.body("endset"); err != nil {
		return nil, err
	}
	return n, p.expectBlockEnd()
}

func (p *parser) macroStmt() (node, error) {
	n := &macroNode{}
	var err error
	if n.name, err = p.expectName(); err != nil {
		return nil, err
	}
	if err := p.expectOp("("); err != nil {
		return nil, err
	}
	for !p.isOp(")") {
		name, err := p.expectName()
		if err != nil {
			return nil, err
		}
		var def expr
		if p.isOp("=") {
			p.pos++
			if def, err = p.expression(true); err != nil {
				return nil, err
			}
		}
		n.params, n.defaults = append(n.params, name), append(n.defaults, def)
		if !p.isOp(",") {
			break
		}
		p.pos++
	}
	if err := p.expectOp(")"); err != nil {
		return nil, err
	}
	if err := p.expectBlockEnd(); err != nil {
		return nil, err
	}
	if n.body, _, err = p.body("endmacro"); err != nil {
		return nil, err
	}
	if p.cur().kind == tName && p.cur().val == n.name {
		p.pos++
	}
	return n, p.expectBlockEnd()
}

// filterChain parses "|f(args)|g" (the leading '|' optional when x is nil
// in a filter block).
func (p *parser) filterChain(x expr) ([]*filterExpr, error) {
	var out []*filterExpr
	first := true
	for {
		if p.isOp("|") {
			p.pos++
		} else if !first || x != nil {
			return out, nil
		}
		first = false
		f, err := p.filter(nil)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
		if !p.isOp("|") {
			return out, nil
		}
	}
}

func (p *parser) filter(x expr) (*filterExpr, error) {
	line := p.cur().line
	name, err := p.expectName()
	if err != nil {
		return nil, err
	}
	f := &filterExpr{x: x, name: name, line: line}
	if p.isOp("(") {
		if f.args, f.kwargs, err = p.callArgs(); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// tuple parses an expression or a bare tuple "a, b".
func (p *parser) tuple(cond bool) (expr, error) {
	x, err := p.expression(cond)
	if err != nil || !p.isOp(",") {
		return x, err
	}
	items := []expr{x}
	for p.isOp(",") {
		p.pos++
		if t := p.cur(); t.kind == tBlockEnd || t.kind == tVarEnd || p.isOp(")") {
			break
		}
		y, err := p.expression(cond)
		if err != nil {
			return nil, err
		}
		items = append(items, y)
	}
	return &tupleExpr{items}, nil
}

// expression parses a full expression; cond allows "a if c else b".
func (p *parser) expression(cond bool) (expr, error) {
	x, err := p.or()
	if err != nil || !cond {
		return x, err
	}
	for p.isName("if") {
		p.pos++
		c, err := p.or()
		if err != nil {
			return nil, err
		}
		ce := &condExpr{cond: c, a: x}
		if p.isName("else") {
			p.pos++
			if ce.b, err = p.expression(true); err != nil {
				return nil, err
			}
		}
		x = ce
	}
	return x, nil
}

func (p *parser) binary(ops []string, names bool, sub func() (expr, error)) (expr, error) {
	x, err := sub()
	if err != nil {
		return nil, err
	}
	for {
		t := p.cur()
		if !(names && t.kind == tName || !names && t.kind == tOp) || !slices.Contains(ops, t.val) {
			return x, nil
		}
		p.pos++
		y, err := sub()
		if err != nil {
			return nil, err
		}
		x = &binaryExpr{op: t.val, l: x, r: y, line: t.line}
	}
}

func (p *parser) or() (expr, error) {
	return p.binary([]string{"or"}, true, p.and)
}

func (p *parser) and() (expr, error) {
	return p.binary([]string{"and"}, true, p.not)
}

func (p *parser) not() (expr, error) {
	if p.isName("not") {
		line := p.next().line
		x, err := p.not()
		if err != nil {
			return nil, err
		}
		return &unaryExpr{op: "not", x: x, line: line}, nil
	}
	return p.compare()
}

func (p *parser) compare() (expr, error) {
	x, err := p.math1()
	if err != nil {
		return nil, err
	}
	for {
		t := p.cur()
		op := ""
		switch {
		case t.kind == tOp && slices.Contains([]string{"==", "!=", "<", ">", "<=", ">="}, t.val):
			op = t.val
			p.pos++
		case t.kind == tName && t.val == "in":
			op = "in"
			p.pos++
		case t.kind == tName && t.val == "not" && p.peek().kind == tName && p.peek().val == "in":
			op = "not in"
			p.pos += 2
		default:
			return x, nil
		}
		y, err := p.math1()
		if err != nil {
			return nil, err
		}
		x = &binaryExpr{op: op, l: x, r: y, line: t.line}
	}
}

func (p *parser) math1() (expr, error) { return p.binary([]string{"+", "-"}, false, p.concat) }
func (p *parser) concat() (expr, error) {
	return p.binary([]string{"~"}, false, p.math2)
}
func (p *parser) math2() (expr, error) {
	return p.binary([]string{"*", "/", "//", "%"}, false, p.pow)
}
func (p *parser) pow() (expr, error) { return p.binary([]string{"**"}, false, p.unaryFiltered) }

func (p *parser) unaryFiltered() (expr, error) { return p.unary(true) }

func (p *parser) unary(filters bool) (expr, error) {
	var x expr
	if p.isOp("-") || p.isOp("+") {
		t := p.next()
		y, err := p.unary(false)
		if err != nil {
			return nil, err
		}
		x = &unaryExpr{op: t.val, x: y, line: t.line}
	} else {
		var err error
		if x, err = p.primary(); err != nil {
			return nil, err
		}
		if x, err = p.postfix(x); err != nil {
			return nil, err
		}
	}
	if filters {
		return p.filtersAndTests(x)
	}
	return x, nil
}

func (p *parser) filtersAndTests(x expr) (expr, error) {
	for {
		switch {
		case p.isOp("|"):
			p.pos++
			f, err := p.filter(x)
			if err != nil {
				return nil, err
			}
			x = f
		case p.isName("is"):
			line := p.next().line
			t := &testExpr{x: x, line: line}
			if p.isName("not") {
				p.pos++
				t.negate = true
			}
			name, err := p.expectName()
			if err != nil {
				return nil, err
			}
			// "is none" etc. come as names; true/false/none are test names too.
			t.name = name
			c := p.cur()
			switch {
			case p.isOp("("):
				if t.args, _, err = p.callArgs(); err != nil {
					return nil, err
				}
			case (c.kind == tName && !slices.Contains([]string{"else", "or", "and", "if", "is", "in", "not"}, c.val)) ||
				c.kind == tString || c.kind == tInt || c.kind == tFloat || p.isOp("[") || p.isOp("{"):
				a, err := p.primary()
				if err != nil {
					return nil, err
				}
				if a, err = p.postfix(a); err != nil {
					return nil, err
				}
				t.args = []expr{a}
			}
			x = t
		default:
			return x, nil
		}
	}
}

func (p *parser) postfix(x expr) (expr, error) {
	for {
		t := p.cur()
		switch {
		case p.isOp("."):
			p.pos++
			n := p.cur()
			switch n.kind {
			case tName:
				p.pos++
				x = &attrExpr{x: x, name: n.val, line: n.line}
			case tInt:
				p.pos++
				i, _ := strconv.ParseInt(n.val, 10, 64)
				x = &indexExpr{x: x, i: &literal{i}, line: n.line}
			default:
				return nil, errorf(n.line, "expected an attribute name after '.', found %s", n)
			}
		case p.isOp("["):
			p.pos++
			var parts [3]expr
			k, slice := 0, false
			for {
				if p.isOp(":") {
					p.pos++
					slice = true
					k++
					if k > 2 {
						return nil, errorf(t.line, "too many ':' in slice")
					}
					continue
				}
				if p.isOp("]") {
					break
				}
				if parts[k] != nil {
					return nil, errorf(p.cur().line, "expected ']', found %s", p.cur())
				}
				e, err := p.tuple(true)
				if err != nil {
					return nil, err
				}
				parts[k] = e
			}
			p.pos++
			if slice {
				x = &sliceExpr{x: x, lo: parts[0], hi: parts[1], step: parts[2], line: t.line}
			} else {
				if parts[0] == nil {
					return nil, errorf(t.line, "empty subscript")
				}
				x = &indexExpr{x: x, i: parts[0], line: t.line}
			}
		case p.isOp("("):
			args, kwargs, err := p.callArgs()
			if err != nil {
				return nil, err
			}
			x = &callExpr{fn: x, args: args, kwargs: kwargs, line: t.line}
		default:
			return x, nil
		}
	}
}

func (p *parser) callArgs() ([]expr, []kwarg, error) {
	if err := p.expectOp("("); err != nil {
		return nil, nil, err
	}
	var args []expr
	var kwargs []kwarg
	for !p.isOp(")") {
		if p.cur().kind == tName && p.peek().kind == tOp && p.peek().val == "=" {
			name := p.next().val
			p.pos++
			x, err := p.expression(true)
			if err != nil {
				return nil, nil, err
			}
			kwargs = append(kwargs, kwarg{name, x})
		} else {
			if len(kwargs) > 0 {
				return nil, nil, errorf(p.cur().line, "positional argument after keyword argument")
			}
			x, err := p.expression(true)
			if err != nil {
				return nil, nil, err
			}
			args = append(args, x)
		}
		if !p.isOp(",") {
			break
		}
		p.pos++
	}
	return args, kwargs, p.expectOp(")")
}

func (p *parser) primary() (expr, error) {
	t := p.next()
	switch t.kind {
	case tName:
		switch t.val {
		case "true", "True":
			return &literal{true}, nil
		case "false", "False":
			return &literal{false}, nil
		case "none", "None":
			return &literal{nil}, nil
		}
		return &nameExpr{name: t.val, line: t.line}, nil
	case tString:
		s := t.val
		for p.cur().kind == tString {
			s += p.next().val
		}
		return &literal{s}, nil
	case tInt:
		i, err := strconv.ParseInt(t.val, 10, 64)
		if err != nil {
			return nil, errorf(t.line, "integer %s is out of range", t.val)
		}
		return &literal{i}, nil
	case tFloat:
		f, err := strconv.ParseFloat(t.val, 64)
		if err != nil {
			return nil, errorf(t.line, "bad number %s", t.val)
		}
		return &literal{f}, nil
	case tOp:
		switch t.val {
		case "(":
			if p.isOp(")") {
				p.pos++
				return &tupleExpr{}, nil
			}
			x, err := p.tuple(true)
			if err != nil {
				return nil, err
			}
			return x, p.expectOp(")")
		case "[":
			l := &listExpr{}
			for !p.isOp("]") {
				x, err := p.expression(true)
				if err != nil {
					return nil, err
				}
				l.items = append(l.items, x)
				if !p.isOp(",") {
					break
				}
				p.pos++
			}
			return l, p.expectOp("]")
		case "{":
			d := &dictExpr{}
			for !p.isOp("}") {
				k, err := p.expression(true)
				if err != nil {
					return nil, err
				}
				if err := p.expectOp(":"); err != nil {
					return nil, err
				}
				v, err := p.expression(true)
				if err != nil {
					return nil, err
				}
				d.keys, d.vals = append(d.keys, k), append(d.vals, v)
				if !p.isOp(",") {
					break
				}
				p.pos++
			}
			return d, p.expectOp("}")
		}
	}
	return nil, errorf(t.line, "unexpected %s", t)
}
