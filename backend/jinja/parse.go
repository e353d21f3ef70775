package jinja

import "slices"

type parser struct {
	toks []token
	pos  int
	nest int // statements, sub-expressions and chain links open (enter)
}

// enter notes one more level the evaluator will recurse through: a
// statement inside another, a sub-expression, a link of a chain (a+b+c,
// x|f|g, a.b.c, not not x) that nests the tree one deeper. Bounding it
// here bounds every recursion over the tree: a million '(' fails to
// compile instead of overflowing the stack. The caller undoes it with
// leave.
func (p *parser) enter() error {
	p.nest++
	if p.nest > maxNest {
		return errorf(p.cur().line, "the template nests over %d deep", maxNest)
	}
	return nil
}

func (p *parser) leave(n int) { p.nest -= n }

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
			case "endif", "endfor", "endset", "endmacro", "endcall", "endfilter", "endgeneration", "else", "elif":
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
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave(1)
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
	case "call":
		return p.callStmt()
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
	if err := p.params(n); err != nil {
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

// callStmt parses {% call(params) m(args) %}…{% endcall %}.
func (p *parser) callStmt() (node, error) {
	line := p.cur().line
	caller := &macroNode{name: "caller"}
	if p.isOp("(") {
		if err := p.params(caller); err != nil {
			return nil, err
		}
	}
	x, err := p.expression(false)
	if err != nil {
		return nil, err
	}
	call, ok := x.(*callExpr)
	if !ok {
		return nil, errorf(line, "{%% call %%} needs a macro call")
	}
	if err := p.expectBlockEnd(); err != nil {
		return nil, err
	}
	if caller.body, _, err = p.body("endcall"); err != nil {
		return nil, err
	}
	return &callBlock{call: call, caller: caller}, p.expectBlockEnd()
}

// params parses a macro's "(a, b=default)" into n.
func (p *parser) params(n *macroNode) error {
	if err := p.expectOp("("); err != nil {
		return err
	}
	for !p.isOp(")") {
		name, err := p.expectName()
		if err != nil {
			return err
		}
		var def expr
		if p.isOp("=") {
			p.pos++
			if def, err = p.expression(true); err != nil {
				return err
			}
		}
		n.params, n.defaults = append(n.params, name), append(n.defaults, def)
		if !p.isOp(",") {
			break
		}
		p.pos++
	}
	return p.expectOp(")")
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
