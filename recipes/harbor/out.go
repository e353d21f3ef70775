package harbor

import (
	"bytes"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The imported recipe as it is written: only the fields an import sets, in
// the order a reader expects them.
type (
	recipe struct {
		Name     string   `yaml:"name"`
		Window   string   `yaml:"window"`
		System   string   `yaml:"system"`
		Tools    []string `yaml:"tools,flow"`
		Sampling sampling `yaml:"sampling"`
		Shell    shell    `yaml:"shell"`
		Tasks    []task   `yaml:"tasks"`
		Rounds   []round  `yaml:"rounds"`
	}
	sampling struct {
		MaxTokens  int    `yaml:"max_tokens"`
		ToolChoice string `yaml:"tool_choice"`
	}
	shell struct {
		Timeout     string `yaml:"timeout"`
		OutputLimit int    `yaml:"output_limit"`
	}
	task struct {
		ID           string            `yaml:"id"`
		Kind         string            `yaml:"kind"`
		NotRunnable  string            `yaml:"not_runnable,omitempty"`
		Prompt       string            `yaml:"prompt"`
		Files        map[string]string `yaml:"files,omitempty"`
		Check        string            `yaml:"check,omitempty"`
		CheckTimeout string            `yaml:"check_timeout,omitempty"`
		Tests        map[string]string `yaml:"tests,omitempty"`
		Solution     *solutionSpec     `yaml:"solution,omitempty"`
	}
	solutionSpec struct {
		Files  map[string]string `yaml:"files,omitempty"`
		Script string            `yaml:"script,omitempty"`
	}
	round struct {
		Name        string   `yaml:"name"`
		Concurrency int      `yaml:"concurrency"`
		Tasks       []string `yaml:"tasks,flow"`
	}
)

// system is the imported recipe's system prompt: Harbor's agents get the
// instruction alone, in a terminal.
const system = `You are a careful engineer working alone in a workspace, through tools.
Every reply must call exactly one tool. Use bash to run commands, read to look
at files, write to create them, edit to change one exact string, list to see
folders and search to find text. Paths are relative to the workspace. Work in
small steps and check your work before you stop.
`

// encode writes the recipe with a header saying where it came from and
// which tasks cannot run here.
func (r *recipe) encode(dir string, tasks []Task) ([]byte, error) {
	var n yaml.Node
	if err := n.Encode(r); err != nil {
		return nil, err
	}
	var head strings.Builder
	fmt.Fprintf(&head, "Imported by `jspark recipes import harbor %s`.\n", dir)
	head.WriteString("Harbor's /tests and /solution are .harbor/tests and .harbor/solution in the\n")
	head.WriteString("workspace (hidden tests and the oracle); the task's WORKDIR is the workspace.\n")
	for _, t := range tasks {
		if t.NotRunnable != "" {
			fmt.Fprintf(&head, "Not runnable here: %s: %s\n", t.ID, t.NotRunnable)
		}
	}
	n.HeadComment = strings.TrimSuffix(head.String(), "\n")
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&n); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
