package server

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"jspark/backend/chat"
)

// MaxDepth bounds how deeply a request's JSON may nest: the body's own
// structure, and the JSON a string field carries (tool-call arguments),
// each counted from its own root. Every later walk over a client value
// (the chat template's values, a tool schema's rendering, the grammar
// compiler, re-encoding) then meets nothing deeper.
//
// NOTE: 128 is far past any real request (an agent's tool schemas nest
// about ten deep) and far below what would cost: encoding/json alone
// allows 10,000, and the template engine 512.
const MaxDepth = 128

// bodyKey is where readBody leaves the request's bytes for decode.
const bodyKey = "jspark.body"

// decode reads a request body into v, the one decoder of every endpoint: a
// JSON object, nothing after it but white space, nested at most MaxDepth
// deep (else a 400 naming the field where it goes past), with a type
// error naming its field.
func decode(c echo.Context, v any) error {
	b, ok := c.Get(bodyKey).([]byte)
	if !ok {
		var err error
		if b, err = io.ReadAll(c.Request().Body); err != nil {
			return badRequest("", "reading the request body: %v", err)
		}
	}
	if at, path := tooDeep(b, MaxDepth); at >= 0 {
		return nestedError(path, at)
	}
	if t := bytes.TrimLeft(b, " \t\r\n"); len(t) == 0 || t[0] != '{' {
		return badRequest("", "the body must be a JSON object, not %s", kindOf(t))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if i := strings.LastIndex(field, "Sampling."); i >= 0 { // an embedded struct's prefix
				field = field[i+len("Sampling."):]
			}
			if field == "" {
				return badRequest("", "the body must be a JSON %s, not a JSON %s", jsonKind(te.Type), te.Value)
			}
			return badRequest(field, "field %q must be a JSON %s, not a JSON %s", field, jsonKind(te.Type), te.Value)
		}
		return badRequest("", "malformed JSON body: %v", err)
	}
	if rest := bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return badRequest("", "unexpected data after the JSON body, at byte %d", len(b)-len(rest))
	}
	return nil
}

// nestedError is the 400 for JSON nested past MaxDepth inside param.
func nestedError(param string, at int) *APIError {
	return badRequest(param, "%s is nested more than %d deep (at byte %d)", cmp.Or(param, "the body"), MaxDepth, at)
}

// checkNested is nestedError for a string field that holds JSON (tool-call
// arguments): nil when text is no deeper than MaxDepth, JSON or not.
func checkNested(param, text string) error {
	if at, _ := tooDeep([]byte(text), MaxDepth); at >= 0 {
		return nestedError(param, at)
	}
	return nil
}

// tooDeep finds where b's brackets, outside strings, first nest past max:
// the byte offset and the path of the field it lies in ("tools[0].function.
// parameters"), or -1. It reads any bytes, JSON or not, in one pass without
// allocating; only a body that is too deep is read again for the path.
func tooDeep(b []byte, max int) (at int, path string) {
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '[' || c == '{':
			if depth++; depth > max {
				return i, pathTo(b, i)
			}
		case c == ']' || c == '}':
			depth--
		}
	}
	return -1, ""
}

// maxPathParts is how much of a path a parameter names: enough for the
// field a client wrote (tools[0].function.parameters.properties.a),
// not the hundred indices of the nesting itself.
const maxPathParts = 6

// pathTo is the path of the field being read at byte end of b, as far as
// b's keys and commas tell it: at most maxPathParts parts, without the
// array indices that end it (the nesting, not the field).
func pathTo(b []byte, end int) string {
	type frame struct {
		object bool
		key    string
		index  int
	}
	var stack []frame
	wantKey := false
	for i := 0; i < end; i++ {
		switch b[i] {
		case '"':
			j := i + 1
			for j < end && b[j] != '"' {
				if b[j] == '\\' {
					j++
				}
				j++
			}
			if n := len(stack); n > 0 && stack[n-1].object && wantKey {
				key := string(b[i+1 : min(j, end)])
				if k, err := strconv.Unquote(`"` + key + `"`); err == nil {
					key = k
				}
				stack[n-1].key, wantKey = key, false
			}
			i = j
		case '{':
			stack = append(stack, frame{object: true})
			wantKey = true
		case '[':
			stack = append(stack, frame{})
		case ',':
			if n := len(stack); n > 0 {
				if stack[n-1].object {
					wantKey = true
				} else {
					stack[n-1].index++
				}
			}
		case '}', ']':
			if n := len(stack); n > 0 {
				stack = stack[:n-1]
			}
		}
	}
	stack = stack[:min(len(stack), maxPathParts)]
	for len(stack) > 0 && !stack[len(stack)-1].object {
		stack = stack[:len(stack)-1]
	}
	var sb strings.Builder
	for i, f := range stack {
		switch {
		case !f.object:
			fmt.Fprintf(&sb, "[%d]", f.index)
		case i > 0:
			sb.WriteString("." + f.key)
		default:
			sb.WriteString(f.key)
		}
	}
	return sb.String()
}

// kindOf names what JSON b starts with, as a client would say it.
func kindOf(b []byte) string {
	switch {
	case len(b) == 0:
		return "an empty body"
	case b[0] == '[':
		return "a JSON array"
	case b[0] == '"':
		return "a JSON string"
	case b[0] == 'n':
		return "JSON null"
	case b[0] == 't' || b[0] == 'f':
		return "a JSON boolean"
	case b[0] == '-' || b[0] >= '0' && b[0] <= '9':
		return "a JSON number"
	}
	return "JSON"
}

// jsonKind names what JSON a Go type decodes from, as a client would say it.
func jsonKind(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "array"
	case reflect.Struct, reflect.Map:
		return "object"
	}
	return "value of another type"
}

// checkArguments bounds the JSON that messages' tool-call arguments carry
// as text: templates and the built-ins decode it to render the call.
func checkArguments(msgs []chat.Message) error {
	for i, m := range msgs {
		for j, c := range m.ToolCalls {
			if err := checkNested(fmt.Sprintf("messages[%d].tool_calls[%d].function.arguments", i, j), c.Function.Arguments); err != nil {
				return err
			}
		}
	}
	return nil
}
