package bench

import (
	"context"
	"fmt"
	"jspark/agent/report"
	"jspark/backend/refs"
	"slices"
	"strings"
)

// The ids screen (the seed's native-ID screen): short prompts continued
// greedily as text completions; each output is compared with a reference
// (a file's, or the first target's), and the first prompts are sent twice
// in a row, the repeat served from the prefix cache, which must not change
// a greedy output.

func idsPlanned(c *Config, p *Prompts) int {
	n := len(p.IDs)
	if c.References != nil {
		n = len(c.References)
	}
	return n + min(c.RepeatPairs, n)
}

func idsCase(i int) string { return fmt.Sprintf("prompt %d", i+1) }

func runIDs(ctx context.Context, r *runner) error {
	type prompt struct {
		body   any
		tokens int
	}
	var ps []prompt
	if cases := r.cfg.References; cases != nil {
		for _, ref := range cases {
			p := prompt{body: ref.Prompt, tokens: r.cfg.IDTokens}
			if len(ref.PromptIDs) > 0 {
				p.body = ref.PromptIDs
			}
			if len(ref.GenIDs) > 0 {
				p.tokens = len(ref.GenIDs)
			}
			ps = append(ps, p)
		}
	} else {
		for _, s := range r.p.IDs {
			ps = append(ps, prompt{body: s, tokens: r.cfg.IDTokens})
		}
	}
	for i, p := range ps {
		for _, role := range []string{"first", "repeat"} {
			if role == "repeat" && i >= r.cfg.RepeatPairs || ctx.Err() != nil {
				break
			}
			// logprobs bring each token's text; return_token_ids brings
			// the ids where the server has it (vLLM); others ignore it.
			body := map[string]any{"prompt": p.body, "max_tokens": p.tokens, "temperature": 0, "ignore_eos": true, "logprobs": 1, "return_token_ids": true}
			r.settle(ctx)
			r.send(ctx, Record{Case: idsCase(i), Trial: 1, Role: role}, "/completions", body, nil)
		}
	}
	return nil
}

// same says whether two records are the same greedy output, by the best
// evidence both carry: token ids, else per-token texts, else the text.
func same(a, b Record) (bool, string) {
	switch {
	case !a.OK() || !b.OK():
		return false, ""
	case len(a.TokenIDs) > 0 && len(b.TokenIDs) > 0:
		return slices.Equal(a.TokenIDs, b.TokenIDs), "token ids"
	case len(a.Pieces) > 0 && len(b.Pieces) > 0:
		return slices.Equal(a.Pieces, b.Pieces), "token texts (logprobs)"
	default:
		return a.Text == b.Text && a.CompletionTokens == b.CompletionTokens, "text and token count"
	}
}

// matches compares a record with a reference file's line.
func matches(r Record, ref refs.Case) (bool, string) {
	switch {
	case !r.OK():
		return false, ""
	case len(r.TokenIDs) > 0 && len(ref.GenIDs) > 0:
		return slices.Equal(r.TokenIDs, ref.GenIDs), "token ids"
	case len(ref.GenIDs) > 0:
		return r.Text == ref.Text && r.CompletionTokens == len(ref.GenIDs), "text and token count"
	default:
		return r.Text == ref.Text, "text"
	}
}

// firstMatches counts a target's first outputs that match the reference
// file's (references) or, without one, the first target's (firstTarget); how
// collects what they were compared by.
func firstMatches(firsts []Record, references []refs.Case, firstTarget []Record, how map[string]bool) (ok, n int) {
	for i, r := range firsts {
		var m bool
		var h string
		switch {
		case references != nil && i < len(references):
			m, h = matches(r, references[i])
		case references == nil && i < len(firstTarget):
			m, h = same(r, firstTarget[i])
		}
		n++
		if m {
			ok++
		}
		if h != "" {
			how[h] = true
		}
	}
	return ok, n
}

// repeatPairs counts the repeats whose output is their first's (exact of
// pairs), and the repeats' cached and prompt tokens; how collects what they
// were compared by.
func repeatPairs(firsts, repeats []Record, how map[string]bool) (exact, pairs, cached, prompt int) {
	for _, rep := range repeats {
		cached += rep.CachedTokens
		prompt += rep.PromptTokens
		for _, f := range firsts {
			if f.Case == rep.Case {
				pairs++
				m, h := same(f, rep)
				if m {
					exact++
				}
				if h != "" {
					how[h] = true
				}
			}
		}
	}
	return exact, pairs, cached, prompt
}

func idsTables(res *Result) []report.Table {
	t := report.Table{Screen: "ids", Title: "Native ID screen · greedy outputs", Columns: []string{"Check"}}
	refName := "the reference file"
	if res.Config.References == nil && len(res.Targets) > 0 {
		refName = res.Targets[0].Name
	}
	match := []string{"Greedy ids match " + refName}
	pairs := []string{"Repeat pairs exact"}
	by := []string{"Compared by"}
	reuse := []string{"Repeat prompt tokens from the cache"}
	var firstTarget []Record
	if len(res.Targets) > 0 {
		firstTarget = roleRecords(res.records(res.Targets[0].Name, "ids"), "first")
	}
	for j, tg := range res.Targets {
		t.Columns = append(t.Columns, tg.Name)
		recs := res.records(tg.Name, "ids")
		firsts := roleRecords(recs, "first")
		how := map[string]bool{}
		ok, n := firstMatches(firsts, res.Config.References, firstTarget, how)
		if res.Config.References == nil && j == 0 {
			match = append(match, "reference")
		} else {
			match = append(match, fmt.Sprintf("%d/%d", ok, n))
		}
		pk, pn, cached, prompt := repeatPairs(firsts, roleRecords(recs, "repeat"), how)
		pairs = append(pairs, fmt.Sprintf("%d/%d", pk, pn))
		reuse = append(reuse, count(cached)+" of "+count(prompt))
		var hs []string
		for h := range how {
			hs = append(hs, h)
		}
		slices.Sort(hs)
		by = append(by, strings.Join(hs, ", "))
	}
	t.Add(match...)
	t.Add(pairs...)
	t.Add(reuse...)
	t.Add(by...)
	length := fmt.Sprintf("%d tokens", res.Config.IDTokens)
	if res.Config.ReferenceFile != "" {
		length = "the references' lengths (" + res.Config.ReferenceFile + ")"
	}
	t.Note = fmt.Sprintf("Greedy (temperature 0, ignore_eos) text completions of %s; a repeat pair sends a prompt twice in a row, the second from the prefix cache where the server keeps it "+
		"(usage cached_tokens), and is exact when both outputs are identical. Ids are compared where the server returns them (vLLM's return_token_ids), else each token's text from logprobs, else text and count.%s %s",
		length, res.errorsNote("ids"), res.countersNote("ids"))
	return []report.Table{t}
}
