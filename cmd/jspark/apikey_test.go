package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

func TestAPIKeyFromFlagFileOrEnvironment(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, []byte(content), 0o600)
		return p
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == APIKeyEnv {
				return v
			}
			return ""
		}
	}
	for _, c := range []struct {
		name    string
		flags   APIKeyFlags
		env     string
		want    string
		wantErr string
	}{
		{"flag", APIKeyFlags{Key: "k1"}, "k3", "k1", ""},
		{"file, first line", APIKeyFlags{File: file("key", "k2\nnot this\n")}, "k3", "k2", ""},
		{"environment", APIKeyFlags{}, " k3\n", "k3", ""},
		{"none", APIKeyFlags{}, "", "", ""},
		{"both flags", APIKeyFlags{Key: "k1", File: file("key2", "k2")}, "", "", "give --api-key or --api-key-file, not both"},
		{"empty file", APIKeyFlags{File: file("empty", "\n")}, "", "", "the first line is empty"},
		{"big file", APIKeyFlags{File: file("big", strings.Repeat("k", maxKeyFile+1))}, "", "", "over 4096 bytes"},
		{"no file", APIKeyFlags{File: filepath.Join(dir, "nosuch")}, "", "", "no such file"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.flags.resolve(env(c.env))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Errorf("error %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Errorf("%q %v, want %q", got, err, c.want)
			}
		})
	}
}

// The key on the command line is visible to every local user (and, without
// namespaces, to the sandbox reading /proc/PID/cmdline): --help says so.
func TestAPIKeyFlagHelpSaysItIsVisible(t *testing.T) {
	for _, cmd := range []string{"work", "serve"} {
		stdout, _, code := jspark(t, cmd, "--help")
		if code != 0 || !strings.Contains(stdout, "VISIBLE TO EVERY LOCAL USER in the process list: prefer --api-key-file or JSPARK_API_KEY") ||
			!strings.Contains(stdout, "--api-key-file string") {
			t.Errorf("%s --help:\n%s", cmd, stdout)
		}
	}
}

// startServeEnv is startServe with the environment given (a key in
// JSPARK_API_KEY, not on the command line).
func startServeEnv(t *testing.T, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"serve", "--port", "0"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	url := ""
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "jspark serve: ready at "); ok {
			url = strings.Fields(rest)[0]
			break
		}
	}
	if url == "" {
		t.Fatal("serve printed no ready line")
	}
	go io.Copy(io.Discard, stderr)
	return url
}

// `jspark work --api-key` against a server that requires the key: /metrics
// gets it too, so the backend's own counter counts (not streamed tokens).
func TestWorkAPIKeyReachesMetrics(t *testing.T) {
	url := startServeEnv(t, []string{APIKeyEnv + "=sekret"}, "--kv-memory", "64")
	req, _ := http.NewRequest("GET", strings.TrimSuffix(url, "/v1")+"/metrics", nil)
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("serve with %s does not require the key on /metrics: %v %v", APIKeyEnv, resp, err)
	}
	dir := t.TempDir()
	recipe := filepath.Join(dir, "small.yaml")
	os.WriteFile(recipe, []byte(smallRecipe), 0o644)
	out := filepath.Join(dir, "out")
	stdout, stderr, code := jspark(t, "work", "solo", "--recipe", recipe, "--endpoint", url, "--api-key", "sekret", "--window", "3s", "--out", out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	res := readResults(t, out)
	if got := res.Rounds[0].Summary.CountedBy; got != "prometheus" || strings.Contains(stderr, "no usable /metrics") || !strings.Contains(stdout, "vllm:generation_tokens_total") {
		t.Errorf("counted by %s; stderr:\n%s", got, stderr)
	}
}
