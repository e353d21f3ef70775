package external

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// agentRun is what an external agent's configuration and command line are
// made from.
type agentRun struct {
	BaseURL   string // the engine as the sandbox sees it: http://127.0.0.1:PORT/v1
	Model     string // the served model id
	MaxTokens int    // output tokens per request (the recipe's max_tokens)
	Context   int    // the engine's context window, so the agent compacts where the engine would refuse
	Prompt    string
}

// externalAgent is how one external coding agent is installed, configured
// and run once, non-interactively, with the task prompt.
type externalAgent struct {
	pkg    string // the npm package
	entry  string // its entry point, relative to the package folder
	native bool   // the entry is an executable, not a script for Node
	// files are its provider configuration, by name, in the folder envVar
	// names (written inside the sandbox, where the agent may write too).
	files  func(r agentRun) map[string]string
	envVar string
	// env are further variables; args the command line after the entry.
	env  []string
	args func(r agentRun) []string
}

// externalAgents by recipe kind.
var externalAgents = map[string]*externalAgent{
	// Pi (pi.dev): print mode answers once and exits; models.json defines an
	// OpenAI-compatible provider. Offline: no update check, no telemetry.
	"pi": {
		pkg: "@mariozechner/pi-coding-agent", entry: "dist/cli.js", envVar: "PI_CODING_AGENT_DIR",
		env: []string{"PI_OFFLINE=1", "PI_SKIP_VERSION_CHECK=1", "PI_TELEMETRY=0"},
		files: func(r agentRun) map[string]string {
			return map[string]string{"models.json": jsonText(map[string]any{"providers": map[string]any{"jspark": map[string]any{
				"baseUrl": r.BaseURL, "api": "openai-completions", "apiKey": "jspark",
				// The engine speaks system, not developer, and has no reasoning_effort.
				"compat": map[string]any{"supportsDeveloperRole": false, "supportsReasoningEffort": false},
				"models": []any{map[string]any{"id": r.Model, "contextWindow": r.Context, "maxTokens": r.MaxTokens}},
			}}})}
		},
		args: func(r agentRun) []string {
			return []string{"--print", "--offline", "--no-session", "--provider", "jspark", "--model", r.Model,
				"--no-extensions", "--no-skills", "--no-prompt-templates", "--no-themes", "--no-context-files", r.Prompt}
		},
	},
	// Codex CLI: exec mode runs one task; a custom provider must speak the
	// Responses API (wire_api = "responses"), which the engine serves. Its
	// own sandbox is off: the session's sandbox is the boundary.
	"codex": {
		pkg: "@openai/codex", entry: "bin/codex.js", envVar: "CODEX_HOME",
		files: func(r agentRun) map[string]string {
			return map[string]string{"config.toml": fmt.Sprintf(`model = %s
model_provider = "jspark"
model_context_window = %d

[model_providers.jspark]
name = "jspark"
base_url = %s
wire_api = "responses"
`, tomlString(r.Model), r.Context, tomlString(r.BaseURL))}
		},
		args: func(r agentRun) []string {
			return []string{"exec", "--skip-git-repo-check", "--ephemeral", "--color", "never", "--dangerously-bypass-approvals-and-sandbox", r.Prompt}
		},
	},
	// opencode: run mode (a native executable), a provider through
	// @ai-sdk/openai-compatible, no plugins, permissions granted (the
	// session's sandbox is the boundary).
	"opencode": {
		pkg: "opencode-ai", entry: "bin/opencode.exe", native: true, envVar: "OPENCODE_CONFIG_DIR",
		env: []string{"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_SHARE=1"},
		files: func(r agentRun) map[string]string {
			return map[string]string{"opencode.json": jsonText(map[string]any{
				"$schema": "https://opencode.ai/config.json",
				"model":   "jspark/" + r.Model,
				"provider": map[string]any{"jspark": map[string]any{
					"npm": "@ai-sdk/openai-compatible", "name": "jspark",
					"options": map[string]any{"baseURL": r.BaseURL, "apiKey": "jspark"},
					"models":  map[string]any{r.Model: map[string]any{"name": r.Model, "limit": map[string]any{"context": r.Context, "output": r.MaxTokens}}},
				}},
			})}
		},
		args: func(r agentRun) []string {
			return []string{"run", "--pure", "--auto", "--model", "jspark/" + r.Model, r.Prompt}
		},
	},
}

// command is the shell command that writes the agent's configuration into a
// fresh folder of the sandbox's /tmp and runs the agent once, stdin closed
// (print modes read a piped stdin into the prompt).
func (in *Installation) command(r agentRun) (string, map[string]string) {
	def := externalAgents[in.Agent.Kind]
	files := def.files(r)
	var b strings.Builder
	fmt.Fprintf(&b, "d=$(mktemp -d \"${TMPDIR:-/tmp}/jspark-%s-XXXXXX\") && ", in.Agent.Kind)
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(&b, "printf '%%s' %s > \"$d\"/%s && ", shellQuote(files[n]), shellQuote(n))
	}
	fmt.Fprintf(&b, "%s=\"$d\"", def.envVar)
	for _, e := range def.env {
		b.WriteString(" " + e)
	}
	argv := []string{in.Node, in.Entry}
	if def.native {
		argv = argv[1:]
	}
	for _, a := range append(argv, def.args(r)...) {
		b.WriteString(" " + shellQuote(a))
	}
	b.WriteString(" </dev/null")
	return b.String(), files
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func jsonText(v any) string {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err) // maps of strings and numbers
	}
	return string(b) + "\n"
}

// tomlString is s as a TOML basic string (JSON's escapes are TOML's).
func tomlString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
