package jinja

import (
	"slices"
	"strconv"
)

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
	if err := p.enter(); err != nil {
		return nil, err
	}
	links := 1
	defer func() { p.leave(links) }()
	x, err := p.or()
	if err != nil || !cond {
		return x, err
	}
	for p.isName("if") {
		if err := p.enter(); err != nil {
			return nil, err
		}
		links++
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
	links := 0
	defer func() { p.leave(links) }()
	for {
		t := p.cur()
		if !(names && t.kind == tName || !names && t.kind == tOp) || !slices.Contains(ops, t.val) {
			return x, nil
		}
		if err := p.enter(); err != nil {
			return nil, err
		}
		links++
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
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave(1)
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
	links := 0
	defer func() { p.leave(links) }()
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
		if err := p.enter(); err != nil {
			return nil, err
		}
		links++
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
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave(1)
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
	links := 0
	defer func() { p.leave(links) }()
	for {
		if p.isOp("|") || p.isName("is") {
			if err := p.enter(); err != nil {
				return nil, err
			}
			links++
		}
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
	links := 0
	defer func() { p.leave(links) }()
	for {
		t := p.cur()
		if p.isOp(".") || p.isOp("[") || p.isOp("(") {
			if err := p.enter(); err != nil {
				return nil, err
			}
			links++
		}
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
