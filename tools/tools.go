// Package tools holds the tools an agent session may call: bash, read, write,
// edit, list and search. Each tool's arguments are a Go struct whose JSON
// schema comes from invopop/jsonschema, so the schemas (and with them every
// request's prompt prefix) are byte-stable across runs. Tools act only through
// the session's sandbox.
package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	"github.com/invopop/jsonschema"

	"jspark/sandbox"
)

// Env is what a tool call may touch.
type Env struct {
	Box         *sandbox.Sandbox
	Timeout     time.Duration // per shell command
	OutputLimit int           // bytes of output a call returns
}

// Result is what the model sees of a call, plus what the runner counts.
type Result struct {
	Output   string
	ExitCode *int  // shell commands only
	Failed   bool  // the call itself was wrong (bad arguments, no match, …)
	Err      error // the session must stop (the cut)
}

// Tool is one callable tool.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage // the JSON schema of the arguments
	run         func(ctx context.Context, env *Env, args json.RawMessage) Result
}

// Run parses args and runs the tool; argument errors come back as a failed
// result the model can read.
func (t *Tool) Run(ctx context.Context, env *Env, args json.RawMessage) Result {
	return t.run(ctx, env, args)
}

// define builds a Tool from its argument struct A.
func define[A any](name, desc string, run func(ctx context.Context, env *Env, a A) Result) *Tool {
	r := jsonschema.Reflector{DoNotReference: true, ExpandedStruct: true, Anonymous: true}
	s := r.ReflectFromType(reflect.TypeFor[A]())
	s.Version = ""
	raw, err := json.Marshal(s)
	if err != nil {
		panic(err) // the argument structs are ours: a failure is a programming error
	}
	return &Tool{Name: name, Description: desc, Parameters: raw, run: func(ctx context.Context, env *Env, args json.RawMessage) Result {
		var a A
		if len(bytes.TrimSpace(args)) == 0 {
			args = []byte("{}")
		}
		dec := json.NewDecoder(bytes.NewReader(args))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&a); err != nil {
			return failed("invalid arguments for %s: %v", name, err)
		}
		if err := required(s, args); err != nil {
			return failed("invalid arguments for %s: %v", name, err)
		}
		return run(ctx, env, a)
	}}
}

// required checks that the arguments carry every required property.
func required(s *jsonschema.Schema, args json.RawMessage) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(args, &m); err != nil {
		return err
	}
	for _, k := range s.Required {
		if _, ok := m[k]; !ok {
			return fmt.Errorf("missing required property %q", k)
		}
	}
	return nil
}

func failed(format string, args ...any) Result {
	return Result{Output: "error: " + fmt.Sprintf(format, args...), Failed: true}
}

// All lists every tool in its canonical order.
var All = []*Tool{bashTool, readTool, writeTool, editTool, listTool, searchTool}

// Select returns the named tools in the order given.
func Select(names []string) ([]*Tool, error) {
	var out []*Tool
	for _, n := range names {
		t := Lookup(n)
		if t == nil {
			return nil, fmt.Errorf("unknown tool %q", n)
		}
		out = append(out, t)
	}
	return out, nil
}

// Lookup finds a tool by name (nil: none).
func Lookup(name string) *Tool {
	for _, t := range All {
		if t.Name == name {
			return t
		}
	}
	return nil
}
