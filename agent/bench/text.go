package bench

import (
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"math"
	mrand "math/rand/v2"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

//go:embed data/prompts.yaml
var promptsYAML []byte

// Task is one real prompt of the speed suite.
type Task struct {
	ID     string `yaml:"id"`
	Kind   string `yaml:"kind"` // prose or code
	Prompt string `yaml:"prompt"`
}

// Prompts are the bench's own data (data/prompts.yaml).
type Prompts struct {
	System  string   `yaml:"system"`
	Tasks   []Task   `yaml:"tasks"`
	Arrival string   `yaml:"arrival"`
	IDs     []string `yaml:"ids"`
}

// LoadPrompts parses the embedded prompt data.
func LoadPrompts() (*Prompts, error) {
	var p Prompts
	if err := yaml.Unmarshal(promptsYAML, &p); err != nil {
		return nil, fmt.Errorf("bench prompts: %w", err)
	}
	if len(p.Tasks) == 0 || len(p.IDs) == 0 || p.Arrival == "" {
		return nil, fmt.Errorf("bench prompts: tasks, arrival and ids are required")
	}
	return &p, nil
}

// newSalt is a random tag put at the very start of a prompt so that no
// trial reuses another's cache; a repeat sends its trial's salt again.
func newSalt() string {
	b := make([]byte, 6)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func salted(salt, text string) string { return "[trial " + salt + "]\n" + text }

var vocabulary = strings.Fields(`the a one little big old new small bright dark quiet busy
cache server request token prompt block engine queue batch memory model kernel thread
stream window answer reply field table screen trial column number value result record
river garden market station library kitchen window street mountain harbour forest valley
walked carried opened measured counted wrote read found kept moved started stopped shared
slowly quickly carefully again later early often always never together alone before after
and but so then while because when where which that with from into under over across
engineer operator writer reader student teacher child friend neighbour captain driver
red green blue yellow grey warm cold long short heavy light clean simple honest careful`)

// words is n words of synthetic prose, the same for the same seed:
// sentences of 8 to 15 words.
func words(n int, seed uint64) string {
	r := mrand.New(mrand.NewPCG(seed, 0x9e3779b97f4a7c15))
	var b strings.Builder
	left := 0
	for i := 0; i < n; i++ {
		if left == 0 {
			left = 8 + r.IntN(8)
		}
		w := vocabulary[r.IntN(len(vocabulary))]
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		if left == 1 || i == n-1 {
			w += "."
		}
		b.WriteString(w)
		left--
	}
	return b.String()
}

var (
	logLevels   = []string{"INFO", "INFO", "INFO", "DEBUG", "WARN", "ERROR"}
	logServices = []string{"api", "auth", "billing", "db", "search", "queue", "mailer"}
	logMessages = []string{"ok", "request served", "cache miss", "slow query", "retrying upstream",
		"upstream failed", "token refreshed", "job queued", "job done", "connection reset"}
)

// logLines is n lines of a service log, the same for the same seed.
func logLines(n int, seed uint64) string {
	r := mrand.New(mrand.NewPCG(seed, 0x2545f4914f6cdd1d))
	var b strings.Builder
	for i := 0; i < n; i++ {
		lvl := logLevels[r.IntN(len(logLevels))]
		lat := 5 + r.IntN(60)
		if lvl == "ERROR" || lvl == "WARN" {
			lat += r.IntN(900)
		}
		fmt.Fprintf(&b, "2026-09-12T%02d:%02d:%02dZ %s service=%s latency_ms=%d msg=%s\n",
			i/3600%24, i/60%60, i%60, lvl, logServices[r.IntN(len(logServices))], lat, logMessages[r.IntN(len(logMessages))])
	}
	return b.String()
}

// sizer turns a prompt length in tokens into units (words or log lines) of
// a generated text, for one target: prompt tokens = base + per × units, fit
// from two probes' usage.prompt_tokens, so the chat template's overhead
// and the tokenizer are the target's own.
type sizer struct{ base, per float64 }

func (s sizer) units(tokens int) int {
	if s.per <= 0 {
		return max(tokens, 1)
	}
	return max(int(math.Round((float64(tokens)-s.base)/s.per)), 1)
}

// ParseLength reads "4096", "4k" or "64K" (k = 1024 tokens).
func ParseLength(s string) (int, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	mult := 1
	if v, ok := strings.CutSuffix(t, "k"); ok {
		t, mult = v, 1024
	}
	n, err := strconv.ParseFloat(t, 64)
	if err != nil || n < 1 || n > 1<<24 {
		return 0, fmt.Errorf("length %q: want a token count such as 4096 or 4k", s)
	}
	return int(n * float64(mult)), nil
}

// lengthLabel is the seed's way to name a length: 4K, 64K, or the count.
func lengthLabel(n int) string {
	if n%1024 == 0 {
		return fmt.Sprintf("%dK", n/1024)
	}
	return fmt.Sprint(n)
}
