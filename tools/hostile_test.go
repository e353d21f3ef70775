package tools

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"jspark/sandbox"
)

// callWithin runs a tool call and fails the test if it blocks: the attacks
// here used to hang the host side for ever.
func callWithin(t *testing.T, ctx context.Context, env *Env, name, args string) Result {
	t.Helper()
	ch := make(chan Result, 1)
	go func() { ch <- Lookup(name).Run(ctx, env, []byte(args)) }()
	select {
	case r := <-ch:
		return r
	case <-time.After(20 * time.Second):
		t.Fatalf("%s %s: blocked", name, args)
		return Result{}
	}
}

// mkfifo, then read, write, edit and search on the FIFO: each is refused at
// once (the host side never opens it for real), and the FIFO stays a FIFO.
func TestMkfifoThenFileTools(t *testing.T) {
	env := newEnv(t, nil)
	if r := call(t, env, "bash", `{"command":"mkfifo ff"}`); *r.ExitCode != 0 {
		t.Fatalf("mkfifo: %+v", r)
	}
	for _, c := range []struct{ tool, args string }{
		{"read", `{"path":"ff"}`},
		{"write", `{"path":"ff","content":"x"}`},
		{"edit", `{"path":"ff","old_string":"a","new_string":"b"}`},
	} {
		r := callWithin(t, context.Background(), env, c.tool, c.args)
		if !r.Failed || !strings.Contains(r.Output, "not a regular file (a FIFO)") {
			t.Errorf("%s on a FIFO: %+v", c.tool, r)
		}
	}
	if r := callWithin(t, context.Background(), env, "search", `{"pattern":"x","path":"ff"}`); r.Failed || r.Output != "no matches" {
		t.Errorf("search of a FIFO: %+v", r)
	}
	if fi, err := os.Lstat(filepath.Join(env.Box.Root(), "ff")); err != nil || fi.Mode()&os.ModeNamedPipe == 0 {
		t.Errorf("ff is no longer a FIFO: %v %v", fi, err)
	}
}

// allocated is how many bytes f allocates on the heap.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// read and search of a big file stream it: what they allocate is bounded by
// the output limit and their buffers, not by the file (here 16 MiB, as lines
// and as one line).
func TestReadAndSearchOfHugeFileStream(t *testing.T) {
	env := newEnv(t, nil)
	const size = 16 << 20
	os.WriteFile(filepath.Join(env.Box.Root(), "lines"), []byte(strings.Repeat("match this line\n", size/16)), 0o644)
	os.WriteFile(filepath.Join(env.Box.Root(), "oneline"), []byte(strings.Repeat("x", size)), 0o644)
	for _, c := range []struct{ tool, args, want string }{
		{"read", `{"path":"lines"}`, "read on with offset"},
		{"read", `{"path":"lines","offset":1000000}`, "match this line"},
		{"read", `{"path":"oneline"}`, "[... line truncated: 16777216 bytes ...]"},
		{"search", `{"pattern":"match"}`, "output limit reached"},
		{"search", `{"pattern":"y","path":"oneline"}`, "no matches"},
	} {
		var r Result
		n := allocated(func() { r = callWithin(t, context.Background(), env, c.tool, c.args) })
		if r.Failed || !strings.Contains(r.Output, c.want) || len(r.Output) > env.OutputLimit+200 {
			t.Errorf("%s %s: %d bytes %q", c.tool, c.args, len(r.Output), r.Output[max(0, len(r.Output)-120):])
		}
		if n > 4<<20 {
			t.Errorf("%s %s allocated %d MiB for a %d MiB file", c.tool, c.args, n>>20, size>>20)
		}
	}
}

// A search, read or list after the cut ends with the cut's error instead of
// running on past the window.
func TestFileToolsStopAtTheCut(t *testing.T) {
	env := newEnv(t, map[string]string{"a": "x\n"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct{ tool, args string }{
		{"search", `{"pattern":"x"}`}, {"read", `{"path":"a"}`}, {"list", `{}`},
		{"write", `{"path":"b","content":"x"}`}, {"edit", `{"path":"a","old_string":"x","new_string":"y"}`},
	} {
		if r := callWithin(t, ctx, env, c.tool, c.args); r.Err == nil {
			t.Errorf("%s after the cut: %+v", c.tool, r)
		}
	}
}

// write and edit never make a file larger than the sandbox's file-size
// limit (jspark itself is not bound by RLIMIT_FSIZE).
func TestWriteAndEditPastFileSizeLimit(t *testing.T) {
	l := sandbox.DefaultLimits
	l.FileSize = 1 << 20
	box, err := sandbox.New(filepath.Join(t.TempDir(), "ws"), map[string]string{"big": strings.Repeat("y", 1<<20+1), "small": "ab"}, sandbox.Options{Limits: l})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { box.Close() })
	env := &Env{Box: box, Timeout: 5 * time.Second, OutputLimit: 2000}
	content := strings.Repeat("z", 1<<20+1)
	if r := call(t, env, "write", `{"path":"w","content":"`+content+`"}`); !r.Failed || !strings.Contains(r.Output, "file-size limit of 1048576 bytes") {
		t.Errorf("write: %.200s", r.Output)
	}
	if r := call(t, env, "edit", `{"path":"big","old_string":"y","new_string":"z"}`); !r.Failed || !strings.Contains(r.Output, "file-size limit") {
		t.Errorf("edit of a file past the limit: %.200s", r.Output)
	}
	if r := call(t, env, "edit", `{"path":"small","old_string":"a","new_string":"`+content+`"}`); !r.Failed || !strings.Contains(r.Output, "file-size limit") {
		t.Errorf("edit growing a file past the limit: %.200s", r.Output)
	}
	for _, p := range []string{"w"} {
		if _, err := os.Stat(filepath.Join(box.Root(), p)); err == nil {
			t.Errorf("%s was written", p)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(box.Root(), "small")); string(b) != "ab" {
		t.Errorf("small changed: %.20q", b)
	}
}
