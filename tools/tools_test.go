package tools

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"jspark/sandbox"
)

var update = flag.Bool("update", false, "rewrite golden files")

// The schemas are part of every request's prefix: any byte that moves breaks
// prefix reuse across runs, so they are pinned.
func TestSchemasGolden(t *testing.T) {
	var b strings.Builder
	for _, tl := range All {
		line, err := json.Marshal(map[string]any{"name": tl.Name, "description": tl.Description, "parameters": tl.Parameters})
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	golden := filepath.Join("testdata", "schemas.jsonl")
	if *update {
		os.WriteFile(golden, []byte(b.String()), 0o644)
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(string(want), b.String()); d != "" {
		t.Errorf("schemas changed (-golden +now):\n%s", d)
	}
}

func newEnv(t *testing.T, files map[string]string) *Env {
	box, err := sandbox.New(filepath.Join(t.TempDir(), "ws"), files, sandbox.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { box.Close() })
	return &Env{Box: box, Timeout: 5 * time.Second, OutputLimit: 2000}
}

func call(t *testing.T, env *Env, name, args string) Result {
	t.Helper()
	return Lookup(name).Run(context.Background(), env, json.RawMessage(args))
}

func TestTools(t *testing.T) {
	env := newEnv(t, map[string]string{"src/a.py": "x = 1\ny = 2\nx = 3\n", "README": "hello\n"})
	cases := []struct {
		name, tool, args string
		out              string
		failed           bool
		code             int
	}{
		{"bash", "bash", `{"command":"cat README; (exit 3)"}`, "hello\n[exit code 3]", false, 3},
		{"bash timeout", "bash", `{"command":"sleep 100","timeout":1}`, "~\n[command timed out after 1s and was killed]\n[exit code 124]", false, 124},
		{"read", "read", `{"path":"src/a.py","offset":2,"limit":1}`, "     2\ty = 2\n", false, 0},
		{"read missing", "read", `{"path":"nope"}`, "error: read nope: no such file or directory", true, 0},
		{"read outside", "read", `{"path":"../../etc/passwd"}`, `error: "../../etc/passwd": path leaves the workspace`, true, 0},
		{"write", "write", `{"path":"new/b.txt","content":"B"}`, "wrote 1 bytes to new/b.txt", false, 0},
		{"write absolute", "write", `{"path":"/tmp/x","content":"B"}`, `error: write /tmp/x: "/tmp/x": absolute paths are refused (paths are relative to the workspace): path leaves the workspace`, true, 0},
		{"edit not unique", "edit", `{"path":"src/a.py","old_string":"x = ","new_string":"z = "}`, "error: edit src/a.py: old_string occurs 2 times; include more context to make it unique", true, 0},
		{"edit missing", "edit", `{"path":"src/a.py","old_string":"q","new_string":"z"}`, "error: edit src/a.py: old_string not found", true, 0},
		{"edit", "edit", `{"path":"src/a.py","old_string":"x = 3","new_string":"x = 4"}`, "edited src/a.py: replaced 5 bytes with 5", false, 0},
		{"list", "list", `{}`, "README\nnew/\nsrc/\n", false, 0},
		{"list recursive", "list", `{"recursive":true}`, "README\nnew/\nnew/b.txt\nsrc/\nsrc/a.py\n", false, 0},
		{"search", "search", `{"pattern":"^x = [0-9]"}`, "src/a.py:1: x = 1\nsrc/a.py:3: x = 4\n", false, 0},
		{"search bad", "search", `{"pattern":"("}`, "error: search: bad pattern: error parsing regexp: missing closing ): `(`", true, 0},
		{"missing arg", "write", `{"path":"a"}`, `error: invalid arguments for write: missing required property "content"`, true, 0},
		{"wrong type", "read", `{"path":7}`, "error: invalid arguments for read: json: cannot unmarshal number into Go struct field ReadArgs.path of type string", true, 0},
		{"unknown field", "list", `{"dir":"."}`, `error: invalid arguments for list: json: unknown field "dir"`, true, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, env, c.tool, c.args)
			// "~" marks an expectation of the output's end only (bash's kill notice names a pid).
			match := r.Output == c.out
			if suffix, ok := strings.CutPrefix(c.out, "~"); ok {
				match = strings.HasSuffix(r.Output, suffix)
			}
			if !match || r.Failed != c.failed || r.Err != nil {
				t.Errorf("got %q failed=%v err=%v, want %q failed=%v", r.Output, r.Failed, r.Err, c.out, c.failed)
			}
			if c.tool == "bash" && (r.ExitCode == nil || *r.ExitCode != c.code) {
				t.Errorf("exit code %v, want %d", r.ExitCode, c.code)
			}
		})
	}
	if b, _ := os.ReadFile(filepath.Join(env.Box.Root(), "src/a.py")); string(b) != "x = 1\ny = 2\nx = 4\n" {
		t.Errorf("after edit: %q", b)
	}
}

func TestReadCapped(t *testing.T) {
	env := newEnv(t, map[string]string{"big": strings.Repeat("0123456789\n", 1000)})
	r := call(t, env, "read", `{"path":"big"}`)
	if len(r.Output) > env.OutputLimit+100 || !strings.Contains(r.Output, "read on with offset") {
		t.Errorf("%d bytes: %q", len(r.Output), r.Output[len(r.Output)-80:])
	}
}

func TestSelect(t *testing.T) {
	ts, err := Select([]string{"write", "bash"})
	if err != nil || ts[0].Name != "write" || ts[1].Name != "bash" {
		t.Fatalf("%v %v", ts, err)
	}
	if _, err := Select([]string{"bash", "rm"}); err == nil || err.Error() != `unknown tool "rm"` {
		t.Errorf("err %v", err)
	}
}
