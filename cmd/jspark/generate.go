package main

import (
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"jspark/backend/model"
	"jspark/backend/sample"
)

// GenerateOptions are the flags of `jspark generate`.
type GenerateOptions struct {
	DeviceFlags
	Prompt     string
	MaxTokens  int
	Sampling   sample.Params
	Format     string
	CPUProfile string
}

// GenerateResult is the JSON `jspark generate --format json` prints.
type GenerateResult struct {
	PromptIDs        []int   `json:"prompt_ids"`
	IDs              []int   `json:"ids"`
	Text             string  `json:"text"`
	PromptTokens     int     `json:"prompt_tokens"`
	CompletionTokens int     `json:"completion_tokens"`
	PrefillTokS      float64 `json:"prefill_tok_s"`
	DecodeTokS       float64 `json:"decode_tok_s"`
}

func newGenerateCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &GenerateOptions{DeviceFlags: defaultDeviceFlags()}
	cmd := &cobra.Command{
		Use:   "generate",
		Short: "Complete a prompt with the model (the embedded default unless --model)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return profiled(o.CPUProfile, func() error { return runGenerate(o, stdout, stderr) })
		},
	}
	f := cmd.Flags()
	o.DeviceFlags.add(f)
	profileFlag(f, &o.CPUProfile)
	f.StringVar(&o.Prompt, "prompt", "", "prompt text")
	f.IntVar(&o.MaxTokens, "max-tokens", 64, "tokens to generate at most")
	f.StringVar(&o.Format, "format", "text", "output: text (streamed) or json")
	addSamplingFlags(f, &o.Sampling)
	return cmd
}

func addSamplingFlags(f *pflag.FlagSet, p *sample.Params) {
	f.Float32Var(&p.Temperature, "temperature", 0, "sampling temperature (0: greedy)")
	f.IntVar(&p.TopK, "top-k", 0, "top-k (0: off)")
	f.Float32Var(&p.TopP, "top-p", 1, "top-p (1: off)")
	f.Float32Var(&p.MinP, "min-p", 0, "min-p (0: off)")
	f.Float32Var(&p.RepeatPenalty, "repeat-penalty", 1, "repetition penalty (1: off)")
	f.Uint64Var(&p.Seed, "seed", 0, "RNG seed")
}

func runGenerate(o *GenerateOptions, stdout, stderr io.Writer) error {
	if o.Format != "text" && o.Format != "json" {
		return fmt.Errorf("--format %q: want text or json", o.Format)
	}
	if o.MaxTokens < 0 {
		return fmt.Errorf("--max-tokens %d: must not be negative", o.MaxTokens)
	}
	kvType, err := parseKVType(o.KVType)
	if err != nil {
		return err
	}
	k, closeDevice, err := openDevice(o.Device, o.Threads)
	if err != nil {
		return err
	}
	defer closeDevice()
	m, closeModel, err := model.Open(o.Model, k)
	if err != nil {
		return err
	}
	defer closeModel()
	m.KVType = kvType
	ids := m.Tok.Encode(o.Prompt, true, true)
	if n := len(ids) + o.MaxTokens; n > m.Context {
		fmt.Fprintf(stderr, "jspark: note: %d tokens exceed the model's stated training context of %d; running anyway\n", n, m.Context)
	}
	var pending []byte // bytes of a character split across tokens
	onToken := func(id int) {
		if o.Format != "text" {
			return
		}
		pending = m.Tok.AppendPiece(pending, id, false)
		cut := len(pending)
		for cut > 0 && !utf8.Valid(pending[:cut]) && len(pending)-cut < utf8.UTFMax {
			cut--
		}
		if cut == 0 && !utf8.Valid(pending) && len(pending) < utf8.UTFMax {
			return
		}
		if cut == 0 {
			cut = len(pending)
		}
		stdout.Write(pending[:cut])
		pending = pending[cut:]
	}
	g, err := m.Generate(ids, o.MaxTokens, sample.New(o.Sampling), onToken)
	if err != nil {
		return err
	}
	if o.Format == "text" {
		stdout.Write(pending)
		fmt.Fprintln(stdout)
		return nil
	}
	res := GenerateResult{
		PromptIDs: ids, IDs: g.IDs, Text: m.Tok.Decode(g.IDs, false),
		PromptTokens: len(ids), CompletionTokens: len(g.IDs),
		PrefillTokS: rate(len(ids), g.Prefill.Seconds()), DecodeTokS: rate(len(g.IDs), g.Decode.Seconds()),
	}
	if res.IDs == nil {
		res.IDs = []int{}
	}
	enc := json.NewEncoder(stdout)
	enc.SetEscapeHTML(false)
	return enc.Encode(res)
}

func rate(n int, seconds float64) float64 {
	if seconds <= 0 {
		return 0
	}
	return float64(n) / seconds
}
