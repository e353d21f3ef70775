// Package refs reads reference outputs: JSON lines, each a prompt and the
// greedy continuation another implementation produced for it, such as
// testdata/refs/stories260K-greedy.jsonl (llama.cpp on the embedded model).
// The model, kernel and CLI tests compare jspark's outputs with them, and
// `jspark bench ids --ids-ref FILE` any server's.
package refs

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Stories260K is the repository's reference file, relative to its root:
// llama.cpp's greedy continuations of the embedded stories260K.
const Stories260K = "testdata/refs/stories260K-greedy.jsonl"

// Case is one reference: a prompt (text, or ids sent as they are) and its
// expected greedy continuation (ids, text or both).
type Case struct {
	Prompt    string `json:"prompt"`
	AddBOS    bool   `json:"add_bos,omitempty"` // the prompt's ids start with BOS
	PromptIDs []int  `json:"prompt_ids"`
	GenIDs    []int  `json:"gen_ids"`
	Text      string `json:"text"`
	// Top5First are the first generated token's five likeliest tokens:
	// (id, log-probability).
	Top5First [][2]float64 `json:"top5_first,omitempty"`
}

// maxLine bounds one line of a reference file.
const maxLine = 16 << 20

// Load reads a reference file; an error names the file and line.
func Load(path string) ([]Case, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Case
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	for line := 1; sc.Scan(); line++ {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var c Case
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, line, err)
		}
		if c.Prompt == "" && len(c.PromptIDs) == 0 {
			return nil, fmt.Errorf("%s:%d: prompt or prompt_ids is required", path, line)
		}
		if c.Text == "" && len(c.GenIDs) == 0 {
			return nil, fmt.Errorf("%s:%d: text or gen_ids is required", path, line)
		}
		out = append(out, c)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no references", path)
	}
	return out, nil
}
