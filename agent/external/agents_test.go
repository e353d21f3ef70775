package external

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"jspark/recipes"
)

// Each agent's command, run by bash as the sandbox's shell runs it, writes
// its provider configuration pointing at the engine and hands the agent the
// prompt as one argument, whatever quotes it holds, stdin closed. The agent
// here is a script that reports what it was given.
func TestAgentCommandWritesConfigAndQuotesThePrompt(t *testing.T) {
	dir := t.TempDir()
	report := filepath.Join(dir, "report")
	script := filepath.Join(dir, "agent.sh")
	os.WriteFile(script, []byte(`#!/bin/bash
{
	for a in "$@"; do printf '[%s]\n' "$a"; done
	for d in "$PI_CODING_AGENT_DIR" "$CODEX_HOME" "$OPENCODE_CONFIG_DIR"; do [ -n "$d" ] && cat "$d"/*; done
	read -t 1 x && echo "stdin: $x"
} > `+report+"\nexit 0\n"), 0o755)
	prompt := "Read it's \"first\" $HOME `half`\nthen\tanswer."
	run := agentRun{BaseURL: "http://127.0.0.1:40000/v1", Model: "llama", MaxTokens: 256, Context: 32768, Prompt: prompt}
	for _, c := range []struct {
		kind, file string
		check      func(t *testing.T, run agentRun, config string)
		args       []string
	}{
		{"pi", "models.json", checkPiConfig, []string{"--print", "--offline", "--no-session", "--provider", "jspark", "--model", "llama", "--no-extensions", "--no-skills", "--no-prompt-templates", "--no-themes", "--no-context-files"}},
		{"codex", "config.toml", checkCodexConfig, []string{"exec", "--skip-git-repo-check", "--ephemeral", "--color", "never", "--dangerously-bypass-approvals-and-sandbox"}},
		{"opencode", "opencode.json", checkOpencodeConfig, []string{"run", "--pure", "--auto", "--model", "jspark/llama"}},
	} {
		t.Run(c.kind, func(t *testing.T) {
			config := runAgentCommand(t, c.kind, c.file, c.args, run, script, report)
			c.check(t, run, config)
		})
	}
}

// runAgentCommand runs kind's command as the sandbox's shell would, with
// script as the agent, checks the argv it got (its fixed args, then the
// prompt) and the one configuration file, and returns that file as the
// agent read it.
func runAgentCommand(t *testing.T, kind, file string, args []string, run agentRun, script, report string) string {
	t.Helper()
	prompt := run.Prompt
	def := externalAgents[kind]
	in := &Installation{Agent: recipes.Agent{Kind: kind, Version: "1.0.0"}, Node: script, Entry: "/cache/entry.js"}
	if def.native {
		in.Node, in.Entry = "/nonexistent/node", script
	}
	cmd, files := in.command(run)
	os.Remove(report)
	sh := exec.Command("/bin/bash", "-c", cmd)
	sh.Stdin = strings.NewReader("not for the agent\n")
	if out, err := sh.CombinedOutput(); err != nil {
		t.Fatalf("%v: %s\ncommand: %s", err, out, cmd)
	}
	got := mustRead(t, report)
	var argv []string
	if !def.native {
		argv = append(argv, "/cache/entry.js")
	}
	argv = append(append(argv, args...), prompt)
	var want strings.Builder
	for _, a := range argv {
		want.WriteString("[" + a + "]\n")
	}
	if !strings.HasPrefix(got, want.String()) {
		t.Errorf("argv (-want +got):\n%s", cmp.Diff(want.String(), got[:min(len(got), want.Len())]))
	}
	config := strings.TrimPrefix(got, want.String())
	if strings.Contains(config, "stdin:") || config != files[file] || len(files) != 1 {
		t.Errorf("config as the agent read it:\n%s\nfiles %v", config, files)
	}
	return config
}

// checkPiConfig: Pi's models.json names the engine, its model, context and output limit.
func checkPiConfig(t *testing.T, run agentRun, config string) {
	var m struct {
		Providers map[string]struct {
			BaseURL string `json:"baseUrl"`
			API     string `json:"api"`
			Models  []struct {
				ID            string `json:"id"`
				ContextWindow int    `json:"contextWindow"`
				MaxTokens     int    `json:"maxTokens"`
			} `json:"models"`
		} `json:"providers"`
	}
	if err := json.Unmarshal([]byte(config), &m); err != nil {
		t.Fatal(err)
	}
	p := m.Providers["jspark"]
	if p.BaseURL != run.BaseURL || p.API != "openai-completions" || len(p.Models) != 1 || p.Models[0].ID != "llama" || p.Models[0].ContextWindow != 32768 || p.Models[0].MaxTokens != 256 {
		t.Errorf("models.json %+v", m)
	}
}

// checkCodexConfig: Codex's config.toml names the engine as a Responses provider.
func checkCodexConfig(t *testing.T, run agentRun, config string) {
	for _, want := range []string{`model = "llama"`, `model_provider = "jspark"`, "[model_providers.jspark]", `base_url = "http://127.0.0.1:40000/v1"`, `wire_api = "responses"`} {
		if !strings.Contains(config, want+"\n") {
			t.Errorf("config.toml lacks %s:\n%s", want, config)
		}
	}
}

// checkOpencodeConfig: opencode's opencode.json names the engine through @ai-sdk/openai-compatible.
func checkOpencodeConfig(t *testing.T, run agentRun, config string) {
	var m struct {
		Model    string `json:"model"`
		Provider map[string]struct {
			NPM     string `json:"npm"`
			Options struct {
				BaseURL string `json:"baseURL"`
			} `json:"options"`
			Models map[string]any `json:"models"`
		} `json:"provider"`
	}
	if err := json.Unmarshal([]byte(config), &m); err != nil {
		t.Fatal(err)
	}
	p := m.Provider["jspark"]
	if m.Model != "jspark/llama" || p.NPM != "@ai-sdk/openai-compatible" || p.Options.BaseURL != run.BaseURL || p.Models["llama"] == nil {
		t.Errorf("opencode.json %+v", m)
	}
}

func mustRead(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Without node or npm the runner says so and what to install.
func TestInstallWithoutNodeSaysSo(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := Install(t.Context(), recipes.Agent{Kind: "pi", Version: "0.73.1"}, t.TempDir(), nil)
	if err == nil || err.Error() != "the recipe's agent pi 0.73.1 needs Node.js: node is not on PATH (install Node.js 20 or later with npm)" {
		t.Errorf("%v", err)
	}
}
