package external

import (
	"encoding/json"
	"fmt"
	"regexp"

	"jspark/agent/record"
)

// historyItem is one message or item of a request's history as the
// trajectory keeps it, texts clipped.
type historyItem struct {
	Role   string        `json:"role"`
	Text   string        `json:"text,omitempty"`
	Calls  []record.Call `json:"tool_calls,omitempty"`
	CallID string        `json:"tool_call_id,omitempty"` // a tool result's call
}

// history reads a request's conversation (chat messages or Responses input
// items): calls the agent sent back that no output of this session made are
// its previous request's; results give shell calls their exit codes. It
// returns the items new since the previous request.
func (rc *recorder) history(turn int, body []byte) []historyItem {
	items := parseHistory(body)
	for _, it := range items {
		for _, c := range it.Calls {
			if _, ok := rc.calls[c.ID]; ok || turn == 0 || c.ID == "" {
				continue
			}
			prev := &rc.reqs[turn-1]
			rc.calls[c.ID] = [2]int{turn - 1, len(prev.Calls)}
			prev.Calls = append(prev.Calls, c)
		}
		if at, ok := rc.calls[it.CallID]; ok && it.CallID != "" {
			c := &rc.reqs[at[0]].Calls[at[1]]
			if c.ExitCode == nil {
				c.ExitCode = shellExit(c.Name, it.Text)
			}
		}
	}
	var added []historyItem
	if rc.seen < len(items) {
		added = items[rc.seen:]
	}
	rc.seen = len(items)
	for i := range added {
		added[i].Text = record.Clip(added[i].Text)
	}
	return added
}

// parseHistory normalises chat messages and Responses input items.
func parseHistory(body []byte) []historyItem {
	var req struct {
		Messages []struct {
			Role       string            `json:"role"`
			Content    json.RawMessage   `json:"content"`
			ToolCalls  []record.WireCall `json:"tool_calls"`
			ToolCallID string            `json:"tool_call_id"`
		} `json:"messages"`
		Input json.RawMessage `json:"input"`
	}
	if json.Unmarshal(body, &req) != nil {
		return nil // the server says what is wrong with it
	}
	var out []historyItem
	for _, m := range req.Messages {
		it := historyItem{Role: m.Role, Text: record.ContentText(m.Content), CallID: m.ToolCallID}
		for _, c := range m.ToolCalls {
			it.Calls = append(it.Calls, historyCall(c.ID, c.Function.Name, c.Function.Arguments))
		}
		out = append(out, it)
	}
	var items []struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		CallID    string          `json:"call_id"`
		Name      string          `json:"name"`
		Arguments string          `json:"arguments"`
		Output    json.RawMessage `json:"output"`
	}
	if json.Unmarshal(req.Input, &items) != nil {
		if s := record.ContentText(req.Input); s != "" {
			out = append(out, historyItem{Role: "user", Text: s})
		}
		return out
	}
	for _, it := range items {
		switch it.Type {
		case "function_call":
			out = append(out, historyItem{Role: "assistant", Calls: []record.Call{historyCall(it.CallID, it.Name, it.Arguments)}})
		case "function_call_output":
			out = append(out, historyItem{Role: "tool", Text: record.ContentText(it.Output), CallID: it.CallID})
		default:
			out = append(out, historyItem{Role: it.Role, Text: record.ContentText(it.Content)})
		}
	}
	return out
}

// historyCall is a call the agent sent back, as the trajectory keeps it;
// its id stays whole, as the key its result names it by.
func historyCall(id, name, args string) record.Call {
	return record.Call{ID: id, Name: record.Clip(name), Args: record.Clip(args), ArgsBytes: len(args)}
}

// exitPatterns find a shell call's exit status in what the agent's tool
// returned (Pi: "Command exited with code 2"; others "exit code: 2" or a
// JSON exit_code).
var exitPatterns = []*regexp.Regexp{
	regexp.MustCompile(`(?i)exit(?:ed with)? code:? (-?\d+)`),
	regexp.MustCompile(`"exit_code":\s*(-?\d+)`),
}

// shellExit is the exit code of a shell-like call from its result text
// (0 when it states none); nil for other tools.
func shellExit(name, result string) *int {
	switch name {
	case "bash", "shell", "exec_command", "local_shell":
	default:
		return nil
	}
	code := 0
	for _, p := range exitPatterns {
		if m := p.FindAllStringSubmatch(result, -1); m != nil {
			fmt.Sscan(m[len(m)-1][1], &code)
			break
		}
	}
	return &code
}
