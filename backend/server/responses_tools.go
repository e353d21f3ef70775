package server

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"jspark/backend/chat"
)

// spacedName is a function inside a Responses namespace tool: what the
// client calls it. The model sees it flattened (flatName).
type spacedName struct{ namespace, name string }

// flatName is the function name the model is offered for name inside
// namespace: "multi_agent_v1__spawn_agent", or "mcp__server__tool" for a
// namespace that already ends with the separator (Codex's MCP form).
func flatName(namespace, name string) string {
	if strings.HasSuffix(namespace, "__") {
		return namespace + name
	}
	return namespace + "__" + name
}

// responseTools is what a Responses request's tools become: chat function
// tools (a namespace's functions flattened, so a model that knows only
// functions can call them), the flat names to split again when the model
// calls one (Codex routes a call by its namespace and short name, and
// refuses a flat name), and the types of the tools that are not offered.
type responseTools struct {
	tools   []chat.Tool
	spaced  map[string]spacedName // flat name → namespace and name
	skipped []string              // hosted tools (web_search, …) and other types this server cannot run
}

// responseTool is one entry of tools (or of a namespace's tools).
type responseTool struct {
	Type        string            `json:"type"`
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Parameters  json.RawMessage   `json:"parameters"`
	Strict      bool              `json:"strict"`
	Tools       []json.RawMessage `json:"tools"` // a namespace's
}

func translateTools(raws []json.RawMessage) (responseTools, error) {
	var out responseTools
	seen := map[string]string{} // offered name → where
	skipped := map[string]bool{}
	offer := func(param, name string, t responseTool) error {
		if name == "" {
			return badRequest(param, "%s: a function tool needs a name", param)
		}
		if prev, dup := seen[name]; dup {
			return badRequest(param, "%s: the function name %q is offered twice (also by %s)", param, name, prev)
		}
		seen[name] = param
		out.tools = append(out.tools, chat.Tool{Type: "function", Function: chat.Function{
			Name: name, Description: t.Description, Parameters: t.Parameters, Strict: t.Strict}})
		return nil
	}
	for i, raw := range raws {
		param := fmt.Sprintf("tools[%d]", i)
		var t responseTool
		if err := json.Unmarshal(raw, &t); err != nil {
			return out, badRequest(param, "%s: %v", param, err)
		}
		switch t.Type {
		case "function":
			if err := offer(param, t.Name, t); err != nil {
				return out, err
			}
		case "namespace":
			if t.Name == "" {
				return out, badRequest(param, "%s: a namespace tool needs a name", param)
			}
			for j, craw := range t.Tools {
				cparam := fmt.Sprintf("%s.tools[%d]", param, j)
				var c responseTool
				if err := json.Unmarshal(craw, &c); err != nil {
					return out, badRequest(cparam, "%s: %v", cparam, err)
				}
				if c.Type != "function" {
					skipped[t.Name+"."+c.Type] = true
					continue
				}
				flat := flatName(t.Name, c.Name)
				if err := offer(cparam, flat, c); err != nil {
					return out, err
				}
				if out.spaced == nil {
					out.spaced = map[string]spacedName{}
				}
				out.spaced[flat] = spacedName{namespace: t.Name, name: c.Name}
			}
		default:
			// Hosted tools (web_search, file_search, image_generation, …)
			// and freeform ones need executors this server does not have.
			skipped[t.Type] = true
		}
	}
	for k := range skipped {
		out.skipped = append(out.skipped, k)
	}
	sort.Strings(out.skipped)
	return out, nil
}

// split is the namespace and short name of an offered function name
// (namespace empty for a plain function).
func (rt *responseTools) split(name string) spacedName {
	if s, ok := rt.spaced[name]; ok {
		return s
	}
	return spacedName{name: name}
}
