package refs

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadNamesTheLine(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "refs.jsonl")
	os.WriteFile(f, []byte(`{"prompt":"a","gen_ids":[1,2],"text":"x"}`+"\n"+`{"prompt":"b"}`+"\n"), 0o644)
	if _, err := Load(f); err == nil || err.Error() != f+":2: text or gen_ids is required" {
		t.Errorf("%v", err)
	}
	os.WriteFile(f, []byte(`{"prompt":"a","gen_ids":[1,2]}`+"\n"+`{"prompt": 3}`+"\n"), 0o644)
	if _, err := Load(f); err == nil || !strings.HasPrefix(err.Error(), f+":2: json: cannot unmarshal number") {
		t.Errorf("%v", err)
	}
	if _, err := Load("../../" + Stories260K); err != nil {
		t.Error(err)
	}
}
