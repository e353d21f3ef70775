// Package atif exports a `jspark work` session as an ATIF trajectory
// (Harbor's Agent Trajectory Interchange Format, v1.4: the RFC
// docs/rfcs/0001-trajectory-format.md in laude-institute/harbor), beside
// its trajectory.jsonl, so that Harbor's tools and viewer read it.
//
// A session becomes: its system prompt and task (system and user steps),
// then one agent step per request (the reply's text, reasoning and tool
// calls, the tools' results as its observation, the request's prompt,
// completion and cached tokens as its metrics, its timings in the metrics'
// extra), and each nudge as a user step. Texts are the trajectory's, so
// clipped as it clips them (record.Clip); the notes say so.
//
// schema.json is the format as a JSON schema, written here from the RFC's
// field list (the RFC has none); Validate checks a file against it and
// the rules a schema cannot state. Write validates what it writes.
package atif

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// File is the ATIF trajectory's name in a session's folder: Harbor's
// agents write theirs as trajectory.json, and its tools (and others that
// read ATIF) look for that name.
const File = "trajectory.json"

// Version is the ATIF version written.
const Version = "ATIF-v1.4"

// Trajectory is the root object.
type Trajectory struct {
	SchemaVersion string         `json:"schema_version"`
	SessionID     string         `json:"session_id"`
	Agent         Agent          `json:"agent"`
	Steps         []Step         `json:"steps"`
	Notes         string         `json:"notes,omitempty"`
	FinalMetrics  *FinalMetrics  `json:"final_metrics,omitempty"`
	Extra         map[string]any `json:"extra,omitempty"`
}

// Agent is the system that produced the trajectory.
type Agent struct {
	Name      string         `json:"name"`
	Version   string         `json:"version"`
	ModelName string         `json:"model_name,omitempty"`
	Extra     map[string]any `json:"extra,omitempty"`
}

// Step is a system prompt, a user message or one agent turn; only an agent
// step has a model, reasoning, tool calls and metrics.
type Step struct {
	StepID           int            `json:"step_id"` // 1, 2, … in order
	Timestamp        string         `json:"timestamp,omitempty"`
	Source           string         `json:"source"` // system, user or agent
	ModelName        string         `json:"model_name,omitempty"`
	Message          string         `json:"message"`
	ReasoningContent string         `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall     `json:"tool_calls,omitempty"`
	Observation      *Observation   `json:"observation,omitempty"`
	Metrics          *Metrics       `json:"metrics,omitempty"`
	Extra            map[string]any `json:"extra,omitempty"`
}

// ToolCall is one call of an agent step; Arguments is a JSON object.
type ToolCall struct {
	ToolCallID   string          `json:"tool_call_id"`
	FunctionName string          `json:"function_name"`
	Arguments    json.RawMessage `json:"arguments"`
}

// Observation is what the environment answered to a step's calls.
type Observation struct {
	Results []Result `json:"results"`
}

// Result is one call's output; SourceCallID names a call of its step.
type Result struct {
	SourceCallID string `json:"source_call_id,omitempty"`
	Content      string `json:"content"`
}

// Metrics are one request's counts; nil where the request got no usage
// (it failed or was cut). PromptTokens includes CachedTokens.
type Metrics struct {
	PromptTokens     *int           `json:"prompt_tokens,omitempty"`
	CompletionTokens *int           `json:"completion_tokens,omitempty"`
	CachedTokens     *int           `json:"cached_tokens,omitempty"`
	Extra            map[string]any `json:"extra,omitempty"`
}

// FinalMetrics sums the steps' metrics.
type FinalMetrics struct {
	TotalPromptTokens     int            `json:"total_prompt_tokens"`
	TotalCompletionTokens int            `json:"total_completion_tokens"`
	TotalCachedTokens     int            `json:"total_cached_tokens"`
	TotalSteps            int            `json:"total_steps"`
	Extra                 map[string]any `json:"extra,omitempty"`
}

// Write exports the session recorded in dir (its trajectory.jsonl, and
// initial_request.json and requests.jsonl where they are) as dir/File; a
// session that sent nothing gets no file.
func Write(dir string, in Info) error {
	t, err := Build(dir, in)
	if err != nil || len(t.Steps) == 0 {
		return err
	}
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	if err := Validate(b); err != nil {
		return fmt.Errorf("%s: the trajectory built is not valid ATIF: %w", filepath.Join(dir, File), err)
	}
	return os.WriteFile(filepath.Join(dir, File), append(b, '\n'), 0o644)
}

//go:embed schema.json
var schemaJSON []byte

var schema = sync.OnceValues(func() (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemaJSON))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	const id = "https://jspark.invalid/atif-v1.4.schema.json" // schema.json's $id
	if err := c.AddResource(id, doc); err != nil {
		return nil, err
	}
	return c.Compile(id)
})

// Validate checks an ATIF file: the schema (schema.json), then what a
// schema cannot say: step ids run 1, 2, … in order, and each observation
// result's source_call_id names a tool call of its own step (Harbor's
// validator checks both).
func Validate(data []byte) error {
	sch, err := schema()
	if err != nil {
		return fmt.Errorf("atif: the schema: %w", err)
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return err
	}
	if err := sch.Validate(doc); err != nil {
		return err
	}
	var t Trajectory
	if err := json.Unmarshal(data, &t); err != nil {
		return err
	}
	var errs []error
	for i, s := range t.Steps {
		if s.StepID != i+1 {
			errs = append(errs, fmt.Errorf("steps[%d]: step_id %d, want %d", i, s.StepID, i+1))
		}
		if s.Observation == nil {
			continue
		}
		calls := map[string]bool{}
		for _, c := range s.ToolCalls {
			calls[c.ToolCallID] = true
		}
		for j, r := range s.Observation.Results {
			if r.SourceCallID != "" && !calls[r.SourceCallID] {
				errs = append(errs, fmt.Errorf("steps[%d].observation.results[%d]: source_call_id %q names no tool call of the step", i, j, r.SourceCallID))
			}
		}
	}
	return errors.Join(errs...)
}
