//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// killedEnv makes the test binary a jspark run that is then killed
// (killedRun).
const killedEnv = "JSPARK_TEST_KILLED_RUN"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(killedEnv); cfg != "" {
		killedRun(cfg)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// killedRun opens a sandbox in a folder, runs a command that writes a file,
// says READY with its uid and cgroups, then runs a command that detaches
// processes (tagged) and sleeps until the run is killed.
func killedRun(cfg string) {
	f := strings.Split(cfg, "|")
	dir, noNS, tag := f[0], f[1] == "no-namespaces", f[2]
	s, err := New(dir, map[string]string{"seed.txt": "seed\n"}, Options{NoNamespaces: noNS, Log: io.Discard})
	if err != nil {
		fmt.Println("ERROR", err)
		return
	}
	if r, err := s.Exec(context.Background(), "echo saved > work.txt", 10*time.Second, 4000); err != nil || r.ExitCode != 0 {
		fmt.Println("ERROR", r, err)
		return
	}
	var cgs []string
	if s.cg != nil {
		cgs = s.cg.dirs
	}
	fmt.Printf("READY %d %s\n", s.uid, strings.Join(cgs, ","))
	s.Exec(context.Background(), fmt.Sprintf(`(exec -a %[1]s-bg sleep 1000) & setsid bash -c 'exec -a %[1]s-setsid sleep 1000' & nohup bash -c '(exec -a %[1]s-nohup sleep 1000) & wait' >/dev/null 2>&1 & sleep 1000`, tag), time.Hour, 4000)
}

// A SIGKILLed `jspark work` left its sandboxes' cgroups behind for ever,
// lost its tmpfs workspaces with its results, and without namespaces what
// its commands had detached (setsid, nohup, a double fork) kept running as
// the sandbox's uid. The workspace is on disk as of the last command, and
// the next run removes the cgroups and kills the processes.
func TestKilledRunLeavesNothingBehind(t *testing.T) {
	if os.Getuid() != 0 {
		lacks(t, "sandboxes get uids of their own, recorded in their locks, only as root")
	}
	for _, mode := range []string{"namespaces", "no-namespaces"} {
		t.Run(mode, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "ws")
			tag := fmt.Sprintf("jspark-killed-%d", time.Now().UnixNano())
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), killedEnv+"="+dir+"|"+mode+"|"+tag)
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			line, _ := bufio.NewReader(out).ReadString('\n')
			var uid int
			var cgs string
			if _, err := fmt.Sscanf(line, "READY %d %s", &uid, &cgs); err != nil && !strings.HasPrefix(line, "READY") {
				t.Fatalf("the run: %q", line)
			}
			for deadline := time.Now().Add(20 * time.Second); countTagged(tag) < 3; time.Sleep(20 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the detached processes did not start: %d", countTagged(tag))
				}
			}
			cmd.Process.Kill()
			cmd.Wait()
			for name, want := range map[string]string{"seed.txt": "seed\n", "work.txt": "saved\n"} {
				if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
					t.Errorf("%s after the kill: %q %v", name, b, err)
				}
			}
			var left []string
			for _, cg := range strings.Split(cgs, ",") {
				if _, err := os.Stat(cg); cg != "" && err == nil {
					left = append(left, cg)
				}
			}
			if len(left) == 0 {
				t.Fatalf("the killed run left no cgroup (%q): nothing to test", cgs)
			}
			t.Logf("left by the killed run: %d cgroups, %d processes", len(left), countTagged(tag))

			r := reapDead()
			t.Logf("%s", r)
			for _, cg := range left {
				if _, err := os.Stat(cg); err == nil {
					t.Errorf("cgroup %s is still there", cg)
				}
			}
			for deadline := time.Now().Add(5 * time.Second); countTagged(tag) > 0 && time.Now().Before(deadline); {
				time.Sleep(20 * time.Millisecond)
			}
			if n := countTagged(tag); n > 0 {
				t.Errorf("%d processes of the killed run still run", n)
			}
			locks, err := lockDir()
			if err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(locks, fmt.Sprint(uid))); err != nil || len(b) != 0 {
				t.Errorf("uid %d's record after the cleanup: %q %v", uid, b, err)
			}
		})
	}
}
