package record

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBodiesRoundTrip: each appended body reads back as sent, in order, a
// JSON body as its bytes (compact bodies are kept byte for byte) and one
// that is not JSON as its text.
func TestBodiesRoundTrip(t *testing.T) {
	file := filepath.Join(t.TempDir(), BodiesFile)
	sent := []struct{ path, body, want string }{
		{"/chat/completions", `{"model":"m","messages":[{"role":"user","content":"line one\nline two <b> & é"}], "stream": true}`, ""},
		{"/responses", `{"input":"x"}`, ""},
		{"/chat/completions", `{"unterminated":`, ""},
		// Pretty-printed JSON spans lines: its line holds it compacted.
		{"/responses", "{\n  \"input\": \"x y\",\n  \"stream\": true\n}", `{"input":"x y","stream":true}`},
	}
	for _, s := range sent {
		if err := AppendBody(file, s.path, []byte(s.body)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ReadBodies(file)
	if err != nil || len(got) != len(sent) {
		t.Fatalf("%d bodies, %v", len(got), err)
	}
	for i, s := range sent {
		want := s.body // byte for byte: spaces, <, &, é as sent
		if s.want != "" {
			want = s.want
		}
		if got[i].Path != s.path || !bytes.Equal(got[i].Bytes(), []byte(want)) {
			t.Errorf("body %d: %s %s, sent %s %s", i, got[i].Path, got[i].Bytes(), s.path, s.body)
		}
	}
	if got[2].JSON != nil || got[2].Text == "" {
		t.Errorf("a body that is not JSON is kept as text: %+v", got[2])
	}
}

// TestBadBodiesFileNamesTheLine: a broken line is an error naming file and
// line, never a panic or a silently shorter list.
func TestBadBodiesFileNamesTheLine(t *testing.T) {
	for name, text := range map[string]string{
		"not json": "{\"path\":\"/chat/completions\",\"body\":{}}\nnot json\n",
		"no path":  "{\"path\":\"/chat/completions\",\"body\":{}}\n{\"body\":{}}\n",
		"bad path": "{\"path\":\"/chat/completions\",\"body\":{}}\n{\"path\":\"x\",\"body\":{}}\n",
	} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), BodiesFile)
			os.WriteFile(file, []byte(text), 0o644)
			if _, err := ReadBodies(file); err == nil || !strings.Contains(err.Error(), BodiesFile+":2:") {
				t.Errorf("error %v, want one naming line 2", err)
			}
		})
	}
}
